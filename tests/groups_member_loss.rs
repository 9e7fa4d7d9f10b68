//! A group member killed during a group fence (docs/groups.md), with real
//! processes (this test binary re-executed as the ranks, `rank_role`): the
//! job fails by default; with `--tolerate-group-failures` the other members
//! get an error naming it and everyone else finishes.

mod common;
mod rank_role;

use std::time::Duration;

use common::heavy;
use rank_role::{ensure, finish, init, role};

fn role_kill() -> Result<(), String> {
    let pmi = init()?;
    let members: Vec<u32> = (0..32).collect();
    let victim = 5;
    let rank = pmi.rank();
    if rank >= 32 {
        // Non-members: ordinary PMI work, then finish normally.
        std::thread::sleep(Duration::from_millis(1500));
        pmi.put(format!("nm{rank}"), "x")
            .map_err(|e| e.to_string())?;
        println!("non-member {rank} done");
        return pmi.finalize().map_err(|e| e.to_string());
    }
    pmi.group_construct("doomed", &members)
        .map_err(|e| e.to_string())?;
    if rank == victim {
        std::thread::sleep(Duration::from_millis(500));
        let stamp = rank_role::env("KILL_STAMP")?;
        std::fs::write(&stamp, b"").map_err(|e| e.to_string())?;
        // kill -9 of this member while the others wait in the group fence.
        kill_self();
    }
    let r = pmi.group_fence("doomed");
    let stamp = rank_role::env("KILL_STAMP")?;
    let killed = std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .map_err(|e| format!("victim's stamp: {e}"))?;
    let late = std::time::SystemTime::now()
        .duration_since(killed)
        .unwrap_or_default();
    match r {
        Ok(()) => Err("group fence succeeded without the dead member".into()),
        Err(e) => {
            let text = e.to_string();
            ensure(text.contains("rank 5"), || {
                format!("error does not name rank 5: {text}")
            })?;
            ensure(late < Duration::from_secs(1), || {
                format!("error {late:?} after the kill: {text}")
            })?;
            println!("member {rank} error within 1 s: {text}");
            pmi.finalize().map_err(|e| e.to_string())
        }
    }
}

fn kill_self() -> ! {
    let me = std::process::id();
    let st = std::process::Command::new("kill")
        .args(["-9", &me.to_string()])
        .status();
    panic!("kill -9 of myself returned: {st:?}");
}

fn kill_run(tolerate: bool) -> common::Outcome {
    let scratch = common::scratch_dir("group-kill");
    let stamp = scratch.path().join("killed");
    let flags: &[&str] = if tolerate {
        &["--tolerate-group-failures"]
    } else {
        &[]
    };
    let test = if tolerate {
        "kill_9_of_a_member_tolerated_non_members_finish"
    } else {
        "kill_9_of_a_member_during_a_group_fence_fails_the_job"
    };
    rank_role::launch(test, "kill", 64, flags)
        .env("KILL_STAMP", &stamp)
        .timeout(Duration::from_secs(30))
        .run()
}

/// kill -9 of a member during a group fence at N=64: the job fails, naming
/// it (job-failure rules apply to group members by default).
#[test]
fn kill_9_of_a_member_during_a_group_fence_fails_the_job() {
    if role().is_some() {
        finish(role_kill());
    }
    let _g = heavy();
    let out = kill_run(false);
    assert_ne!(out.code(), Some(0), "{}", out.report());
    out.assert_stderr_names_rank(5);
}

/// With --tolerate-group-failures: every other member's group fence returns
/// an error naming rank 5 within 1 s of the kill, the members finalize, the
/// 32 non-members finish normally, the launcher exits 0 and says what it
/// tolerated.
#[test]
fn kill_9_of_a_member_tolerated_non_members_finish() {
    if role().is_some() {
        finish(role_kill());
    }
    let _g = heavy();
    let out = kill_run(true);
    out.assert_success();
    let lines = out.stdout_lines();
    let members = lines
        .iter()
        .filter(|l| l.starts_with("member ") && l.contains("error within 1 s"))
        .count();
    let non = lines
        .iter()
        .filter(|l| l.starts_with("non-member "))
        .count();
    assert_eq!((members, non), (31, 32), "{}", out.report());
    assert!(out.stderr.contains("tolerated"), "{}", out.report());
}
