//! Nested mode (docs/nested.md): fastpmi started as a rank of an outer PMI
//! job is that job's server for its node, and the ranks of every node
//! server are one job. Two node servers of 16 ranks each under an outer
//! fastpmi and under Debian's `mpiexec.hydra` (the srun cases are in
//! tests/slurm.rs, whose runner owns the private Slurm cluster): Slurm's
//! libpmi2 program on the node servers' sockets, the same program on
//! fastpmi's libpmi2 and the segments, Debian MPICH and Intel MPI, each one
//! job of 32 ranks with every value right and every node seen as one node.
//! Then what crosses the edge: a rank killed on the second node fails the
//! job on both, naming its rank in the job, and `--nest off` keeps one job
//! per node server. Last, the same four programs across two network
//! namespaces of the test's own (a veth pair, a node server in each, the
//! outer fastpmi in port mode listening on the veth, the far node server
//! authenticating with the job's secret). Needs root, like tests/slurm.rs.

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::stacks::Stack;
use common::{heavy, launch, prog, scratch_dir, unique_copy, Cmd, Outcome, Prog};

const NODES: u32 = 2;
const PER_NODE: u32 = 16;
const TOTAL: u32 = NODES * PER_NODE;

fn fastpmi() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fastpmi"))
}

/// The outer launchers: fastpmi, and Debian's Hydra.
#[derive(Clone, Copy, Debug)]
enum Outer {
    Fastpmi,
    Hydra,
}

/// `<outer> -n 2 fastpmi [inner...] -n 16 PROG ARGS...`.
fn nested(outer: Outer, inner: &[&str], program: &Path, args: &[String]) -> Cmd {
    let mut argv: Vec<OsString> = vec!["-n".into(), NODES.to_string().into(), fastpmi().into()];
    argv.extend(inner.iter().map(OsString::from));
    argv.extend(["-n".into(), PER_NODE.to_string().into(), program.into()]);
    argv.extend(args.iter().map(OsString::from));
    let c = launch(argv).timeout(Duration::from_secs(120));
    match outer {
        Outer::Fastpmi => c.program(fastpmi()),
        Outer::Hydra => c.program("mpiexec.hydra"),
    }
}

fn assert_only_line(out: &Outcome, line: &str) {
    out.assert_success();
    assert_eq!(out.stdout_lines(), vec![line], "{}", out.report());
}

/// Slurm's libpmi2 program: `pmi2_slurm 32 0 16` checks the size, every
/// rank's value, the mapping `(vector,(0,2,16))` and a node attribute put
/// by each node's first rank.
fn slurm_libpmi2(outer: Outer) {
    let _g = heavy();
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let out = nested(outer, &[], prog(Prog::Pmi2Slurm), &args).run();
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
}

/// The same program on fastpmi's libpmi2: every rank of both node servers
/// on its node's segment, all in one job.
fn fastpmi_libpmi2(outer: Outer) {
    let _g = heavy();
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let out = nested(outer, &[], prog(Prog::Pmi2SlurmOwnHeader), &args)
        .env("FASTPMI_LOG", "warn,fastpmi_capi::session=debug")
        .env("LD_LIBRARY_PATH", common::capi_lib_dir())
        .run();
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
    common::assert_one_job_on_segments(&out, TOTAL);
}

/// An MPI stack: one job of 32 ranks in which the library sees two nodes
/// of 16 (`MPI_COMM_TYPE_SHARED`) and sums right across and within them.
fn mpi(outer: Outer, stack: Option<Stack>) {
    let _g = heavy();
    let program = match stack {
        Some(s) => s.program("mpi_node_split"),
        None => prog(Prog::MpiNodeSplit).to_path_buf(),
    };
    let args = [TOTAL.to_string(), PER_NODE.to_string()];
    let mut c = nested(outer, &[], &program, &args);
    for (k, v) in stack.map_or(&[][..], Stack::env) {
        c = c.env(k, v);
    }
    let out = c.run();
    assert_only_line(&out, &format!("nodes ok size={TOTAL} local={PER_NODE}"));
}

#[test]
fn under_fastpmi_slurm_libpmi2_is_one_job_of_32() {
    slurm_libpmi2(Outer::Fastpmi);
}

#[test]
fn under_hydra_slurm_libpmi2_is_one_job_of_32() {
    slurm_libpmi2(Outer::Hydra);
}

#[test]
fn under_fastpmi_fastpmi_libpmi2_uses_each_nodes_segment() {
    fastpmi_libpmi2(Outer::Fastpmi);
}

