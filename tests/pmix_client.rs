//! The PMIx host with a plain libpmix client (`tests/c/pmix_client.c`,
//! built against Debian's libpmix-dev): put, commit, fence with data
//! collection and a get of every rank's value at 1, 4 and 64 ranks; a
//! rank that connects and exits without `PMIx_Finalize` fails the job, as
//! a PMI rank that exits before finalize does; and PMIx publish, lookup
//! and unpublish in fastpmi's one name service, which PMI clients share.

use std::time::Duration;

mod common;
mod rank_role;

fn client() -> std::path::PathBuf {
    common::pmix::compile("pmix_client", true)
}

#[test]
fn a_pmix_exchange_sees_every_ranks_value() {
    let _g = common::heavy();
    let exe = client();
    for n in [1u32, 4, 64] {
        let out = common::launch(["-n", &n.to_string(), exe.to_str().unwrap(), "exchange"])
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_success();
        let mut lines = out.stdout_lines();
        lines.sort();
        let mut want: Vec<String> = (0..n)
            .map(|r| format!("pmix exchange ok rank {r} size {n}"))
            .collect();
        want.sort();
        assert_eq!(lines, want, "{}", out.report());
    }
}

#[test]
fn a_pmix_rank_that_exits_before_finalize_fails_the_job() {
    let exe = client();
    let out = common::launch(["-n", "2", exe.to_str().unwrap(), "exit-early"])
        .timeout(Duration::from_secs(60))
        .run();
    assert_eq!(out.code(), Some(1), "{}", out.report());
    assert!(
        out.stderr
            .contains("exited with status 0 before PMIx_Finalize"),
        "{}",
        out.report()
    );
}

#[test]
fn pmix_publish_lookup_and_unpublish() {
    let exe = client();
    let out = common::launch([
        "-n",
        "2",
        exe.to_str().unwrap(),
        "names",
        "ocean",
        "tcp://x:1",
    ])
    .timeout(Duration::from_secs(60))
    .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        ["pmix names ok ocean=tcp://x:1, gone after unpublish"],
        "{}",
        out.report()
    );
}

/// The PMI rank of the mixed job below: look the name up until the PMIx
/// rank has published it, then say so with the marker file.
fn role_pmi_looker() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let file = rank_role::env("FASTPMI_TEST_MARK")?;
    let port = rank_role::poll(Duration::from_secs(60), "ice published", || {
        pmi.lookup("ice").map_err(|e| e.to_string())
    })?;
    println!("pmi lookup ice={port}");
    std::fs::write(&file, b"").map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

/// One job, two personalities: a PMIx rank publishes, a PMI-2 rank (the
/// Rust client) finds the name: one name service.
#[test]
fn a_pmi_client_finds_a_name_a_pmix_client_published() {
    if let Some(r) = rank_role::role() {
        match r.as_str() {
            "looker" => rank_role::finish(role_pmi_looker()),
            other => rank_role::finish(Err(format!("unknown role {other}"))),
        }
    }
    let exe = client();
    let marks = common::scratch_dir("pmix-names");
    let mark = marks.path().join("looked");
    let me = rank_role::me();
    let mut args: Vec<String> = vec![
        "-n".into(),
        "1".into(),
        "--pmi".into(),
        "pmix".into(),
        exe.to_str().unwrap().into(),
        "publish-wait".into(),
        "ice".into(),
        "shm://ice".into(),
        mark.to_str().unwrap().into(),
        ":".into(),
        "-n".into(),
        "1".into(),
        "--pmi".into(),
        "pmi".into(),
        me,
    ];
    args.extend(rank_role::args(
        "a_pmi_client_finds_a_name_a_pmix_client_published",
    ));
    let out = common::launch(args)
        .env(rank_role::ROLE, "looker")
        .env("FASTPMI_TEST_MARK", &mark)
        .timeout(Duration::from_secs(90))
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert!(
        lines.contains(&"pmi lookup ice=shm://ice"),
        "{}",
        out.report()
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("pmix published ice until ")),
        "{}",
        out.report()
    );
}

