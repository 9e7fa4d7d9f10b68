//! The name service with real MPI stacks: a spawned child publishes and
//! its parent looks up, and connect/accept between two jobs of two
//! launchers through a name server. As in `tests/spawn_stacks.rs`, each
//! test runs under the stack's own launcher first (that half must pass),
//! then under fastpmi; tests without an own half say why.

mod common;

use common::halves::{exactly, own_then_fastpmi, private_copy, verdict, Half, GRACE};
use common::nameserver::{free_port, Daemon};
use common::stacks::Stack;
use common::{assert_no_process_left, heavy, scratch_dir, Cmd};
use std::path::{Path, PathBuf};
use std::time::Duration;

// ---------------------------------------------------------------------------
// Name service
// ---------------------------------------------------------------------------

/// A spawned child publishes a port under a service name, the parent looks
/// it up (same string), the child unpublishes, the parent's second lookup
/// fails. No separate name server: the launcher serves the job and its
/// children (Hydra 5 does without `-nameserver`).
#[test]
fn mpich5_child_publishes_parent_looks_up() {
    let stack = Stack::Mpich5;
    let service = format!("fastpmi-test-pub-{}", std::process::id());
    let s2 = service.clone();
    let check = move |lines: &[String]| {
        let child = format!("nameserv child ok published={s2}");
        let parent_prefix = format!("nameserv ok service={s2} port_len=");
        let ok = lines.len() == 2
            && lines.contains(&child)
            && lines
                .iter()
                .any(|l| l.starts_with(&parent_prefix) && l.ends_with(" unpublished=yes"));
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected `{child}` and `{parent_prefix}N unpublished=yes`; got {lines:#?}"
            ))
        }
    };
    own_then_fastpmi(
        stack,
        "nameserv_pub",
        "mpich5-nameserv",
        2,
        &[&service],
        stack.port_env(),
        Duration::from_secs(60),
        &check,
    );
}

/// Server job (2 ranks) and client job (3 ranks) started separately, sharing
/// a name server: `MPI_Publish_name` + `MPI_Comm_accept` meets
/// `MPI_Lookup_name` + `MPI_Comm_connect`; they exchange messages and
/// allreduce over the merged communicator. First with the stack's
/// `hydra_nameserver` and `mpiexec -nameserver`, then with `fastpmi
/// nameserver --port P` and `fastpmi --nameserver 127.0.0.1:P`.
fn connect_accept(stack: Stack) {
    let _g = heavy();
    let tag = format!("{}-connect", stack.name());
    let dir = scratch_dir(&tag);
    let exe = private_copy(&stack.program("connect_accept"), dir.path(), &tag);
    let exe_s = exe.display().to_string();
    let service = format!("fastpmi-test-ca-{}-{}", std::process::id(), stack.name());
    let timeout = Duration::from_secs(90);
    let server_line = "server ok clients=3 merged=5 got=hello-from-client-3".to_string();
    let client_line = "client ok servers=2 merged=5 got=hello-from-server-2".to_string();

    // Open MPI 5 connects jobs started apart only inside one PRRTE DVM
    // (`prte`, then `prun`), not between two `prterun`s: no own half; its
    // fastpmi half runs with Debian's server library and the wheel's.
    let halves: Vec<(Half, Option<PathBuf>)> = match stack.pmix_lib() {
        Some(lib) => vec![(Half::FastpmiOnly, None), (Half::FastpmiOnly, Some(lib))],
        None => vec![(Half::Own, None), (Half::Fastpmi, None)],
    };
    for (half, lib) in halves {
        let port = free_port();
        let ns_addr = format!("127.0.0.1:{port}");
        let mut ns = match half {
            Half::Own => Daemon::start(
                half.blame(),
                &stack.hydra_nameserver(),
                ["-port", &port.to_string()],
                port,
                Duration::from_secs(10),
            ),
            Half::Fastpmi | Half::FastpmiOnly => Daemon::start(
                half.blame(),
                Path::new(env!("CARGO_BIN_EXE_fastpmi")),
                ["nameserver", "--port", &port.to_string()],
                port,
                Duration::from_secs(10),
            ),
        };
        let job = |role: &str, n: &str| -> Cmd {
            let args: Vec<&str> = match half {
                Half::Own => vec!["-nameserver", &ns_addr, "-n", n, &exe_s, role, &service],
                Half::Fastpmi | Half::FastpmiOnly => {
                    let mut a = vec!["--nameserver", ns_addr.as_str()];
                    if let Some(l) = lib.as_ref().and_then(|l| l.to_str()) {
                        a.extend(["--pmix-lib", l]);
                    }
                    a.extend(["-n", n, &exe_s, role, &service]);
                    a
                }
            };
            let mut c = match half {
                Half::Own => stack.own_launcher(&args),
                Half::Fastpmi | Half::FastpmiOnly => stack.fastpmi(&args),
            };
            for (k, v) in stack.port_env() {
                c = c.env(k, v);
            }
            c.cwd(dir.path()).timeout(timeout)
        };
        let server = job("server", "2").spawn();
        let client = job("client", "3").run();
        let server = server.wait();
        let ns_report = ns.stop_and_report();
        let mut errors = Vec::new();
        for (out, line) in [(&server, &server_line), (&client, &client_line)] {
            if let Err(e) = verdict(half, out, &exactly(vec![line.clone()])) {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            panic!(
                "{}\n--- both jobs ---\nserver job:\n{}\nclient job:\n{}\n{ns_report}",
                errors.join("\n"),
                server.report(),
                client.report()
            );
        }
        assert_no_process_left(&exe, GRACE);
    }
}

#[test]
fn mpich5_connect_accept_through_nameserver() {
    connect_accept(Stack::Mpich5);
}

/// Open MPI 5 jobs of two launchers: after `PMIx_Connect` each side's
/// ranks get the other side's endpoint data from their own launcher,
/// which fetches what the other launcher offered in the name server
/// (docs/pmix.md).
#[test]
fn open_mpi_5_connect_accept_through_nameserver() {
    connect_accept(Stack::Ompi5);
}

#[test]
fn impi_connect_accept_through_nameserver() {
    connect_accept(Stack::Impi);
}
