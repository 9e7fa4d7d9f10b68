//! What the launcher's own entry point (`entry/`: the C `main`, in
//! place of std's) prepares before the program runs: standard descriptors
//! that are never some other file's, and an ignored `SIGPIPE`.

use std::io::Read;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_fastpmi");

/// A launcher started with its stdin and stdout closed has `/dev/null` on
/// 0 and 1, not the first descriptors it opens itself (its event loop, a
/// rank's socket), which would then be read from or written to as stdio.
#[test]
fn closed_stdio_is_reopened_on_dev_null() {
    // The rank's parent is the launcher: it reads the launcher's table.
    let rank = r#"for n in 0 1; do echo "fd$n=$(readlink /proc/$PPID/fd/$n)" >&2; done"#;
    let out = Command::new("sh")
        .args(["-c", r#"exec "$0" -n 1 sh -c "$1" <&- >&-"#, BIN, rank])
        .stdin(Stdio::null())
        .output()
        .expect("run the launcher through sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for n in 0..2 {
        assert!(
            err.lines().any(|l| l == format!("fd{n}=/dev/null")),
            "the launcher's descriptor {n} is not /dev/null: {err}"
        );
    }
}

/// A launcher whose stdout reader is gone is not killed by `SIGPIPE` when
/// it forwards a rank's output: the job runs to its end and the launcher
/// exits with the rank's status.
#[test]
fn a_closed_stdout_pipe_does_not_kill_the_launcher() {
    let mut child = Command::new(BIN)
        // The rank writes after the pipe's only reader is closed below.
        .args(["-n", "1", "sh", "-c", "sleep 0.3; echo lost; exit 3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the launcher");
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut err)
        .expect("read the launcher's stderr");
    let status = child.wait().expect("wait for the launcher");
    assert_eq!(
        status.code(),
        Some(3),
        "the launcher did not exit with the rank's status: {status:?}, {err}"
    );
}