/// Across launchers sharing a `fastpmi nameserver`: a PMIx client of
/// launcher A publishes, a PMI-2 client of launcher B finds the name.
#[test]
fn a_name_a_pmix_client_published_is_found_through_the_name_server() {
    if let Some(r) = rank_role::role() {
        match r.as_str() {
            "looker" => rank_role::finish(role_pmi_looker()),
            other => rank_role::finish(Err(format!("unknown role {other}"))),
        }
    }
    let exe = client();
    let (_ns, addr) = common::nameserver::start_fastpmi();
    let marks = common::scratch_dir("pmix-ns");
    let mark = marks.path().join("looked");
    let a = common::launch([
        "--nameserver",
        &addr,
        "-n",
        "1",
        exe.to_str().unwrap(),
        "publish-wait",
        "ice",
        "shm://ice",
        mark.to_str().unwrap(),
    ])
    .timeout(Duration::from_secs(90))
    .spawn();
    let b = rank_role::launch(
        "a_name_a_pmix_client_published_is_found_through_the_name_server",
        "looker",
        1,
        &["--nameserver", &addr],
    )
    .env("FASTPMI_TEST_MARK", &mark)
    .spawn();
    let out_b = b.wait_or_kill(Duration::from_secs(90));
    let out_a = a.wait_or_kill(Duration::from_secs(90));
    out_a.assert_success();
    out_b.assert_success();
    assert!(
        out_b.stdout.contains("pmi lookup ice=shm://ice"),
        "{}",
        out_b.report()
    );
    assert!(
        out_a.stdout.contains("pmix published ice until "),
        "{}",
        out_a.report()
    );
}

