//! `fastpmi demo -n N`: a business-card exchange that needs nothing else
//! installed. The launcher runs its own binary as N ranks; each puts one
//! ~100-byte card, fences, gets and verifies every rank's card, then the
//! ranks share their timings so rank 0 can print a summary.

use std::time::{Duration, Instant};

use crate::config::{App, LaunchConfig};
use fastpmi_client::{Pmi, PmiError, TransportKind};

/// Run the demo job; returns the launcher's exit status.
pub fn launch(nranks: u32, mut cfg: LaunchConfig) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            crate::errln!("fastpmi demo: cannot find my own binary: {e}");
            return 1;
        }
    };
    cfg.apps = vec![App {
        nranks,
        program: exe.into(),
        args: vec!["__demo-rank".into()],
        ..App::default()
    }];
    let t0 = Instant::now();
    let code = crate::launcher::run(&cfg);
    let wall = t0.elapsed();
    if code == 0 {
        crate::outln!("  whole job (launch to last exit): {:.1} ms", ms(wall));
    }
    code
}

/// The card rank `r` puts: deterministic, so every reader can verify it.
pub fn card(r: u32) -> String {
    let mut s = format!("card-of-rank-{r:06}-");
    let mut x = (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while s.len() < 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(char::from(b"0123456789ABCDEF"[(x & 15) as usize]));
    }
    s
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Entry point of one demo rank.
pub fn rank_main() -> i32 {
    match rank() {
        Ok(()) => 0,
        Err(e) => {
            crate::errln!("demo rank failed: {e}");
            1
        }
    }
}

fn rank() -> Result<(), PmiError> {
    let t = Instant::now();
    let pmi = Pmi::init()?;
    let t_init = t.elapsed();
    let (me, n) = (pmi.rank(), pmi.size());
    let t = Instant::now();
    pmi.put(format!("bc-{me}"), card(me))?;
    let t_put = t.elapsed();
    let t = Instant::now();
    pmi.fence()?;
    let t_fence = t.elapsed();
    let t = Instant::now();
    for r in 0..n {
        let got = pmi.get(format!("bc-{r}"), Some(r))?;
        if got.as_deref() != Some(card(r).as_bytes()) {
            return Err(PmiError::Protocol(format!(
                "rank {me}: card of rank {r} is wrong: {:?}",
                got.map(|v| String::from_utf8_lossy(&v).into_owned())
            )));
        }
    }
    let t_get = t.elapsed();
    // Share timings (in µs) so rank 0 can report medians and maxima.
    let mine = [t_init, t_put, t_fence, t_get]
        .map(|d| d.as_micros().to_string())
        .join(",");
    pmi.put(format!("t-{me}"), mine)?;
    pmi.fence()?;
    if me == 0 {
        let mut cols: [Vec<f64>; 4] = Default::default();
        for r in 0..n {
            let v = pmi.get(format!("t-{r}"), Some(r))?.unwrap_or_default();
            for (i, x) in String::from_utf8_lossy(&v).split(',').enumerate().take(4) {
                cols[i].push(x.parse::<f64>().unwrap_or(0.0) / 1e3);
            }
        }
        let how = match pmi.transport() {
            TransportKind::Shm => "shared-memory job segment (lock-free KVS, futex fence)",
            TransportKind::Socket => "PMI-2 over the launcher's socket",
            TransportKind::Singleton => "singleton (no launcher)",
        };
        crate::outln!(
            "fastpmi demo: {n} ranks exchanged business cards ({} gets), all verified",
            n as u64 * n as u64
        );
        crate::outln!("  transport: {how}");
        crate::outln!(
            "  {:<8} {:>10} {:>10}   (ms, over all ranks)",
            "",
            "median",
            "max"
        );
        for (name, c) in ["init", "put", "fence", "get-all"]
            .iter()
            .zip(cols.iter_mut())
        {
            c.sort_by(f64::total_cmp);
            crate::outln!(
                "  {:<8} {:>10.3} {:>10.3}",
                name,
                c[c.len() / 2],
                c[c.len() - 1]
            );
        }
        let per_get = cols[3][cols[3].len() / 2] * 1e3 / n as f64;
        crate::outln!("  per get (median rank): {per_get:.2} µs");
    }
    pmi.finalize()?;
    Ok(())
}
