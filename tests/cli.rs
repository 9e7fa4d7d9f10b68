//! Launcher command line with plain (non-PMI) programs: `--label`, `-genv`,
//! `-env`, `-wdir`, the PMI environment each rank receives, stdout
//! forwarding, and `true`.
//!
//! Under Hydra 4.0.2 (validation mode) all pass except
//! `label_joins_partial_lines` (Hydra labels each chunk it reads, so a line
//! written in two parts comes out as `[1] par[0] par[0] tial`) and
//! `pmi_env_fd_mode` (Hydra leaves PMI_JOBID empty).

mod common;

use common::{launch, scratch_dir};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn sorted(lines: Vec<&str>) -> Vec<String> {
    let mut v: Vec<String> = lines.into_iter().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn true_runs_and_exits_zero() {
    for n in ["1", "4"] {
        let out = launch(["-n", n, "true"]).timeout(T).run();
        out.assert_success();
        assert!(
            out.stdout_lines().is_empty(),
            "`true` prints nothing\n{}",
            out.report()
        );
    }
}

/// `--label` prefixes every stdout and stderr line with `[R] `.
#[test]
fn label_prefixes_lines_with_rank() {
    let out = launch([
        "-n",
        "2",
        "--label",
        "sh",
        "-c",
        r#"echo "out-$PMI_RANK"; echo "err-$PMI_RANK" >&2"#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        sorted(out.stdout_lines()),
        vec!["[0] out-0", "[1] out-1"],
        "stdout lines should be labelled `[R] `\n{}",
        out.report()
    );
    let err = out.stderr_lines();
    for want in ["[0] err-0", "[1] err-1"] {
        assert!(
            err.contains(&want),
            "stderr should contain the line `{want}`\n{}",
            out.report()
        );
    }
}

/// A line written in two pieces is still one labelled line, and several
/// lines in one write are each labelled.
#[test]
fn label_joins_partial_lines() {
    let out = launch([
        "-n",
        "2",
        "--label",
        "sh",
        "-c",
        r#"printf "par"; sleep 0.3; printf "tial-%s\nsecond-%s\n" "$PMI_RANK" "$PMI_RANK""#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        sorted(out.stdout_lines()),
        vec![
            "[0] partial-0",
            "[0] second-0",
            "[1] partial-1",
            "[1] second-1"
        ],
        "each output line should carry exactly one `[R] ` label\n{}",
        out.report()
    );
}

/// A rank's last line without a newline is still forwarded, whole, from
/// ranks that exit at once (their pipes may end before the forwarder has
/// them) and from a large job whose output all comes at the end.
#[test]
fn unterminated_last_lines_are_forwarded() {
    for n in ["1", "64"] {
        for _ in 0..5 {
            let out = launch(["-n", n, "sh", "-c", r#"printf "last-%s" "$PMI_RANK""#])
                .timeout(T)
                .run();
            out.assert_success();
            let want: Vec<String> = (0..n.parse::<u32>().unwrap())
                .map(|r| format!("last-{r}"))
                .collect();
            let mut got = sorted(out.stdout_lines());
            got.sort_by_key(|l| l.trim_start_matches("last-").parse::<u32>().unwrap_or(0));
            assert_eq!(got, want, "-n {n}\n{}", out.report());
        }
    }
}

/// `-genv K V` reaches every rank.
#[test]
fn genv_reaches_ranks() {
    let out = launch([
        "-n",
        "3",
        "-genv",
        "FASTPMI_TEST_GENV",
        "bar baz",
        "sh",
        "-c",
        r#"echo "FASTPMI_TEST_GENV=$FASTPMI_TEST_GENV""#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["FASTPMI_TEST_GENV=bar baz"; 3],
        "every rank should see the -genv value\n{}",
        out.report()
    );
}

/// `-env K V` reaches the ranks too.
#[test]
fn env_reaches_ranks() {
    let out = launch([
        "-n",
        "2",
        "-env",
        "FASTPMI_TEST_ENV",
        "xyz",
        "sh",
        "-c",
        r#"echo "FASTPMI_TEST_ENV=$FASTPMI_TEST_ENV""#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["FASTPMI_TEST_ENV=xyz"; 2],
        "every rank should see the -env value\n{}",
        out.report()
    );
}

/// `-wdir DIR` sets the ranks' working directory.
#[test]
fn wdir_sets_working_directory() {
    let dir = scratch_dir("wdir");
    let want = std::fs::canonicalize(dir.path()).unwrap();
    let out = launch(["-n", "2", "-wdir", want.to_str().unwrap(), "pwd"])
        .timeout(T)
        .run();
    out.assert_success();
    let want = want.to_str().unwrap();
    assert_eq!(
        out.stdout_lines(),
        vec![want; 2],
        "every rank should start in the -wdir directory\n{}",
        out.report()
    );
}

/// FD mode: every rank gets PMI_RANK, PMI_SIZE, a non-empty PMI_JOBID and a
/// PMI_FD that is an open socket.
#[test]
fn pmi_env_fd_mode() {
    let out = launch([
        "-n",
        "3",
        "sh",
        "-c",
        r#"if [ -S "/proc/$$/fd/$PMI_FD" ]; then s=socket; else s="not-a-socket($PMI_FD)"; fi
echo "rank=$PMI_RANK size=$PMI_SIZE jobid=${PMI_JOBID:+set} fd=$s""#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        sorted(out.stdout_lines()),
        (0..3)
            .map(|r| format!("rank={r} size=3 jobid=set fd=socket"))
            .collect::<Vec<_>>(),
        "PMI environment in FD mode\n{}",
        out.report()
    );
}

/// Port mode: every rank gets PMI_PORT and PMI_ID, and no PMI_FD.
#[test]
fn pmi_env_port_mode() {
    let out = launch([
        "-n",
        "2",
        "--pmi-port",
        "sh",
        "-c",
        r#"echo "id=$PMI_ID port=${PMI_PORT:+set} fd=${PMI_FD:-unset}""#,
    ])
    .timeout(T)
    .run();
    out.assert_success();
    assert_eq!(
        sorted(out.stdout_lines()),
        vec!["id=0 port=set fd=unset", "id=1 port=set fd=unset"],
        "PMI environment in port mode\n{}",
        out.report()
    );
}

/// Output of many ranks is forwarded completely.
#[test]
fn stdout_of_64_ranks_is_complete() {
    let out = launch(["-n", "64", "sh", "-c", r#"echo "line-$PMI_RANK""#])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let mut want: Vec<String> = (0..64).map(|r| format!("line-{r}")).collect();
    want.sort();
    assert_eq!(
        sorted(out.stdout_lines()),
        want,
        "one line per rank\n{}",
        out.report()
    );
}

/// The short spellings `-np N` and `-l` work like `-n N` and `--label`.
#[test]
fn short_flags_np_and_l() {
    let out = launch(["-np", "2", "-l", "sh", "-c", "echo x"])
        .timeout(T)
        .run();
    out.assert_success();
    assert_eq!(
        sorted(out.stdout_lines()),
        vec!["[0] x", "[1] x"],
        "`-np 2 -l` should run two labelled ranks\n{}",
        out.report()
    );
}
