//! When the launcher starts its output-forwarding thread (only once a rank
//! has written something: until then the event loop holds the pipes), and
//! that output held or written late is forwarded whole.

mod common;

use common::{launch, scratch_dir};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// How many output-forwarding threads the launcher has, as ranks wrote it
/// into `dir` (one file per rank).
fn forwarders_seen(dir: &std::path::Path, n: u32) -> Vec<u32> {
    (0..n)
        .map(|r| {
            let f = dir.join(format!("threads.{r}"));
            let s = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{}: {s:?}", f.display()))
        })
        .collect()
}

/// The rank's parent is the launcher: count its threads named
/// `fastpmi-output`, after the launcher's own start-up is surely done
/// (`grep -c` fails when it counts none).
const COUNT: &str = r#"sleep 0.3; cat /proc/$PPID/task/*/comm | grep -c fastpmi-output > "$0/threads.$PMI_RANK"; true"#;

/// Ranks that write nothing never start the thread; a rank that writes
/// does (checked in the same way, so the count is not vacuous).
#[test]
fn the_output_thread_starts_only_once_a_rank_writes() {
    for n in [1u32, 4] {
        let dir = scratch_dir("silent");
        let d = dir.path().to_str().unwrap();
        let out = launch(["-n", &n.to_string(), "sh", "-c", COUNT, d])
            .timeout(T)
            .run();
        out.assert_success();
        assert_eq!(
            forwarders_seen(dir.path(), n),
            vec![0; n as usize],
            "-n {n}: an output thread without output\n{}",
            out.report()
        );

        let dir = scratch_dir("talking");
        let d = dir.path().to_str().unwrap();
        let talk = format!("echo hello; {COUNT}");
        let out = launch(["-n", &n.to_string(), "sh", "-c", &talk, d])
            .timeout(T)
            .run();
        out.assert_success();
        assert_eq!(
            out.stdout_lines(),
            vec!["hello"; n as usize],
            "{}",
            out.report()
        );
        assert_eq!(
            forwarders_seen(dir.path(), n),
            vec![1; n as usize],
            "-n {n}: no output thread once ranks wrote\n{}",
            out.report()
        );
    }
}

/// Output that comes after the pipes were held for a while, more than a
/// pipe holds (the rank blocks until it is read), arrives whole.
#[test]
fn output_after_a_quiet_start_is_forwarded_whole() {
    let out = launch([
        "-n",
        "2",
        "sh",
        "-c",
        r#"sleep 0.2; i=0; while [ $i -lt 4000 ]; do echo "line-$PMI_RANK-$i-................................................"; i=$((i+1)); done; echo "err-$PMI_RANK" >&2"#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert_eq!(lines.len(), 8000, "{}", out.report());
    for r in 0..2 {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with(&format!("line-{r}-")))
                .count(),
            4000,
            "rank {r}\n{}",
            out.report()
        );
        assert!(
            out.stderr_lines().contains(&format!("err-{r}").as_str()),
            "{}",
            out.report()
        );
    }
}

/// A rank's background child that writes after the rank exited, within
/// the launcher's grace for open pipes, is forwarded although no output
/// thread was running when the job ended.
#[test]
fn late_output_of_a_ranks_child_is_forwarded() {
    let out = launch(["-n", "1", "sh", "-c", "(sleep 0.2; echo late) & exit 0"])
        .timeout(T)
        .run();
    out.assert_success();
    assert_eq!(out.stdout_lines(), vec!["late"], "{}", out.report());
}
