//! Who holds a wait when a rank's process is stopped (SIGSTOP), with real
//! processes: a job in a loop of `PMI2_KVS_Fence` (fastpmi's `libpmi2` on
//! shared memory; Slurm's `libpmi2` on the socket), 16 and 256 ranks, one
//! rank stopped. The stopped rank is the only one named missing from the
//! fence in progress (the one after the last completed fence), by `fastpmi
//! ps`, `ps --json`, the SIGUSR1 report and the `--fence-timeout` failure
//! (with its `--verbose` report), and it shows as stopped; every other rank
//! shows "in fence k+1". A rank stopped before its first PMI call shows as
//! stopped and not yet in PMI; a member stopped before a process-group
//! fence is the one the group waits for.
//!
//! The tests end only what they started: the stopped rank gets SIGCONT,
//! the launcher SIGTERM (or the job ends by itself); a failing test's job
//! is killed by its `Job` guard (the launcher and its descendants).
//! Every launcher runs with its own `XDG_RUNTIME_DIR`.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::tools::{fastpmi, ps_json, runtime_dir, text, wait_for};
use common::{heavy, prog, Prog};
use fastpmi::ranges::ranges;
use fastpmi::tools::proto::JobTable;

/// Fences each rank loops over: more than any test waits for.
const LOOP: &str = "100000000";
/// Generous limits for a 2-core machine shared with other work.
const LIMIT: Duration = Duration::from_secs(240);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    /// fastpmi's libpmi2: the job segment.
    Shm,
    /// Slurm's libpmi2: the socket.
    Socket,
}

/// `fastpmi FLAGS -n N pmi2_fence_loop ARG` under the runtime dir `xdg`.
fn fence_loop(tr: Transport, n: u32, xdg: &Path, flags: &[&str], arg: &str) -> common::Cmd {
    let mut a: Vec<OsString> = flags.iter().map(OsString::from).collect();
    let exe = match tr {
        Transport::Shm => {
            a.extend(["-genv".into(), "LD_LIBRARY_PATH".into()]);
            a.push(common::capi_lib_dir().into());
            prog(Prog::Pmi2FenceLoopFastpmi)
        }
        Transport::Socket => prog(Prog::Pmi2FenceLoopSlurm),
    };
    a.extend(["-n".into(), n.to_string().into(), exe.into(), arg.into()]);
    common::launch(a).env("XDG_RUNTIME_DIR", xdg).timeout(LIMIT)
}

fn want_transport(tr: Transport) -> &'static str {
    match tr {
        Transport::Shm => "shm",
        Transport::Socket => "socket",
    }
}

/// The job's table once every rank runs the loop over `tr` and a few
/// fences have completed.
fn looping(xdg: &Path, pid: u32, n: u32, tr: Transport) -> JobTable {
    wait_for(LIMIT, "every rank in the fence loop", || {
        let t = ps_json(xdg, pid).ok()?.into_iter().next()?;
        let all = t.ranks.len() == n as usize
            && t.ranks
                .iter()
                .all(|r| r.pid.is_some() && r.transport == want_transport(tr));
        (all && t.fences_completed >= 3).then_some(t)
    })
}

/// Stop rank `v` (pid `vpid`) and wait until the job sits: `v` stopped and
/// every other rank in the fence after the last completed one. `None` when
/// the launcher ended meanwhile (a fence timeout).
///
/// A rank records that it entered a fence a few instructions before it
/// arrives at the barrier; stopped exactly there, its record says it
/// arrived while the barrier still waits for it, and no table can name it.
/// Then (every rank "in fence k+1", nobody missing, the same on the next
/// look) the rank is continued and stopped again.
fn stop_rank(job: &mut common::Job, xdg: &Path, n: u32, v: u32, vpid: u32) -> Option<JobTable> {
    for _ in 0..5 {
        common::signal(vpid, libc::SIGSTOP);
        let mut ambiguous = 0;
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "rank {v} stopped, but the job never sat in a fence within {LIMIT:?}"
            );
            if job.try_wait().is_some() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
            let Some(t) = ps_json(xdg, job.pid())
                .ok()
                .and_then(|j| j.into_iter().next())
            else {
                continue;
            };
            let k = t.fences_completed + 1;
            let stopped = t.ranks[v as usize].process.as_deref() == Some("stopped");
            let in_k = t
                .ranks
                .iter()
                .filter(|r| r.kind == "in_fence" && r.fence == Some(k))
                .count();
            if stopped && in_k == n as usize - 1 && !t.missing.is_empty() {
                return Some(t);
            }
            if stopped && in_k == n as usize {
                ambiguous += 1;
                if ambiguous >= 3 {
                    break;
                }
            } else {
                ambiguous = 0;
            }
        }
        eprintln!("rank {v} stopped between recording and making its arrival: again");
        common::signal(vpid, libc::SIGCONT);
        let before = ps_json(xdg, job.pid()).ok()?.into_iter().next()?;
        wait_for(LIMIT, "the job going on", || {
            let t = ps_json(xdg, job.pid()).ok()?.into_iter().next()?;
            (t.fences_completed >= before.fences_completed + 2).then_some(())
        });
    }
    panic!("rank {v} stopped at the same instruction five times");
}