#[test]
fn under_hydra_fastpmi_libpmi2_uses_each_nodes_segment() {
    fastpmi_libpmi2(Outer::Hydra);
}

#[test]
fn under_fastpmi_mpich_sees_two_nodes() {
    mpi(Outer::Fastpmi, None);
}

#[test]
fn under_hydra_mpich_sees_two_nodes() {
    mpi(Outer::Hydra, None);
}

#[test]
fn under_fastpmi_intel_mpi_sees_two_nodes() {
    mpi(Outer::Fastpmi, Some(Stack::Impi));
}

#[test]
fn under_hydra_intel_mpi_sees_two_nodes() {
    mpi(Outer::Hydra, Some(Stack::Impi));
}

/// Without nesting each node server runs a job of its own (today's
/// behaviour, kept by an option).
#[test]
fn nest_off_runs_one_job_per_node_server() {
    let _g = heavy();
    let args = [PER_NODE.to_string()];
    let out = nested(
        Outer::Fastpmi,
        &["--nest", "off"],
        prog(Prog::Pmi2Slurm),
        &args,
    )
    .run();
    out.assert_success();
    let line = format!("pmi2 ok size={PER_NODE}");
    assert_eq!(
        out.stdout_lines(),
        vec![&line[..], &line[..]],
        "{}",
        out.report()
    );
}

/// The name service is the outer job's: a name rank 0 publishes on the
/// first node is found and unpublished by the last rank, on the second.
#[test]
fn names_published_on_one_node_are_found_on_the_other() {
    let _g = heavy();
    let out = nested(
        Outer::Fastpmi,
        &[],
        prog(Prog::Pmi2Names),
        &["nested-svc".into()],
    )
    .run();
    assert_only_line(&out, "names ok service=nested-svc");
}

/// A spawn from a job over node servers starts its children on the
/// spawning node; they publish a name the parent job looks up (MPICH 5,
/// `nameserv_pub.c`).
#[test]
fn spawn_from_a_nested_job() {
    let _g = heavy();
    let program = Stack::Mpich5.program("nameserv_pub");
    let mut c = nested(Outer::Fastpmi, &[], &program, &["nested-spawn".into()]);
    for (k, v) in Stack::Mpich5.env() {
        c = c.env(k, v);
    }
    let out = c.run();
    out.assert_success();
    let mut lines = out.stdout_lines();
    lines.sort_unstable();
    let ok = lines.len() == 2
        && lines[0] == "nameserv child ok published=nested-spawn"
        && lines[1].starts_with("nameserv ok service=nested-spawn ")
        && lines[1].ends_with(" unpublished=yes");
    assert!(ok, "{}", out.report());
}

/// `fastpmi ps` of a node server names its ranks by their ranks in the
/// job: the second node server shows ranks 16 to 31; `fastpmi ps JOBID`
/// shows every launcher holding a part of the job.
#[test]
fn ps_of_a_node_server_shows_the_jobs_ranks() {
    let _g = heavy();
    let xdg = common::tools::runtime_dir("nested-ps");
    let script = "echo ready $PMI_RANK $PPID >&2; exec sleep 30";
    let job = nested(
        Outer::Fastpmi,
        &[],
        Path::new("sh"),
        &["-c".into(), script.into()],
    )
    .env("XDG_RUNTIME_DIR", xdg.path())
    .spawn();
    // The launcher of rank 16 (each rank's parent is its node server).
    let pid: u32 = common::tools::wait_for(Duration::from_secs(60), "rank 16 started", || {
        job.stderr_so_far().lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[0] == "ready" && f[1] == "16").then(|| f[2].parse().ok())?
        })
    });
    let tables = common::tools::wait_for(Duration::from_secs(60), "every rank started", || {
        let t = common::tools::ps_json(xdg.path(), pid).ok()?;
        let all = t.first()?.ranks.iter().all(|r| r.pid.is_some());
        all.then_some(t)
    });
    // By the job's id: every launcher holding a part of it (the outer
    // one, whose ranks are the node servers, and both node servers).
    let jobid = format!("fastpmi_{}_0", job.pid());
    let all = common::tools::fastpmi(xdg.path(), &["ps", &jobid, "--json"]);
    let out = job.kill_all();
    let ranks: Vec<u32> = tables[0].ranks.iter().map(|r| r.rank).collect();
    assert_eq!(
        ranks,
        (PER_NODE..TOTAL).collect::<Vec<_>>(),
        "{tables:?}\n{}",
        out.report()
    );
    assert!(all.status.success(), "{}", common::tools::text(&all.stderr));
    let parts: Vec<fastpmi::tools::proto::JobTable> =
        serde_json::from_slice(&all.stdout).expect("ps --json of the job");
    let mut sizes: Vec<(usize, Option<u32>)> = parts
        .iter()
        .map(|t| (t.ranks.len(), t.ranks.first().map(|r| r.rank)))
        .collect();
    sizes.sort_unstable();
    assert_eq!(
        sizes,
        [
            (NODES as usize, Some(0)),
            (PER_NODE as usize, Some(0)),
            (PER_NODE as usize, Some(PER_NODE))
        ],
        "{}",
        common::tools::text(&all.stdout)
    );
}

