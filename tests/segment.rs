//! The job segment as a plain PMI-2 program sees it, and its cleanup.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{launch, prog, Prog};

fn expected_stamp() -> String {
    let (magic, major, minor, hash) = shm_layout::stamp();
    let magic = String::from_utf8_lossy(&magic)
        .trim_end_matches('\0')
        .to_string();
    format!("magic={magic} major={major} minor={minor} hash=0x{hash:016x}")
}

#[test]
fn a_pmi2_program_maps_the_advertised_segment_and_finds_the_stamp() {
    let _g = common::heavy();
    let bin = prog(Prog::SegmentStamp);
    for pool in ["anonmmap", "sysv"] {
        let out = launch([
            std::ffi::OsStr::new("--mem-pool"),
            pool.as_ref(),
            "-n".as_ref(),
            "4".as_ref(),
            bin.as_os_str(),
        ])
        .run();
        out.assert_success();
        let lines = out.stdout_lines();
        assert_eq!(lines.len(), 4, "{}", out.report());
        for r in 0..4 {
            let line = lines
                .iter()
                .find(|l| l.starts_with(&format!("rank {r} ")))
                .unwrap_or_else(|| panic!("{}", out.report()));
            assert!(
                line.contains(&format!("pool {pool} {}", expected_stamp())),
                "{line}"
            );
        }
    }
}

/// SysV segments created by process `pid`, from /proc/sysvipc/shm.
fn sysv_segments_of(pid: u32) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
    let mut header = table.lines().next().unwrap_or("").split_whitespace();
    let cpid_col = header.position(|h| h == "cpid").expect("cpid column");
    table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(cpid_col) == Some(&pid.to_string()))
        .map(str::to_string)
        .collect()
}

fn dev_shm() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn no_segment_outlives_the_launcher_even_after_kill_9() {
    let bin = env!("CARGO_BIN_EXE_fastpmi");
    let shm_before = dev_shm();
    for pool in ["sysv", "anonmmap"] {
        let marker = format!("fastpmi-leftover-{pool}-{}", std::process::id());
        let mut child = Command::new(bin)
            .args([
                "--mem-pool",
                pool,
                "-n",
                "3",
                "sh",
                "-c",
                &format!("sleep 30 # {marker}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let t = Instant::now();
        // While the job runs the SysV segment exists (already marked for removal).
        if pool == "sysv" {
            while sysv_segments_of(pid).is_empty() && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let segs = sysv_segments_of(pid);
            assert_eq!(
                segs.len(),
                1,
                "the launcher should own exactly one SysV segment: {segs:?}"
            );
        } else {
            std::thread::sleep(Duration::from_millis(300));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // The ranks die with the launcher (PDEATHSIG); then the kernel frees the segment.
        let t = Instant::now();
        while !sysv_segments_of(pid).is_empty() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            sysv_segments_of(pid).is_empty(),
            "{pool}: SysV segment left behind"
        );
    }
    // Normal exit and a crashing rank, with both pools.
    for pool in ["sysv", "anonmmap"] {
        let ok = Command::new(bin)
            .args(["--mem-pool", pool, "-n", "2", "true"])
            .status()
            .unwrap();
        assert!(ok.success());
        let crash = Command::new(bin)
            .args(["--mem-pool", pool, "-n", "2", "sh", "-c", "kill -9 $$"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(crash.code(), Some(137));
    }
    assert_eq!(dev_shm(), shm_before, "/dev/shm changed");
}