/// [`wait_for`], failing with the launcher's output if it ends first.
fn wait_running<T>(
    mut job: common::Job,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> (common::Job, T) {
    let end = std::time::Instant::now() + LIMIT;
    loop {
        if job.try_wait().is_some() {
            let out = job.wait_or_kill(LIMIT);
            panic!("{what}: the launcher ended first\n{}", out.report());
        }
        if let Some(v) = f() {
            return (job, v);
        }
        assert!(
            std::time::Instant::now() < end,
            "{what}: not within {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The summary line of the fence in progress.
fn fence_line(t: &JobTable) -> &str {
    let k = t.fences_completed + 1;
    t.summary
        .iter()
        .find(|l| l.starts_with(&format!("fence {k}: ")))
        .unwrap_or_else(|| panic!("no summary of fence {k}: {:?}", t.summary))
}

/// The checks on a table of the job sitting with rank `v` stopped.
fn check_table(t: &JobTable, n: u32, v: u32, vpid: u32, tr: Transport) {
    let k = t.fences_completed + 1;
    assert_eq!(
        t.missing,
        vec![v],
        "only rank {v} is missing: {:?}",
        t.summary
    );
    for r in &t.ranks {
        assert_eq!(r.transport, want_transport(tr), "{r:?}");
        if r.rank == v {
            assert_eq!(r.pid, Some(vpid), "{r:?}");
            assert_eq!(r.process.as_deref(), Some("stopped"), "{r:?}");
            assert_eq!(r.kind, "between_fences", "{r:?}");
            assert_ne!(r.state, format!("in fence {k}"), "{r:?}");
            assert!(
                r.state == format!("leaving fence {}", k - 1)
                    || r.state == format!("between fences {} and {k}", k - 1),
                "{r:?}"
            );
        } else {
            assert_eq!(r.kind, "in_fence", "{r:?}");
            assert_eq!(r.state, format!("in fence {k}"), "{r:?}");
            assert_eq!(r.fence, Some(k), "{r:?}");
            assert_ne!(r.process.as_deref(), Some("stopped"), "{r:?}");
            assert!(r.process.is_some(), "{r:?}");
        }
    }
    let line = fence_line(t);
    let want = format!(
        "fence {k}: {}/{n} arrived, missing: rank {v} (pid {vpid}, ",
        n - 1
    );
    assert!(line.starts_with(&want), "{line:?} does not start {want:?}");
    assert!(line.contains(", process stopped"), "{line}");
    // Exactly one rank named.
    assert_eq!(line.matches("rank ").count(), 1, "{line}");
    assert!(!line.contains(" more (ranks"), "{line}");
}

/// The report lines (SIGUSR1, fence timeout, --verbose) of the fence in
/// progress `k` with rank `v` stopped; returns k.
fn check_report(report: &str, n: u32, v: u32, vpid: u32) -> u64 {
    let head = report
        .lines()
        .find(|l| l.contains(" ranks arrived (ranks "))
        .unwrap_or_else(|| panic!("no fence line in the report:\n{report}"));
    let k: u64 = head
        .split("fence ")
        .nth(1)
        .and_then(|x| x.split(':').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{head}"));
    let others: Vec<u32> = (0..n).filter(|&r| r != v).collect();
    let want = format!(
        "fence {k}: {}/{n} ranks arrived (ranks {})",
        n - 1,
        ranges(&others)
    );
    assert!(head.contains(&want), "{head:?} lacks {want:?}");
    let missing: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("missing rank"))
        .collect();
    assert!(!missing.is_empty(), "{report}");
    for l in &missing {
        assert!(
            l.contains(&format!("missing rank {v} (pid {vpid}, ")) && l.contains("process stopped"),
            "another rank named missing, or not as stopped: {l}\n{report}"
        );
    }
    let group = format!(
        "ranks {}: in fence {k} (last op kvs-fence, {k} fences)",
        ranges(&others)
    );
    assert!(report.contains(&group), "report lacks {group:?}:\n{report}");
    let own = report
        .lines()
        .find(|l| l.starts_with(&format!("fastpmi:   rank {v}: ")))
        .unwrap_or_else(|| panic!("no line of rank {v}:\n{report}"));
    assert!(own.ends_with(", process stopped"), "{own}");
    k
}

/// `ps`, `ps --json` and SIGUSR1 while rank `v` is stopped; then the
/// rank goes on and the launcher is interrupted.
fn stopped_rank_ps(tag: &str, tr: Transport, n: u32, v: u32) {
    let _g = heavy();
    let xdg = runtime_dir(tag);
    let mut job = fence_loop(tr, n, xdg.path(), &[], LOOP).spawn();
    let pid = job.pid();
    let t = looping(xdg.path(), pid, n, tr);
    let vpid = t.ranks[v as usize].pid.unwrap();
    let t = stop_rank(&mut job, xdg.path(), n, v, vpid).expect("the launcher runs");
    check_table(&t, n, v, vpid, tr);
    let k = t.fences_completed + 1;

    // The human table: the same summary line (its times aside), the
    // stopped rank's row.
    let human = text(&fastpmi(xdg.path(), &["ps", &pid.to_string()]).stdout);
    let line = human
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("fence {k}: ")))
        .unwrap_or_else(|| panic!("no summary of fence {k}:\n{human}"));
    let want = format!(
        "fence {k}: {}/{n} arrived, missing: rank {v} (pid {vpid}, ",
        n - 1
    );
    assert!(
        line.starts_with(&want) && line.contains(", process stopped"),
        "{line}"
    );
    assert_eq!(line.matches("rank ").count(), 1, "{line}");
    let row = human
        .lines()
        .find(|l| {
            l.split_whitespace()
                .take(2)
                .eq([v.to_string(), vpid.to_string()])
        })
        .unwrap_or_else(|| panic!("no row of rank {v}:\n{human}"));
    assert!(row.contains(" stopped"), "{row}");
    let others = human
        .lines()
        .filter(|l| l.contains(&format!(" in fence {k} ")))
        .count();
    assert_eq!(others, n as usize - 1, "{human}");

    // SIGUSR1: the same, on the launcher's stderr.
    common::signal(pid, libc::SIGUSR1);
    let others: Vec<u32> = (0..n).filter(|&r| r != v).collect();
    let group = format!("fastpmi:   ranks {}: in fence {k} (", ranges(&others));
    let report = wait_for(LIMIT, "the SIGUSR1 report", || {
        let e = job.stderr_so_far();
        let whole = e.contains("missing rank")
            && e.contains(&group)
            && e.contains(&format!("fastpmi:   rank {v}: "))
            && e.contains(", process stopped\n");
        whole.then_some(e)
    });
    assert_eq!(check_report(&report, n, v, vpid), k);

    // The rank goes on, so does the job; then the launcher is interrupted.
    common::signal(vpid, libc::SIGCONT);
    wait_for(LIMIT, "the job going on", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        (t.fences_completed > k).then_some(())
    });
    common::signal(pid, libc::SIGTERM);
    let out = job.wait_or_kill(LIMIT);
    assert_eq!(out.code(), Some(128 + libc::SIGTERM), "{}", out.report());
}

/// `--fence-timeout` (and `--verbose`) with rank `v` stopped: the job
/// fails naming it, and only it, as stopped.
fn stopped_rank_timeout(tag: &str, tr: Transport, n: u32, v: u32) {
    let _g = heavy();
    let xdg = runtime_dir(tag);
    let flags = ["--verbose", "--fence-timeout", "10"];
    let mut job = fence_loop(tr, n, xdg.path(), &flags, LOOP).spawn();
    let pid = job.pid();
    let t = looping(xdg.path(), pid, n, tr);
    let vpid = t.ranks[v as usize].pid.unwrap();
    if let Some(t) = stop_rank(&mut job, xdg.path(), n, v, vpid) {
        check_table(&t, n, v, vpid, tr);
    }
    let out = job.wait_or_kill(LIMIT);
    assert_eq!(out.code(), Some(1), "{}", out.report());
    let err = &out.stderr;
    let at = err
        .find("fastpmi: fence timeout:")
        .unwrap_or_else(|| panic!("no fence timeout:\n{}", out.report()));
    let k = check_report(&err[at..], n, v, vpid);
    let last = out
        .stderr_lines()
        .into_iter()
        .find(|l| l.contains("incomplete for") && l.contains("--fence-timeout 10"))
        .unwrap_or_else(|| panic!("no failure line:\n{}", out.report()))
        .to_string();
    let want = format!("fence {k} ({}/{n} arrived) of job ", n - 1);
    assert!(last.contains(&want), "{last}");
    let tail = last.split("missing: ").nth(1).unwrap_or_default();
    assert!(
        tail.starts_with(&format!("rank {v} (pid {vpid}, ")) && tail.contains("process stopped"),
        "{last}"
    );
    assert_eq!(tail.matches("rank ").count(), 1, "{last}");
    // --verbose: the report again after the failure line.
    let after = err.split(&last).nth(1).unwrap_or_default();
    assert_eq!(check_report(after, n, v, vpid), k, "{}", out.report());
}

#[test]
fn stopped_rank_16_shared_memory_ps_json_sigusr1() {
    stopped_rank_ps("stop-shm-16", Transport::Shm, 16, 5);
}

#[test]
fn stopped_rank_16_shared_memory_fence_timeout() {
    stopped_rank_timeout("stop-shm-16-ft", Transport::Shm, 16, 5);
}

#[test]
fn stopped_rank_16_socket_ps_json_sigusr1() {
    stopped_rank_ps("stop-sock-16", Transport::Socket, 16, 5);
}

#[test]
fn stopped_rank_16_socket_fence_timeout() {
    stopped_rank_timeout("stop-sock-16-ft", Transport::Socket, 16, 5);
}

#[test]
fn stopped_rank_256_shared_memory_ps_json_sigusr1() {
    stopped_rank_ps("stop-shm-256", Transport::Shm, 256, 137);
}

#[test]
fn stopped_rank_256_shared_memory_fence_timeout() {
    stopped_rank_timeout("stop-shm-256-ft", Transport::Shm, 256, 137);
}

#[test]
fn stopped_rank_256_socket_ps_json_sigusr1() {
    stopped_rank_ps("stop-sock-256", Transport::Socket, 256, 137);
}

#[test]
fn stopped_rank_256_socket_fence_timeout() {
    stopped_rank_timeout("stop-sock-256-ft", Transport::Socket, 256, 137);
}

/// Rank 3 of 16 stopped before its first PMI call (it waits for a file
/// first): "not yet in PMI", process stopped, the one fence 1 waits for.
fn stopped_before_pmi(tag: &str, tr: Transport) {
    let _g = heavy();
    const V: u32 = 3;
    let xdg = runtime_dir(tag);
    let marks = common::scratch_dir(&format!("{tag}-marks"));
    let go = marks.path().join("go");
    let job = fence_loop(tr, 16, xdg.path(), &[], "10")
        .env("FASTPMI_TEST_LATE_RANK", V.to_string())
        .env("FASTPMI_TEST_GO", &go)
        .env("FASTPMI_TEST_MARK_DIR", marks.path())
        .spawn();
    let pid = job.pid();
    let pid_file = marks.path().join(format!("pid.{V}"));
    let vpid: u32 = wait_for(LIMIT, "the late rank's pid", || {
        fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    common::signal(vpid, libc::SIGSTOP);
    let t = wait_for(LIMIT, "15 ranks in fence 1, rank 3 stopped", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        let inside = t.ranks.iter().filter(|r| r.kind == "in_fence").count();
        let stopped = t.ranks[V as usize].process.as_deref() == Some("stopped");
        (inside == 15 && stopped).then_some(t)
    });
    let r = &t.ranks[V as usize];
    assert_eq!(r.pid, Some(vpid), "{r:?}");
    assert_eq!(r.kind, "no_pmi", "{r:?}");
    assert_eq!(r.state, "not yet in PMI", "{r:?}");
    assert_eq!(r.transport, "none", "{r:?}");
    assert_eq!(t.missing, vec![V]);
    let want =
        format!("fence 1: 15/16 arrived, missing: rank {V} (pid {vpid}, not yet in PMI for ");
    let line = fence_line(&t);
    assert!(
        line.starts_with(&want) && line.contains(", process stopped"),
        "{line}"
    );
    let human = text(&fastpmi(xdg.path(), &["ps", &pid.to_string()]).stdout);
    assert!(human.contains(&want), "{human}");
    common::signal(vpid, libc::SIGCONT);
    fs::write(&go, "go").unwrap();
    let out = job.wait_or_kill(LIMIT);
    out.assert_success();
    let ok = out
        .stdout_lines()
        .iter()
        .filter(|l| l.starts_with("fence loop ok rank"))
        .count();
    assert_eq!(ok, 16, "{}", out.report());
}

#[test]
fn stopped_before_pmi_shared_memory() {
    stopped_before_pmi("stop-init-shm", Transport::Shm);
}

#[test]
fn stopped_before_pmi_socket() {
    stopped_before_pmi("stop-init-sock", Transport::Socket);
}

const GROUP_TEST_SERVER: &str = "stopped_member_of_a_group_fence_server_barrier";
const GROUP_TEST_SEGMENT: &str = "stopped_member_of_a_group_fence_segment_barrier";

/// Four ranks build group `gs`; ranks 0-2 fence in it at once, rank 3 only
/// once the go file exists.
fn role_group_stop() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let all: Vec<u32> = (0..pmi.size()).collect();
    pmi.group_construct("gs", &all)
        .map_err(|e| format!("group_construct: {e}"))?;
    if pmi.rank() == 3 {
        let go = PathBuf::from(rank_role::env("FASTPMI_TEST_GO")?);
        rank_role::poll(LIMIT, "go file", || Ok(go.exists().then_some(())))?;
    }
    pmi.group_fence("gs")
        .map_err(|e| format!("group_fence: {e}"))?;
    pmi.group_destruct("gs")
        .map_err(|e| format!("group_destruct: {e}"))?;
    pmi.finalize().map_err(|e| e.to_string())
}

/// A group-stop job of 4 ranks (launcher `flags`), with rank 3 stopped
/// once the other three are in the group fence: the job, its runtime and
/// marks directories, the go file and rank 3's pid.
struct GroupStop {
    job: common::Job,
    xdg: tempfile::TempDir,
    _marks: tempfile::TempDir,
    go: PathBuf,
    pid: u32,
    vpid: u32,
}

fn start_group_stop(test: &str, transport: &str, tag: &str, flags: &[&str]) -> GroupStop {
    // Short tags: the rendezvous socket's path must fit in a sockaddr_un.
    let xdg = runtime_dir(tag);
    let marks = common::scratch_dir(&format!("{tag}-marks"));
    let go = marks.path().join("go");
    let job = rank_role::launch(test, "group-stop", 4, flags)
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FASTPMI_TRANSPORT", transport)
        .env("FASTPMI_TEST_GO", &go)
        .timeout(LIMIT)
        .spawn();
    let pid = job.pid();
    let (job, t) = wait_running(job, "3/4 in the group fence", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        let g = t.group_fences.first()?;
        (g.arrived == 3).then_some(t)
    });
    let vpid = t.ranks[3].pid.unwrap();
    common::signal(vpid, libc::SIGSTOP);
    GroupStop {
        job,
        xdg,
        _marks: marks,
        go,
        pid,
        vpid,
    }
}