/// MPI_Abort on the second node (rank 31 of `mpi_abort.c`, while every
/// other rank waits in a barrier) ends the job on both nodes with its code,
/// the outer launcher naming the rank in the job.
#[test]
fn an_abort_on_one_node_ends_the_job_with_its_code() {
    let _g = heavy();
    let out = nested(Outer::Fastpmi, &[], prog(Prog::MpiAbort), &[]).run();
    out.assert_code(7);
    let last = TOTAL - 1;
    assert!(
        out.stderr
            .contains("rank 1 called abort with code 7: node server 1 of job"),
        "the outer launcher does not name the node server's abort\n{}",
        out.report()
    );
    assert!(
        out.stderr
            .contains(&format!("rank {last} called abort with code 7")),
        "no node server names rank {last}\n{}",
        out.report()
    );
    common::assert_no_process_left(prog(Prog::MpiAbort), Duration::from_secs(5));
}

/// A rank SIGKILLed on the second node while every rank fences in a loop:
/// both node servers' ranks end within 2 s, the outer launcher exits
/// non-zero, and its message names the rank by its rank in the job.
fn killed_rank_fails_every_node(outer: Outer) {
    let _g = heavy();
    let victim = PER_NODE + 3;
    let dir = scratch_dir("nested-kill");
    let exe = unique_copy(prog(Prog::Pmi2FenceLoopSlurm), dir.path(), "nested-kill");
    let go = dir.path().join("go");
    std::fs::write(&go, b"").unwrap();
    let job = nested(outer, &[], &exe, &["1000000000".into()])
        .env("FASTPMI_TEST_LATE_RANK", victim.to_string())
        .env("FASTPMI_TEST_GO", &go)
        .env("FASTPMI_TEST_MARK_DIR", dir.path())
        .spawn();
    let killed = common::kill_late_rank(dir.path(), victim, Duration::from_millis(500));
    let out = job.wait_or_kill(Duration::from_secs(30));
    let took = killed.elapsed();
    assert!(
        !out.status.success(),
        "the outer launcher exited 0\n{}",
        out.report()
    );
    assert!(
        took < Duration::from_secs(2),
        "the job took {took:?} to end after the kill\n{}",
        out.report()
    );
    assert!(
        out.stderr
            .contains(&format!("rank {victim} was killed by signal 9")),
        "the failure does not name rank {victim} of the job\n{}",
        out.report()
    );
    common::assert_no_process_left(&exe, Duration::from_secs(5));
}

#[test]
fn under_fastpmi_a_killed_rank_fails_both_nodes() {
    killed_rank_fails_every_node(Outer::Fastpmi);
}

#[test]
fn under_hydra_a_killed_rank_fails_both_nodes() {
    killed_rank_fails_every_node(Outer::Hydra);
}

/// Two network namespaces joined by a veth pair (`fpmi0` in each,
/// 10.231.0.1 and 10.231.0.2), removed on drop.
struct Netns {
    names: [String; 2],
}

const NETNS_ADDRS: [&str; 2] = ["10.231.0.1", "10.231.0.2"];

