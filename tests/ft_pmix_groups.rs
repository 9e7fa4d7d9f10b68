//! PMIx groups when a member dies (RFC0033), through libpmix, under
//! `fastpmi --fault-tolerant`: the leader of an invitation whose invitee
//! is SIGKILLed before joining gets `PMIX_GROUP_INVITE_FAILED` naming it
//! (from `PMIX_PROC_TERMINATED`, which its pending invitation listens for)
//! and goes on with the rest (a group of the survivors is built), with
//! Debian's library and the wheel's; a member of a group built with
//! `PMIX_GROUP_NOTIFY_TERMINATION` that is SIGKILLed gives each other
//! member `PMIX_GROUP_MEMBER_FAILED` naming it, and their destruct
//! completes over the survivors. That second case runs with the wheel's
//! 5.0 library only: Debian's 4.2 does not hand the directive to its host.

mod common;

use std::time::Duration;

use common::stacks::Stack;

fn sorted(out: &common::Outcome) -> Vec<String> {
    let mut l: Vec<String> = out.stdout_lines().iter().map(|s| s.to_string()).collect();
    l.sort();
    l
}

fn dead_rank_2_told_once(out: &common::Outcome) {
    let told = out
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("rank 2 was killed by signal 9") && l.contains("the job goes on"))
        .count();
    assert_eq!(told, 1, "{}", out.report());
}

#[test]
fn an_invitees_death_fails_the_invitation_and_the_rest_go_on() {
    let _g = common::heavy();
    let exe = common::pmix::compile("pmix_group_ft", true);
    let wheel = Stack::Ompi5
        .pmix_lib()
        .expect("the wheel ships its library");
    for lib in [None, Some(&wheel)] {
        let mut args: Vec<String> = vec!["--fault-tolerant".into(), "--pmi".into(), "pmix".into()];
        if let Some(l) = lib {
            args.extend(["--pmix-lib".into(), l.display().to_string()]);
        }
        args.extend([
            "-n".into(),
            "4".into(),
            exe.display().to_string(),
            "invite".into(),
        ]);
        let mut c = common::launch(&args).timeout(Duration::from_secs(60));
        if let Some(d) = lib.and_then(|l| l.parent()) {
            c = c.env("LD_LIBRARY_PATH", d);
        }
        let out = c.run();
        out.assert_success();
        assert_eq!(
            sorted(&out),
            ["invite failed rank 2", "rest rank 0 ok", "rest rank 1 ok"],
            "{}",
            out.report()
        );
        dead_rank_2_told_once(&out);
    }
}

#[test]
fn a_notify_termination_destruct_completes_with_an_event_per_dead_member() {
    let _g = common::heavy();
    let exe = common::pmix::compile("pmix_group_ft", true);
    let wheel = Stack::Ompi5
        .pmix_lib()
        .expect("the wheel ships its library");
    let out = common::launch([
        "--fault-tolerant",
        "--pmi",
        "pmix",
        "--pmix-lib",
        wheel.to_str().unwrap(),
        "-n",
        "4",
        exe.to_str().unwrap(),
        "destruct",
    ])
    .env("LD_LIBRARY_PATH", wheel.parent().unwrap())
    .timeout(Duration::from_secs(60))
    .run();
    out.assert_success();
    assert_eq!(
        sorted(&out),
        ["destruct rank 0 ok failed 2", "destruct rank 1 ok failed 2"],
        "{}",
        out.report()
    );
    dead_rank_2_told_once(&out);
}