/// Rank 3 stopped before the fence of its group: on the server's barrier
/// (socket ranks) and on the job segment's (shared-memory ranks, which
/// record their arrival in their rank records), it is the one member named
/// missing, as stopped, and the others are "in fence of group gs".
fn stopped_group_member(test: &str, transport: &str) {
    if rank_role::role().is_some() {
        rank_role::finish(role_group_stop());
    }
    let _g = heavy();
    let GroupStop {
        job,
        xdg,
        _marks,
        go,
        pid,
        vpid,
    } = start_group_stop(test, transport, &format!("stop-grp-{transport}"), &[]);
    let (job, t) = wait_running(job, "rank 3 stopped", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        (t.ranks[3].process.as_deref() == Some("stopped")).then_some(t)
    });
    let g = &t.group_fences[0];
    assert_eq!((g.group.as_str(), g.arrived, g.size), ("gs", 3, 4), "{g:?}");
    let who = format!("rank 3 (pid {vpid}, ");
    let (barrier, place) = if transport == "socket" {
        ("server", "")
    } else {
        ("segment", " (in the job segment)")
    };
    assert_eq!(g.barrier, barrier);
    assert_eq!(g.missing, vec!["rank 3".to_string()]);
    for r in &t.ranks[..3] {
        assert_eq!(r.kind, "in_group_fence", "{r:?}");
        assert_eq!(r.state, "in fence of group gs", "{r:?}");
    }
    let head = format!("group gs fence{place}: 3/4 arrived for ");
    let line = t
        .summary
        .iter()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("{:?}", t.summary));
    assert!(
        line.contains(&format!(", missing: {who}")) && line.contains("process stopped"),
        "{line}"
    );
    common::signal(vpid, libc::SIGCONT);
    fs::write(&go, "go").unwrap();
    let out = job.wait_or_kill(LIMIT);
    out.assert_success();
}