impl Netns {
    fn new(tag: &str) -> Netns {
        let id = std::process::id();
        let names = [format!("fpmi-{id}-{tag}-a"), format!("fpmi-{id}-{tag}-b")];
        let n = Netns { names };
        let [a, b] = [&n.names[0], &n.names[1]];
        // Interface names are at most 15 bytes: made unique by the pid,
        // then renamed inside each namespace.
        let (va, vb) = (format!("fpa{id}{tag}"), format!("fpb{id}{tag}"));
        let (va, vb) = (&va[..va.len().min(15)], &vb[..vb.len().min(15)]);
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", a],
            vec!["netns", "add", b],
            vec!["link", "add", va, "type", "veth", "peer", "name", vb],
            vec!["link", "set", va, "netns", a],
            vec!["link", "set", vb, "netns", b],
            vec!["-n", a, "link", "set", va, "name", "fpmi0"],
            vec!["-n", b, "link", "set", vb, "name", "fpmi0"],
            vec!["-n", a, "addr", "add", "10.231.0.1/24", "dev", "fpmi0"],
            vec!["-n", b, "addr", "add", "10.231.0.2/24", "dev", "fpmi0"],
            vec!["-n", a, "link", "set", "fpmi0", "up"],
            vec!["-n", b, "link", "set", "fpmi0", "up"],
            vec!["-n", a, "link", "set", "lo", "up"],
            vec!["-n", b, "link", "set", "lo", "up"],
        ];
        for step in steps {
            let out = std::process::Command::new("ip").args(&step).output();
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => panic!(
                    "ip {} failed (the network-namespace tests need root): {}",
                    step.join(" "),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => panic!("cannot run ip (Debian package iproute2): {e}"),
            }
        }
        n
    }

    /// `ip netns exec <namespace i>`.
    fn exec(&self, i: usize) -> Vec<OsString> {
        vec!["netns".into(), "exec".into(), self.names[i].clone().into()]
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", n])
                .status();
        }
    }
}

/// `ip netns exec A fastpmi --pmi-port-bind 10.231.0.1 -n 1 ip netns exec A
/// env LOG fastpmi -n 16 PROG ARGS : -n 1 ip netns exec B env LOG fastpmi
/// ...`: the outer launcher logs its connections (debug), the node servers
/// and ranks log at `rank_log`.
fn across_netns(tag: &str, program: &Path, args: &[String], rank_log: &str) -> Outcome {
    let ns = Netns::new(tag);
    let mut argv = ns.exec(0);
    argv.extend([
        fastpmi().into(),
        "--pmi-port-bind".into(),
        NETNS_ADDRS[0].into(),
    ]);
    for node in 0..2 {
        if node > 0 {
            argv.push(":".into());
        }
        argv.extend(["-n".into(), "1".into(), "ip".into()]);
        argv.extend(ns.exec(node));
        argv.extend(["env".into(), format!("FASTPMI_LOG={rank_log}").into()]);
        argv.extend([fastpmi().into(), "-n".into(), PER_NODE.to_string().into()]);
        argv.push(program.into());
        argv.extend(args.iter().map(OsString::from));
    }
    let mut c = launch(argv)
        .program("ip")
        .env("FASTPMI_LOG", "debug")
        .env("LD_LIBRARY_PATH", common::capi_lib_dir())
        .timeout(Duration::from_secs(120));
    // Intel MPI's fabric (shm, then libfabric's tcp); the others ignore it.
    for (k, v) in Stack::Impi.env() {
        c = c.env(k, v);
    }
    let out = c.run();
    // The far node server came over the veth and proved it knows the
    // job's secret.
    let far = format!("from {}:", NETNS_ADDRS[1]);
    assert!(
        out.stderr.lines().any(|l| l.contains(&far)),
        "no PMI connection from the other namespace\n{}",
        out.report()
    );
    assert!(
        out.stderr.contains("authtype=challenge-sha256"),
        "the node servers did not authenticate\n{}",
        out.report()
    );
    out
}

#[test]
fn across_network_namespaces_slurm_libpmi2() {
    let _g = heavy();
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let out = across_netns("s", prog(Prog::Pmi2Slurm), &args, "warn");
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
}

#[test]
fn across_network_namespaces_fastpmi_libpmi2() {
    let _g = heavy();
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let log = "warn,fastpmi_capi::session=debug";
    let out = across_netns("f", prog(Prog::Pmi2SlurmOwnHeader), &args, log);
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
    common::assert_one_job_on_segments(&out, TOTAL);
}

#[test]
fn across_network_namespaces_mpich() {
    let _g = heavy();
    let args = [TOTAL.to_string(), PER_NODE.to_string()];
    let out = across_netns("m", prog(Prog::MpiNodeSplit), &args, "warn");
    assert_only_line(&out, &format!("nodes ok size={TOTAL} local={PER_NODE}"));
}

#[test]
fn across_network_namespaces_intel_mpi() {
    let _g = heavy();
    let args = [TOTAL.to_string(), PER_NODE.to_string()];
    let program = Stack::Impi.program("mpi_node_split");
    let out = across_netns("i", &program, &args, "warn");
    assert_only_line(&out, &format!("nodes ok size={TOTAL} local={PER_NODE}"));
}
