//! Ranks of Open MPI waiting in `MPI_Init` must not starve the ranks still
//! starting and the launcher's PMIx server (docs/pmix.md, "Start-up stalls
//! at 256 ranks"): the PMIx ranks of a job with more ranks than CPUs get a
//! timer slack of 1 ms, so that Open MPI's `usleep(100)` wait loop sleeps
//! about a millisecond; other ranks keep the kernel's default (50 µs), and
//! `FASTPMI_PMIX_TIMER_SLACK_US` sets it.

mod common;

use std::time::Duration;

/// `tests/c/timer_slack.c`, built with gcc (no library needed).
fn program() -> std::path::PathBuf {
    common::pmix::compile("timer_slack", false)
}

/// The slack each rank printed.
fn slacks(out: &common::Outcome) -> Vec<u64> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("slack ")?.trim().parse().ok())
        .collect()
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Vec<u64> {
    let mut c = common::launch(args).timeout(Duration::from_secs(120));
    for (k, v) in env {
        c = c.env(k, v);
    }
    let out = c.run();
    out.assert_success();
    slacks(&out)
}

#[test]
fn oversubscribed_pmix_ranks_wait_with_a_coarser_timer_others_do_not() {
    let _g = common::heavy();
    let prog = program();
    let p = prog.to_str().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get() as u32;
    let over = (cpus + 1).to_string();
    let default = run(&["-n", "1", p], &[])[0];
    assert_eq!(default, 50_000, "the kernel's default slack");

    let pmix = run(&["--pmi", "pmix", "-n", &over, p], &[]);
    assert_eq!(pmix, vec![1_000_000; cpus as usize + 1]);
    // Not oversubscribed, or not PMIx: untouched.
    assert_eq!(run(&["--pmi", "pmix", "-n", "1", p], &[]), [default]);
    assert_eq!(
        run(&["--pmi", "pmi", "-n", &over, p], &[]),
        vec![default; cpus as usize + 1]
    );
    // The knob: another value, or 0 for none.
    assert_eq!(
        run(
            &["--pmi", "pmix", "-n", &over, p],
            &[("FASTPMI_PMIX_TIMER_SLACK_US", "250")]
        ),
        vec![250_000; cpus as usize + 1]
    );
    assert_eq!(
        run(
            &["--pmi", "pmix", "-n", &over, p],
            &[("FASTPMI_PMIX_TIMER_SLACK_US", "0")]
        ),
        vec![default; cpus as usize + 1]
    );
}