#[test]
fn stopped_member_of_a_group_fence_server_barrier() {
    stopped_group_member(GROUP_TEST_SERVER, "socket");
}

#[test]
fn stopped_member_of_a_group_fence_segment_barrier() {
    stopped_group_member(GROUP_TEST_SEGMENT, "shm");
}

const GROUP_TIMEOUT_SERVER: &str = "stopped_member_of_a_group_fence_times_out_server_barrier";
const GROUP_TIMEOUT_SEGMENT: &str = "stopped_member_of_a_group_fence_times_out_segment_barrier";

/// `--fence-timeout` on a group fence whose member rank 3 is stopped: the
/// job fails once the fence has waited the limit since its first member
/// arrived, naming rank 3, and only it, as stopped; `--verbose` prints the
/// report with the group's line.
fn stopped_group_member_timeout(test: &str, transport: &str) {
    if rank_role::role().is_some() {
        rank_role::finish(role_group_stop());
    }
    let _g = heavy();
    // Its go file is never created: rank 3 waits until it is stopped.
    let GroupStop {
        job, _marks, vpid, ..
    } = start_group_stop(
        test,
        transport,
        &format!("stop-grpt-{transport}"),
        &["--verbose", "--fence-timeout", "3"],
    );
    let out = job.wait_or_kill(LIMIT);
    // The launcher kills the stopped rank with the job.
    assert_eq!(out.code(), Some(1), "{}", out.report());
    let last = out
        .stderr_lines()
        .into_iter()
        .find(|l| l.contains("incomplete for") && l.contains("--fence-timeout 3"))
        .unwrap_or_else(|| panic!("no failure line:\n{}", out.report()))
        .to_string();
    assert!(
        last.contains("fence of group gs (3/4 arrived) of job "),
        "{last}"
    );
    let tail = last.split("missing: ").nth(1).unwrap_or_default();
    assert!(
        tail.starts_with(&format!("rank 3 (pid {vpid}, ")) && tail.contains("process stopped"),
        "{last}"
    );
    assert_eq!(tail.matches("rank ").count(), 1, "{last}");
    let place = if transport == "socket" {
        ""
    } else {
        " (in the job segment)"
    };
    let head = format!("group gs fence{place}: 3/4 arrived for ");
    assert!(
        out.stderr.matches(&head).count() >= 2,
        "the report before the failure and --verbose's after it:\n{}",
        out.report()
    );
}

#[test]
fn stopped_member_of_a_group_fence_times_out_server_barrier() {
    stopped_group_member_timeout(GROUP_TIMEOUT_SERVER, "socket");
}

#[test]
fn stopped_member_of_a_group_fence_times_out_segment_barrier() {
    stopped_group_member_timeout(GROUP_TIMEOUT_SEGMENT, "shm");
}