/// When a rank fails the job, the other PMIx ranks' handlers for
/// `PMIX_EVENT_PROC_TERMINATED` run before the launcher stops them, naming
/// the rank and its exit code.
#[test]
fn pmix_ranks_hear_which_rank_ended_before_the_teardown() {
    let exe = client();
    let out = common::launch(["-n", "3", exe.to_str().unwrap(), "watch"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(3);
    out.assert_stderr_names_rank(2);
    let mut lines = out.stdout_lines();
    lines.sort();
    assert_eq!(
        lines,
        [
            "pmix event proc-terminated rank 2 code 3",
            "pmix event proc-terminated rank 2 code 3"
        ],
        "{}",
        out.report()
    );
}

/// Each rank's `PMIX_CPUSET` is the binding fastpmi gave it, and its
/// `PMIX_LOCALITY_STRING` the library's for that binding: one string per
/// CPU set.
#[test]
fn pmix_cpuset_is_the_ranks_binding() {
    let exe = client();
    let out = common::launch(["-n", "4", exe.to_str().unwrap(), "cpuset"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert_eq!(lines.len(), 4, "{}", out.report());
    let mut by_cpus: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for l in lines {
        let field = |k: &str| {
            l.split(&format!(" {k}="))
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .map(str::to_string)
        };
        let (reg, allowed, loc) = (field("registered"), field("allowed"), field("locality"));
        assert!(
            reg.is_some() && reg.as_deref() != Some("none") && reg == allowed,
            "{l}"
        );
        // The library's locality string of the binding (what Open MPI
        // compares between processes).
        let loc = loc.filter(|l| l != "none" && !l.is_empty());
        assert!(loc.is_some(), "no locality string: {l}");
        by_cpus.entry(reg.unwrap()).or_default().push(loc.unwrap());
    }
    // Ranks bound alike have one locality string; ranks bound apart differ.
    let per_set: Vec<std::collections::BTreeSet<&String>> =
        by_cpus.values().map(|v| v.iter().collect()).collect();
    assert!(per_set.iter().all(|s| s.len() == 1), "{by_cpus:?}");
    let distinct: std::collections::BTreeSet<&String> =
        per_set.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(distinct.len(), by_cpus.len(), "{by_cpus:?}");
}

/// Process sets as PMIx queries answer them (what Open MPI 5's MPI
/// Sessions ask): `--pset ocean` on 2 ranks and `--pset ice` on 1; every
/// rank gets their number, names, members and the job's namespace, and a
/// set nobody defined is not found.
#[test]
fn pmix_queries_answer_the_process_sets() {
    let exe = client();
    let exe = exe.to_str().unwrap();
    let out = common::launch([
        "-n", "2", "--pset", "ocean", exe, "psets", ":", "-n", "1", "--pset", "ice", exe, "psets",
    ])
    .timeout(Duration::from_secs(60))
    .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert_eq!(lines.len(), 3, "{}", out.report());
    let ns = lines[0]
        .split(" namespaces=")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(ns.starts_with("fastpmi_"), "{}", out.report());
    let mut got: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    got.sort();
    let want: Vec<String> = (0..3)
        .map(|r| {
            format!(
                "pmix psets rank {r} num=2 names=ocean,ice members:ocean={ns}.0+{ns}.1 \
                 members:ice={ns}.2 missing=-46 namespaces={ns}"
            )
        })
        .collect();
    assert_eq!(got, want, "{}", out.report());
}

/// `PMIX_QUERY_PROC_TABLE` of a job: one row per rank with its pid (as
/// the rank itself reports it), its program, and the connected state.
#[test]
fn pmix_proc_table_lists_every_rank_with_its_pid() {
    let exe = client();
    let out = common::launch(["-n", "3", exe.to_str().unwrap(), "ptable"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let mut pids = std::collections::BTreeMap::new();
    let mut rows = std::collections::BTreeMap::new();
    for l in out.stdout_lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f[..] {
            ["pmix", "pid", "rank", r, p] => {
                pids.insert(r.to_string(), p.to_string());
            }
            ["pmix", "ptable", "rank", r, "pid", p, "state", s, "exe", e] => {
                rows.insert(r.to_string(), (p.to_string(), s.to_string(), e.to_string()));
            }
            _ => panic!("unexpected line {l:?}\n{}", out.report()),
        }
    }
    assert_eq!(pids.len(), 3, "{}", out.report());
    assert_eq!(rows.len(), 3, "{}", out.report());
    for (r, p) in &pids {
        let (pid, state, e) = &rows[r];
        assert_eq!(pid, p, "rank {r}'s pid\n{}", out.report());
        // PMIX_PROC_STATE_CONNECTED: every rank is inside PMIx.
        assert_eq!(state, "6", "rank {r}'s state\n{}", out.report());
        assert_eq!(e, exe.to_str().unwrap(), "rank {r}'s program");
    }
}

/// `PMIx_Spawn` from a libpmix client: two children in a new namespace,
/// registered as spawned with the parent's id; each looks up a name with
/// `PMIX_WAIT` that the parent publishes only 300 ms later, and gets it.
#[test]
fn pmix_spawn_and_a_waiting_lookup() {
    spawn_and_wait(&[]);
}

/// The same with the names in a shared `fastpmi nameserver`: the waiting
/// lookup is asked again over the network.
#[test]
fn pmix_spawn_and_a_waiting_lookup_through_the_name_server() {
    let (_ns, addr) = common::nameserver::start_fastpmi();
    spawn_and_wait(&["--nameserver", &addr]);
}

/// Strings and byte objects come back as published, a string that looks
/// like fastpmi's spelling of bytes included.
fn spawn_and_wait(flags: &[&str]) {
    let exe = client();
    let exe = exe.to_str().unwrap();
    let out = common::launch(flags.iter().copied().chain(["-n", "1", exe, "spawn"]))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    let ns = lines
        .iter()
        .find_map(|l| l.strip_prefix("pmix spawned "))
        .unwrap_or_else(|| panic!("no spawn line\n{}", out.report()))
        .to_string();
    let parent = lines
        .iter()
        .filter_map(|l| l.strip_prefix("pmix child rank "))
        .collect::<Vec<_>>();
    assert_eq!(parent.len(), 2, "{}", out.report());
    let first = ns.rsplit_once('_').map(|(p, _)| format!("{p}_0")).unwrap();
    for r in 0..2 {
        let want = format!(
            "{r} of {ns} spawned 1 parent {first}:0 card card-of-the-parent \
             bytes 0001feff66617374706d693a text fastpmi:text:not-bytes"
        );
        assert!(parent.contains(&want.as_str()), "{want}\n{}", out.report());
    }
}

/// Programming-model declarations (`PMIX_MODEL_DECLARED`,
/// `tests/c/pmix_model.c`): in each of 3 ranks a second `PMIx_Init`
/// declaring a model is heard by the process's own handler (the hybrid
/// use case: two libraries of one process), and a declaration rank 0
/// notifies to its namespace is heard by the other ranks' handlers, from
/// rank 0.
#[test]
fn pmix_model_declarations_reach_the_handlers() {
    let exe = common::pmix::compile("pmix_model", true);
    let out = common::launch(["-n", "3", exe.to_str().unwrap()])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    for r in 0..3 {
        let own = format!("pmix model rank {r} heard fastpmi-omp from self");
        assert!(lines.contains(&own.as_str()), "{own}\n{}", out.report());
    }
    for r in 1..3 {
        let peer = format!("pmix model rank {r} heard fastpmi-mpi from 0");
        assert!(lines.contains(&peer.as_str()), "{peer}\n{}", out.report());
    }
}

/// `PMIx_Connect` with a process of a namespace this launcher does not run
/// and, without a shared name server, cannot reach: refused at once
/// (rather than every later get of its data failing), and the job goes on.
#[test]
fn pmix_connect_to_an_unreachable_namespace_is_refused() {
    let exe = client();
    let out = common::launch(["-n", "1", exe.to_str().unwrap(), "connect-stranger"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert!(
        out.stdout_lines().contains(&"pmix connect stranger FAILED"),
        "{}",
        out.report()
    );
}

/// On a node without an RDMA device, PMIx (Open MPI) ranks are spared
/// libfabric's verbs probe, which reads all of /proc/kallsyms in each rank
/// (`FI_PROVIDER=^verbs`, docs/pmix.md); a user's own `FI_PROVIDER`, in the
/// launcher's environment or through `-env`, is kept; PMI ranks get nothing.
#[test]
fn pmix_ranks_skip_the_verbs_probe_without_rdma_devices() {
    let rdma = ["/sys/class/infiniband", "/sys/class/infiniband_verbs"]
        .iter()
        .any(|d| std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some()));
    let script = r#"echo "FI=${FI_PROVIDER-unset}""#;
    let run = |launcher_env: Option<&str>, args: &[&str]| -> String {
        let mut all: Vec<&str> = vec!["-n", "1"];
        all.extend(args);
        all.extend(["sh", "-c", script]);
        let cmd = common::launch(all).timeout(Duration::from_secs(60));
        let cmd = match launcher_env {
            Some(v) => cmd.env("FI_PROVIDER", v),
            None => cmd.env_remove("FI_PROVIDER"),
        };
        let out = cmd.run();
        out.assert_success();
        out.stdout.trim().to_string()
    };
    let default = if rdma { "FI=unset" } else { "FI=^verbs" };
    assert_eq!(
        run(None, &["--pmi", "pmix"]),
        default,
        "RDMA device: {rdma}"
    );
    assert_eq!(run(Some("tcp"), &["--pmi", "pmix"]), "FI=tcp");
    assert_eq!(
        run(None, &["--pmi", "pmix", "-env", "FI_PROVIDER", "shm"]),
        "FI=shm"
    );
    assert_eq!(run(None, &["--pmi", "pmi"]), "FI=unset");
}

/// On a node without a fabric device, Open MPI ranks leave out the OFI
/// BTL, which finds no provider there and then sleeps a second in every
/// rank's `MPI_Init` (`OMPI_MCA_btl=^ofi`, docs/pmix.md); a user's choice
/// of BTLs (the launcher's environment, `-env`, an MCA parameter file) is
/// kept, and PMI ranks get nothing.
#[test]
fn pmix_ranks_leave_out_the_ofi_btl_without_fabric_devices() {
    let fabric = [
        "/sys/class/infiniband",
        "/sys/class/infiniband_verbs",
        "/sys/class/cxi",
    ]
    .iter()
    .any(|d| std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some()));
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("mca-params.conf");
    std::fs::write(&conf, "# chosen by hand\nbtl = self,sm,tcp\n").unwrap();
    let other = dir.path().join("other.conf");
    std::fs::write(&other, "btl_tcp_if_include = lo\n").unwrap();
    let script = r#"echo "BTL=${OMPI_MCA_btl-unset}""#;
    let run = |env: &[(&str, &std::ffi::OsStr)], args: &[&str]| -> String {
        let mut all: Vec<&str> = vec!["-n", "1"];
        all.extend(args);
        all.extend(["sh", "-c", script]);
        let mut cmd = common::launch(all)
            .timeout(Duration::from_secs(60))
            .env_remove("OMPI_MCA_btl")
            .env_remove("OMPI_MCA_mca_base_param_files")
            // No user or installation file decides for the default case.
            .env("HOME", dir.path())
            .env_remove("OPAL_PREFIX");
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        let out = cmd.run();
        out.assert_success();
        out.stdout.trim().to_string()
    };
    let default = if fabric { "BTL=unset" } else { "BTL=^ofi" };
    assert_eq!(
        run(&[], &["--pmi", "pmix"]),
        default,
        "fabric device: {fabric}"
    );
    assert_eq!(
        run(&[("OMPI_MCA_btl", "tcp,self".as_ref())], &["--pmi", "pmix"]),
        "BTL=tcp,self"
    );
    assert_eq!(
        run(&[], &["--pmi", "pmix", "-env", "OMPI_MCA_btl", "self,sm"]),
        "BTL=self,sm"
    );
    let files = "OMPI_MCA_mca_base_param_files";
    assert_eq!(
        run(&[(files, conf.as_os_str())], &["--pmi", "pmix"]),
        "BTL=unset"
    );
    assert_eq!(
        run(&[(files, other.as_os_str())], &["--pmi", "pmix"]),
        default
    );
    // The files Open MPI reads without that variable: the user's, the
    // installation's.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".openmpi")).unwrap();
    std::fs::copy(&conf, home.join(".openmpi/mca-params.conf")).unwrap();
    assert_eq!(
        run(&[("HOME", home.as_os_str())], &["--pmi", "pmix"]),
        "BTL=unset"
    );
    let prefix = dir.path().join("prefix");
    std::fs::create_dir_all(prefix.join("etc")).unwrap();
    std::fs::copy(&conf, prefix.join("etc/openmpi-mca-params.conf")).unwrap();
    assert_eq!(
        run(&[("OPAL_PREFIX", prefix.as_os_str())], &["--pmi", "pmix"]),
        "BTL=unset"
    );
    assert_eq!(run(&[], &["--pmi", "pmi"]), "BTL=unset");
}
