//! Running a program of a real MPI stack under its own launcher, then
//! under fastpmi, with a verdict that names the half that failed (the
//! dynamic-process and name-service tests).

use super::stacks::Stack;
use super::{assert_no_process_left, heavy, scratch_dir, unique_copy, Cmd, Outcome};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long processes of a finished job may take to disappear.
pub const GRACE: Duration = Duration::from_secs(5);

/// Which launcher a half ran under, for failure messages.
#[derive(Clone, Copy)]
pub enum Half {
    Own,
    Fastpmi,
    /// A test that only fastpmi can run (its doc comment says why).
    FastpmiOnly,
}

impl Half {
    pub fn blame(self) -> &'static str {
        match self {
            Half::Own => {
                "UNDER THE STACK'S OWN LAUNCHER (this half must pass: the test program or the \
                 stack installation is broken, not fastpmi)"
            }
            Half::Fastpmi => "UNDER FASTPMI (the stack's own launcher passed this test)",
            Half::FastpmiOnly => "UNDER FASTPMI (a fastpmi-only test: see its doc comment)",
        }
    }
}

/// Sorted non-empty stdout lines.
pub fn sorted_lines(out: &Outcome) -> Vec<String> {
    let mut v: Vec<String> = out.stdout_lines().iter().map(|l| l.to_string()).collect();
    v.sort();
    v
}

/// A check of the sorted stdout lines: exactly these lines, in any order.
pub fn exactly(expected: Vec<String>) -> impl Fn(&[String]) -> Result<(), String> {
    move |lines: &[String]| {
        let mut want = expected.clone();
        want.sort();
        if lines == want.as_slice() {
            Ok(())
        } else {
            Err(format!(
                "stdout lines (sorted) should be exactly {want:#?}\ngot {lines:#?}"
            ))
        }
    }
}

/// Exit 0 and the lines pass `check`; otherwise a message saying which
/// half failed, with the launcher's output.
pub fn verdict(
    half: Half,
    out: &Outcome,
    check: &dyn Fn(&[String]) -> Result<(), String>,
) -> Result<(), String> {
    if !out.status.success() {
        return Err(format!(
            "{}: the launcher did not exit 0\n{}",
            half.blame(),
            out.report()
        ));
    }
    check(&sorted_lines(out)).map_err(|e| format!("{}: {e}\n{}", half.blame(), out.report()))
}

/// [`verdict`] must pass, and no process of `exe` may be left.
pub fn judge(
    half: Half,
    out: &Outcome,
    exe: &Path,
    check: &dyn Fn(&[String]) -> Result<(), String>,
) {
    if let Err(e) = verdict(half, out, check) {
        panic!("{e}");
    }
    assert_no_process_left(exe, GRACE);
}

/// A private copy of `exe` in `<dir>/bin/` (so the job's working directory,
/// `dir`, differs from the program's directory).
pub fn private_copy(exe: &Path, dir: &Path, tag: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("create bin dir");
    unique_copy(exe, &bin, tag)
}

/// Run `-n N <program> ARGS` of `stack` under its own launcher, then under
/// fastpmi, both in a scratch directory with `extra_env`; both halves must
/// pass `check`.
#[allow(clippy::too_many_arguments)]
pub fn own_then_fastpmi(
    stack: Stack,
    source: &str,
    tag: &str,
    n: usize,
    args: &[&str],
    extra_env: &[(&str, &str)],
    timeout: Duration,
    check: &dyn Fn(&[String]) -> Result<(), String>,
) {
    let _g = heavy();
    let dir = scratch_dir(tag);
    let exe = private_copy(&stack.program(source), dir.path(), tag);
    let mut argv: Vec<String> = vec!["-n".into(), n.to_string(), exe.display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));

    let with_env = |mut c: Cmd| {
        for (k, v) in extra_env {
            c = c.env(k, v);
        }
        c.cwd(dir.path()).timeout(timeout)
    };
    let own_argv: Vec<String> = stack
        .own_flags()
        .iter()
        .map(|f| f.to_string())
        .chain(argv.iter().cloned())
        .collect();
    let own = with_env(stack.own_launcher(&own_argv)).run();
    judge(Half::Own, &own, &exe, check);
    let fast = with_env(stack.fastpmi(&argv)).run();
    judge(Half::Fastpmi, &fast, &exe, check);
    // A PMIx stack: with its own server library too (Debian's 4.2 above).
    if let Some(lib) = stack.pmix_lib() {
        let with_lib: Vec<String> = ["--pmix-lib".to_string(), lib.display().to_string()]
            .into_iter()
            .chain(argv.iter().cloned())
            .collect();
        let fast = with_env(stack.fastpmi(&with_lib)).run();
        judge(Half::Fastpmi, &fast, &exe, check);
    }
}
