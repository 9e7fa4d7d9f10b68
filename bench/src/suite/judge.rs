//! How a finished run becomes a [`Record`]: exit status, result line,
//! transport, and the families' own checks.

use std::collections::BTreeMap;

use crate::configs::{is_shm_transport, Config, Kind};
use crate::proc::{End, Outcome};
use crate::record::{
    parse_exchange_line, parse_floor_line, parse_spawn_line, Record, Status, METRICS,
};
use crate::{deaths, groups, launch, nested, ps, python, ulfm};

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Turn a finished run into a record: success needs exit 0, a parseable
/// result line and (for the Rust client) the expected transport.
pub fn judge(config: Config, n: u32, rep: u32, o: &Outcome, timeout_s: u64) -> Record {
    let mut r = Record {
        config,
        n,
        rep,
        status: Status::Ok,
        wall_s: Some(o.wall.as_secs_f64()),
        transport: None,
        metrics: BTreeMap::new(),
        mem: o.mem.clone(),
        error: String::new(),
    };
    let fail = |r: &mut Record, status: Status, why: String| {
        r.status = status;
        let t = tail(&o.stderr, 12);
        r.error = if t.is_empty() {
            format!("{why} (no stderr)")
        } else {
            format!("{why}; stderr tail:\n{t}")
        };
    };
    match &o.end {
        End::Exited(0) => {}
        End::TimedOut => {
            r.status = Status::TimedOut;
            let why = format!("timed out after {timeout_s} s (process tree killed)");
            let why = if config.kind() == Kind::Ulfm {
                format!("{why}; {}", ulfm::note(n, o, &mut r))
            } else {
                why
            };
            fail(&mut r, Status::TimedOut, why);
            return r;
        }
        other => {
            r.status = Status::Failed;
            let why = other.describe(std::time::Duration::from_secs(timeout_s));
            let why = if config.kind() == Kind::Ulfm {
                format!("{why}; {}", ulfm::note(n, o, &mut r))
            } else {
                why
            };
            fail(&mut r, Status::Failed, why);
            return r;
        }
    }
    match config.kind() {
        Kind::Exchange | Kind::Ps => {
            let Some(kv) = parse_exchange_line(&o.stdout) else {
                fail(
                    &mut r,
                    Status::Failed,
                    "exit 0 but no result line on stdout".into(),
                );
                return r;
            };
            for k in METRICS {
                if let Some(v) = kv.get(*k).and_then(|v| v.parse::<f64>().ok()) {
                    r.metrics.insert(k.to_string(), v);
                }
            }
            if kv.get("n").and_then(|v| v.parse::<u32>().ok()) != Some(n) {
                fail(
                    &mut r,
                    Status::Failed,
                    format!("result line says n={:?}, expected {n}", kv.get("n")),
                );
                return r;
            }
            r.transport = kv.get("transport").cloned();
            if let Some(want) = config.expected_transport() {
                let got = r.transport.clone().unwrap_or_else(|| "unreported".into());
                let ok = if want == "shm" {
                    is_shm_transport(&got)
                } else {
                    got == want
                };
                if !ok {
                    r.status = Status::WrongTransport;
                    r.error =
                        format!("rank 0 reported transport={got}, this configuration needs {want}");
                }
            }
            if config.kind() == Kind::Ps && r.status == Status::Ok {
                if let Err(why) = ps::judge(config, o, &mut r) {
                    fail(&mut r, Status::Failed, why);
                }
            }
        }
        Kind::Floor => match parse_floor_line(&o.stdout) {
            Some(us) => {
                // The floor's one figure is a steady-state fence: it lines
                // up with the rank program's fence loop.
                r.metrics.insert("fence_loop_us".into(), us);
            }
            None => fail(&mut r, Status::Failed, "no per-fence line on stdout".into()),
        },
        Kind::Spawn => match parse_spawn_line(&o.stdout, n) {
            Some(ms) => {
                r.metrics.insert("spawn_ms".into(), ms);
            }
            None => fail(
                &mut r,
                Status::Failed,
                format!("no \"mpi_spawn ok children={n} spawn_ms=...\" line on stdout"),
            ),
        },
        Kind::Group => {
            if let Err(why) = groups::judge(n, o, &mut r) {
                fail(&mut r, Status::Failed, why);
            }
        }
        Kind::Death => {
            if let Err(why) = deaths::judge(n, o, &mut r) {
                fail(&mut r, Status::Failed, why);
            }
        }
        Kind::Ulfm => {
            if let Err(why) = ulfm::judge(n, o, &mut r) {
                fail(&mut r, Status::Failed, why);
            }
        }
        Kind::Python => {
            if let Err(why) = python::judge(config, n, o, &mut r) {
                fail(&mut r, Status::Failed, why);
            }
        }
        Kind::Nested => {
            if let Err(why) = nested::judge(n, o, &mut r) {
                fail(&mut r, Status::Failed, why);
            }
        }
        Kind::Launch => match launch::judge(config, n, o) {
            Ok(()) => launch::record(&mut r),
            Err(why) => fail(&mut r, Status::Failed, why),
        },
        Kind::Placement => {
            if !o.stdout.contains(" ok size=") {
                fail(
                    &mut r,
                    Status::Failed,
                    "exit 0 but rank 0 printed no \"... ok size=N\" line".into(),
                );
            }
        }
        Kind::Startup => {
            if !o.stdout.contains("mpi_hello ok") {
                fail(
                    &mut r,
                    Status::Failed,
                    "exit 0 but rank 0 printed no \"mpi_hello ok\"".into(),
                );
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(end: End, stdout: &str) -> Outcome {
        Outcome {
            end,
            wall: std::time::Duration::from_millis(5),
            stdout: stdout.into(),
            stderr: "line 1\nlast words\n".into(),
            mem: None,
            polls: Vec::new(),
        }
    }

    #[test]
    fn judges_runs() {
        let line = "n=4 init_us=1 put_us=2 fence_us=3 getall_us=4 fence2_us=5 total_us=9 transport=socket\n";
        let r = judge(
            Config::FastpmiSocket,
            4,
            0,
            &outcome(End::Exited(0), line),
            120,
        );
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.exchange_us(), Some(14.0));
        // The shm configuration must not count a socket run.
        let r = judge(
            Config::FastpmiShm,
            4,
            0,
            &outcome(End::Exited(0), line),
            120,
        );
        assert_eq!(r.status, Status::WrongTransport);
        assert!(r.error.contains("transport=socket"), "{}", r.error);
        let shm = line.replace("socket", "shm");
        let r = judge(
            Config::FastpmiShm,
            4,
            0,
            &outcome(End::Exited(0), &shm),
            120,
        );
        assert_eq!(r.status, Status::Ok);
        // Wrong N, no line, non-zero exit, timeout: failed, with the stderr tail.
        let r = judge(
            Config::FastpmiSocket,
            8,
            0,
            &outcome(End::Exited(0), line),
            120,
        );
        assert_eq!(r.status, Status::Failed);
        let r = judge(
            Config::SlurmPmi2,
            4,
            0,
            &outcome(End::Exited(0), "hello\n"),
            120,
        );
        assert_eq!(r.status, Status::Failed);
        let r = judge(Config::SlurmPmi2, 4, 0, &outcome(End::Exited(1), line), 120);
        assert_eq!(r.status, Status::Failed);
        assert!(r.error.contains("exit status 1") && r.error.contains("last words"));
        let r = judge(Config::Hydra, 4, 0, &outcome(End::TimedOut, ""), 120);
        assert_eq!(r.status, Status::TimedOut);
        assert!(r.error.contains("120 s"));
        let r = judge(
            Config::FutexFloor,
            4,
            0,
            &outcome(End::Exited(0), "n=4 spin=100 per-fence 7.5 us\n"),
            120,
        );
        assert_eq!((r.status, r.get("fence_loop_us")), (Status::Ok, Some(7.5)));
        let r = judge(Config::MpichHydra, 4, 0, &outcome(End::Exited(0), ""), 120);
        assert_eq!(r.status, Status::Failed);
    }
}
