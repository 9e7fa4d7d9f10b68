//! Continued commands with real ranks (docs/continued.md): values larger
//! than one PMI-2 message through fastpmi's Rust client, on shared memory
//! (the launcher keeps them beside the segment) and on the socket, in FD
//! and port mode; and a spawn of 20 000 long arguments. The wire details
//! (order, bounds, expiry) are the server's tests
//! (server/src/tests/continued.rs).

mod common;
mod rank_role;

use std::time::Duration;

/// Value `i` of rank `r`: `len` bytes with `;` and `=` in them, no two alike.
fn value(r: u32, i: u32, len: usize) -> Vec<u8> {
    let seed = format!("r{r}i{i};=");
    seed.bytes().cycle().take(len).collect()
}

const SIZES: [usize; 3] = [1_500_000, 3_200_000, 800];

fn role_large_values() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let (rank, size) = (pmi.rank(), pmi.size());
    rank_role::ensure_transport(&pmi)?;
    rank_role::ensure(pmi.large_value_max() >= 16 << 20, || {
        format!("large_value_max {}", pmi.large_value_max())
    })?;
    for (i, len) in SIZES.iter().enumerate() {
        pmi.put(format!("v{i}-{rank}"), value(rank, i as u32, *len))
            .map_err(|e| format!("put of {len} bytes: {e}"))?;
    }
    pmi.fence().map_err(|e| e.to_string())?;
    for r in 0..size {
        for (i, len) in SIZES.iter().enumerate() {
            let got = pmi
                .get(format!("v{i}-{r}"), Some(r))
                .map_err(|e| format!("get v{i}-{r}: {e}"))?;
            rank_role::ensure(
                got.as_deref() == Some(&value(r, i as u32, *len)[..]),
                || format!("v{i}-{r}: {} bytes, want {len}", got.map_or(0, |v| v.len())),
            )?;
        }
    }
    // Past the bound: refused by the client, with the bound named.
    match pmi.put("too-big", vec![b'x'; (16 << 20) + 1]) {
        Err(e) if e.to_string().contains("16777216") => {}
        other => return Err(format!("a value past the bound: {other:?}")),
    }
    pmi.fence().map_err(|e| e.to_string())?;
    println!("large values ok rank {rank}");
    pmi.finalize().map_err(|e| e.to_string())
}

fn large_values(transport: &str, flags: &[&str]) {
    let out = rank_role::launch("large_values_travel_in_parts", "large", 3, flags)
        .env("FASTPMI_TRANSPORT", transport)
        .env("FASTPMI_TEST_TRANSPORT", transport)
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    let mut lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("large values"))
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "large values ok rank 0",
            "large values ok rank 1",
            "large values ok rank 2"
        ],
        "{transport} {flags:?}\n{}",
        out.report()
    );
}

#[test]
fn large_values_travel_in_parts() {
    match rank_role::role().as_deref() {
        Some("large") => rank_role::finish(role_large_values()),
        Some("spawner") => rank_role::finish(role_spawner()),
        Some(r) => rank_role::finish(Err(format!("unknown role {r}"))),
        None => {}
    }
    large_values("shm", &[]);
    large_values("socket", &[]);
    large_values("socket", &["--pmi-port"]);
}

/// Argument `i` of the spawn: 60 bytes, all different.
fn arg(i: usize) -> String {
    format!("argument-{i:05}-{}", "x".repeat(45))
}

const ARGS: usize = 20_000;

fn role_spawner() -> Result<(), String> {
    let pmi = rank_role::init()?;
    // A shell that reports what it got: the count, the first and the last.
    let mut args = vec![
        "-c".to_string(),
        r#"eval "last=\${$#}"; echo "child argc=$# first=$1 last=$last""#.to_string(),
        "sh".to_string(),
    ];
    args.extend((0..ARGS).map(arg));
    let req = fastpmi_client::SpawnRequest {
        cmds: vec![fastpmi_client::SpawnCmd {
            exe: "/bin/sh".into(),
            maxprocs: 1,
            args,
            info: vec![],
        }],
        preput: vec![],
    };
    let s = pmi.spawn(&req).map_err(|e| format!("spawn: {e}"))?;
    rank_role::ensure(s.errcodes == [0], || format!("errcodes {:?}", s.errcodes))?;
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn a_spawn_of_20000_arguments_starts_its_child_with_all_of_them() {
    if rank_role::role().is_some() {
        return large_values_travel_in_parts();
    }
    let out = rank_role::launch(
        "a_spawn_of_20000_arguments_starts_its_child_with_all_of_them",
        "spawner",
        1,
        &[],
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_success();
    let want = format!("child argc={ARGS} first={} last={}", arg(0), arg(ARGS - 1));
    assert!(
        out.stdout_lines().iter().any(|l| l.ends_with(&want)),
        "want {want}\n{}",
        out.report()
    );
}
