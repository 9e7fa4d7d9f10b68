//! Placement (issue 13): rank binding (`-bind-to`, `-map-by`, the default
//! policy) as the ranks see it in `/proc/self/status` and in Intel MPI's
//! `I_MPI_DEBUG=5` pinning table, `PMI_hwloc_xmlfile` read by MPICH, bad
//! placement options, and Intel MPI's launcher hints.
//!
//! Real processes only: Intel MPI from the `impi-rt`/`impi-devel` wheels and
//! MPICH 5 from the `mpich` wheel (venvs from scripts/install-mpi-stacks;
//! a missing one fails the test with the command that installs it). The
//! node's cores come from `/sys/devices/system/cpu/*/topology` (the
//! kernel's view, independent of the hwloc the launcher uses).

mod common;

use common::placement::*;
use common::stacks::Stack;
use common::{heavy, launch, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Binding
// ---------------------------------------------------------------------------

/// `-bind-to core` with more ranks than cores: rank r on core r mod cores
/// (each rank on exactly one core, the first `cores` ranks on distinct
/// ones), the same in the rank's /proc status, in `--print-bindings` and
/// in Intel MPI's own pinning report.
fn core_binding_wraps(mode: Mode) {
    let cores = cores();
    let nc = cores.len() as u32;
    let n = 2 * nc + 1;
    let out = impi(
        mode,
        n,
        "mpi_hello",
        &["-bind-to", "core", "--print-bindings"],
    );
    let seen = hello_cpus(&out, n);
    let mut first: Vec<&BTreeSet<u32>> = Vec::new();
    for (&r, cpus) in &seen {
        assert!(
            cores.contains(cpus),
            "rank {r} bound to {cpus:?}, not one core of {cores:?}\n{}",
            out.report()
        );
        if r < nc {
            assert!(
                !first.contains(&cpus),
                "rank {r} shares a core\n{}",
                out.report()
            );
            first.push(cpus);
        } else {
            assert_eq!(cpus, &seen[&(r % nc)], "rank {r} wraps to rank {}", r % nc);
        }
    }
    assert_eq!(
        printed_bindings(&out),
        seen,
        "--print-bindings\n{}",
        out.report()
    );
}

#[test]
fn bind_to_core_wraps_past_the_last_core() {
    core_binding_wraps(Mode::Pmi1);
}

#[test]
fn bind_to_core_in_port_mode() {
    core_binding_wraps(Mode::Port);
}

#[test]
fn impi_reports_the_launchers_binding() {
    let cores = cores();
    let n = cores.len() as u32 + 1;
    let _g = heavy();
    let exe = Stack::Impi.program("mpi_hello");
    let out = launch([
        "-bind-to",
        "core",
        "-n",
        &n.to_string(),
        &exe.display().to_string(),
    ])
    .env("I_MPI_DEBUG", "5")
    .timeout(T4)
    .run();
    let seen = hello_cpus(&out, n);
    assert_eq!(
        impi_pin_table(&out),
        seen,
        "I_MPI_DEBUG=5 table\n{}",
        out.report()
    );
}

#[test]
fn bind_to_none_leaves_ranks_on_every_cpu() {
    let n = cores().len() as u32;
    let out = impi(Mode::Pmi1, n, "mpi_hello", &["--bind-to", "none"]);
    let own = own_cpus();
    for (r, cpus) in hello_cpus(&out, n) {
        assert_eq!(cpus, own, "rank {r} bound although -bind-to none");
    }
}

/// The default (docs/placement.md): one core per rank, wrapping around
/// when the ranks outnumber the cores.
#[test]
fn default_policy_binds_one_core_per_rank_wrapping() {
    let cores = cores();
    let nc = cores.len() as u32;
    let out = impi(Mode::Pmi1, nc, "mpi_hello", &[]);
    let seen = hello_cpus(&out, nc);
    let distinct: BTreeSet<&BTreeSet<u32>> = seen.values().collect();
    assert_eq!(distinct.len(), nc as usize, "one core each: {seen:?}");
    assert!(seen.values().all(|c| cores.contains(c)), "{seen:?}");
    let out = impi(Mode::Pmi1, nc + 1, "mpi_hello", &[]);
    let wrapped = hello_cpus(&out, nc + 1);
    for (r, cpus) in &wrapped {
        assert!(
            cores.contains(cpus),
            "rank {r} of {} on one core: {wrapped:?}",
            nc + 1
        );
    }
    let distinct: BTreeSet<&BTreeSet<u32>> = wrapped.values().collect();
    assert_eq!(distinct.len(), nc as usize, "every core used: {wrapped:?}");
}

#[test]
fn ps_json_shows_each_ranks_binding() {
    let _g = heavy();
    let xdg = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        xdg.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let n = cores().len() as u32 + 1;
    let exe = Stack::Impi.program("mpi_hello");
    let job = launch([
        "--stop-in-init",
        "-bind-to",
        "core",
        "--print-bindings",
        "-n",
        &n.to_string(),
        &exe.display().to_string(),
    ])
    .env("XDG_RUNTIME_DIR", xdg.path())
    .timeout(T4)
    .spawn();
    let pid = job.pid().to_string();
    let ps = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_fastpmi"))
            .args(args)
            .env("XDG_RUNTIME_DIR", xdg.path())
            .output()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let o = ps(&["ps", &pid, "--json"]);
        let rows: Option<Vec<(u32, Option<String>)>> =
            serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .ok()
                .and_then(|v| {
                    let ranks = v.get(0)?.get("ranks")?.as_array()?.clone();
                    let held = ranks.iter().all(|r| r["kind"] == "held_in_init");
                    held.then(|| {
                        ranks
                            .iter()
                            .map(|r| {
                                (
                                    r["rank"].as_u64().unwrap() as u32,
                                    r.get("cpus").and_then(|c| c.as_str()).map(String::from),
                                )
                            })
                            .collect()
                    })
                });
        if let Some(rows) = rows {
            break rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ranks never all held in init: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let released = ps(&["release", &pid]);
    assert!(released.status.success());
    let out = job.wait_or_kill(T4);
    let seen = hello_cpus(&out, n);
    let from_ps: BTreeMap<u32, BTreeSet<u32>> = rows
        .into_iter()
        .map(|(r, c)| (r, parse_list(&c.expect("cpus of a bound rank"))))
        .collect();
    assert_eq!(from_ps, seen, "ps --json cpus vs the ranks' own view");
}

// ---------------------------------------------------------------------------
// PMI_hwloc_xmlfile
// ---------------------------------------------------------------------------

/// MPICH 5 asks for `PMI_hwloc_xmlfile` in MPI_Init (Debian's MPICH 4.0.2
/// does not ask): every rank's get is answered with the launcher's memfd,
/// `/proc/<launcher pid>/fd/<n>`, and the job runs.
#[test]
fn mpich5_reads_pmi_hwloc_xmlfile() {
    let _g = heavy();
    let exe = Stack::Mpich5.program("mpi_allreduce");
    let job = Stack::Mpich5
        .fastpmi(["-n", "2", &exe.display().to_string(), "2"])
        .env("FASTPMI_LOG", "debug")
        .timeout(T4)
        .spawn();
    let pid = job.pid();
    let out = job.wait_or_kill(T4);
    out.assert_success();
    assert!(
        out.stdout.contains("allreduce ok size=2 sum=1"),
        "{}",
        out.report()
    );
    let lines = out.stderr_lines();
    let want = format!("value=/proc/{pid}/fd/");
    for r in 0..2 {
        let asked = lines.iter().position(|l| {
            l.contains(&format!("rank {r} -> cmd=get ")) && l.contains("key=PMI_hwloc_xmlfile")
        });
        let asked = asked.unwrap_or_else(|| panic!("rank {r} never asked\n{}", out.report()));
        let reply = lines[asked..]
            .iter()
            .find(|l| l.contains(&format!("rank {r} <- cmd=get_result")))
            .unwrap_or_else(|| panic!("no reply to rank {r}\n{}", out.report()));
        assert!(
            reply.contains("rc=0") && reply.contains(&want),
            "rank {r}: {reply}"
        );
    }
}

/// A rank's view of the launcher: the topology XML it exports (its memfd
/// `fastpmi-topology`) and the rank's own `HWLOC_PLUGINS_BLACKLIST`. The
/// launcher exports the XML while its first ranks start, before it serves
/// any PMI request: the rank looks once its `init` (PMI-1, on fd 3) is
/// answered, and finalizes.
const LAUNCHER_VIEW: &str = r#"printf 'cmd=init pmi_version=1 pmi_subversion=1\n' >&3; read -r _ <&3
printf 'cmd=finalize\n' >&3; read -r _ <&3
for f in /proc/$PPID/fd/*; do
  case $(readlink "$f") in *fastpmi-topology*) cat "$f";; esac
done
echo
echo "blacklist=${HWLOC_PLUGINS_BLACKLIST-unset}""#;

/// The launcher loads the node's topology without hwloc's I/O discovery
/// and libxml plugins (about 20 libraries, 3 ms of every launch; hwloc
/// unloads them again, so only the time shows it, in the harness), and the
/// XML it exports is still the whole node: one PU per CPU this process may
/// use. Keeping the plugins out takes `HWLOC_PLUGINS_BLACKLIST` for the
/// load only: the ranks' environment does not have it, and a user's own
/// value reaches them unchanged.
#[test]
fn exported_topology_is_the_node_and_the_plugin_blacklist_stays_in_the_launcher() {
    let cpus = own_cpus().len();
    let run = |user: Option<&str>| {
        let mut c = launch(["-n", "1", "sh", "-c", LAUNCHER_VIEW]).timeout(T4);
        c = match user {
            Some(v) => c.env("HWLOC_PLUGINS_BLACKLIST", v),
            None => c.env_remove("HWLOC_PLUGINS_BLACKLIST"),
        };
        let out = c.run();
        out.assert_success();
        out
    };
    let out = run(None);
    let xml = &out.stdout;
    assert!(
        xml.contains("<topology"),
        "no topology XML\n{}",
        out.report()
    );
    assert_eq!(
        xml.matches("type=\"PU\"").count(),
        cpus,
        "PUs in the exported topology vs CPUs of this process\n{}",
        out.report()
    );
    assert!(
        out.stdout.ends_with("\nblacklist=unset\n"),
        "{}",
        out.report()
    );
    let out = run(Some("hwloc_gl"));
    assert!(
        out.stdout.contains("blacklist=hwloc_gl\n"),
        "the user's value\n{}",
        out.report()
    );
}

/// The topology is kept across launches (the launcher's topology cache):
/// the first launch loads it with hwloc and keeps it, the next reads it
/// back, and the XML the ranks get and the bindings are the same each
/// time, and the same as a launch that does not use the cache. A damaged
/// file, or a change in what hwloc reads (here one of its environment
/// variables), is a miss: hwloc loads the topology again.
#[test]
fn cached_topology_is_hwlocs() {
    let xdg = common::tools::runtime_dir("topology-cache");
    let dir = xdg.path().join("fastpmi");
    let cache_files = || -> Vec<std::path::PathBuf> {
        let Ok(d) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut v: Vec<_> = d
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cache"))
            .collect();
        v.sort();
        v
    };
    let run = |env: &[(&str, &str)]| {
        let mut c = launch(["--print-bindings", "-n", "1", "sh", "-c", LAUNCHER_VIEW])
            .env("XDG_RUNTIME_DIR", xdg.path())
            .env("FASTPMI_LOG", "debug")
            .timeout(T4);
        for (k, v) in env {
            c = c.env(k, v);
        }
        let out = c.run();
        out.assert_success();
        let cached = out.stderr.contains("node topology from the cache");
        let bindings: Vec<String> = out
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains("bound to cpus") || l.contains("not bound"))
            .map(str::to_string)
            .collect();
        let xml = out.stdout.split("\nblacklist=").next().unwrap().to_string();
        assert!(xml.contains("<topology"), "{}", out.report());
        (cached, xml, bindings)
    };
    let (cached, xml, bindings) = run(&[("FASTPMI_TOPOLOGY_CACHE", "0")]);
    assert!(!cached);
    assert!(
        cache_files().is_empty(),
        "FASTPMI_TOPOLOGY_CACHE=0 wrote {:?}",
        cache_files()
    );
    assert_eq!(bindings.len(), 1, "{bindings:?}");
    let first = run(&[]);
    assert_eq!(
        first,
        (false, xml.clone(), bindings.clone()),
        "first launch: hwloc"
    );
    let files = cache_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let second = run(&[]);
    assert_eq!(
        second,
        (true, xml.clone(), bindings.clone()),
        "second launch: the cache"
    );
    // Damaged: cut in half.
    let bytes = fs::read(&files[0]).unwrap();
    fs::write(&files[0], &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(
        run(&[]),
        (false, xml.clone(), bindings.clone()),
        "damaged file"
    );
    assert_eq!(fs::read(&files[0]).unwrap(), bytes, "rewritten whole");
    assert!(run(&[]).0, "read back after the rewrite");
    // Another value of a variable hwloc reads: another key.
    let other = run(&[("HWLOC_HIDE_ERRORS", "1")]);
    assert_eq!(other, (false, xml.clone(), bindings.clone()), "another key");
    assert_eq!(cache_files().len(), 2, "{:?}", cache_files());
    assert!(run(&[("HWLOC_HIDE_ERRORS", "1")]).0);
    assert!(run(&[]).0, "the first key's file is still there");
}

// ---------------------------------------------------------------------------
// Bad options
// ---------------------------------------------------------------------------

/// Each is refused before any rank starts, with a message naming the bad
/// value (exit 2: command line; exit 1: the node cannot give it).
#[test]
fn bad_placement_options_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = |args: &[&str]| {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(["-n".into(), "2".into(), "touch".into()]);
        v.push(marker.display().to_string());
        launch(v).timeout(T4).run()
    };
    for (args, code, says) in [
        (&["-bind-to", "bogus"][..], 2, "bogus"),
        (&["-bind-to", "socket:0"][..], 2, "socket:0"),
        (&["--bind-to", "core:x"][..], 2, "core:x"),
        (&["-bind-to"][..], 2, "-bind-to"),
        (&["-map-by", "none"][..], 2, "none"),
        (&["--map-by", "slot"][..], 2, "slot"),
        (&["-ppn", "0"][..], 2, "-ppn 0"),
        (&["-bind-to", "core:65536"][..], 1, "core:65536"),
    ] {
        let out = touch(args);
        assert_eq!(out.code(), Some(code), "{args:?}\n{}", out.report());
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(!marker.exists(), "{args:?} started a rank");
    }
    assert!(Path::new(&dir.path()).exists());
}

// ---------------------------------------------------------------------------
// Intel MPI's launcher hints (src/launcher/impi.rs)
// ---------------------------------------------------------------------------

/// Every rank prints its `I_MPI_INFO_*` and `I_MPI_PIN_*` variables as
/// `RANK NAME=VALUE`.
const PRINT_HINTS: &str =
    "env | grep -E '^I_MPI_(INFO|PIN_MAPPING|PIN_INFO)' | sed \"s/^/$PMI_RANK /\"";

/// rank -> variable -> value, from the ranks' lines.
fn hints_of(out: &Outcome) -> BTreeMap<u32, BTreeMap<String, String>> {
    out.assert_success();
    let mut m: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
    for l in out.stdout_lines() {
        let Some((r, kv)) = l.split_once(' ') else {
            continue;
        };
        let (Ok(r), Some((k, v))) = (r.parse::<u32>(), kv.split_once('=')) else {
            continue;
        };
        m.entry(r).or_default().insert(k.into(), v.into());
    }
    m
}

/// A cache size or share list as Intel's launcher writes it on a sane
/// node: a positive number per level (`1,1,2`).
fn is_cache_list(s: &str) -> bool {
    s.split(',').all(|n| n.parse::<u64>().is_ok_and(|n| n > 0))
}

/// CPU 0's data/unified caches level by level, from the kernel: the
/// `I_MPI_INFO_CACHE_SIZE` (bytes) and `I_MPI_INFO_CACHE_SHARE` (CPUs
/// sharing each) a node's topology gives.
fn sysfs_cache_hints() -> [(&'static str, String); 2] {
    let dir = Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut levels: Vec<(u32, u64, usize)> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let read = |f: &str| {
                fs::read_to_string(p.join(f))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            if read("type")? == "Instruction" {
                return None;
            }
            let level = read("level")?.parse().ok()?;
            let size = read("size")?;
            let kib: u64 = size.strip_suffix('K')?.parse().ok()?;
            let cpus = read("shared_cpu_list")?
                .split(',')
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                    None => 1,
                })
                .sum();
            Some((level, kib * 1024, cpus))
        })
        .collect();
    levels.sort();
    let join = |f: &dyn Fn(&(u32, u64, usize)) -> String| {
        levels.iter().map(f).collect::<Vec<_>>().join(",")
    };
    [
        ("I_MPI_INFO_CACHE_SIZE", join(&|l| l.1.to_string())),
        ("I_MPI_INFO_CACHE_SHARE", join(&|l| l.2.to_string())),
    ]
}

/// The hints fastpmi gives are those Intel's own launcher gives on the same
/// node: each topology word fastpmi sets has Intel's value, and the pin
/// mapping and each rank's pin info are equal, bound (`-bind-to core`
/// against Intel's default pinning, which wraps one core per rank) and
/// unbound (`-bind-to none` against `I_MPI_PIN=0`).
#[test]
fn impi_hints_are_those_of_intels_launcher() {
    let n = cores().len() as u32 + 1;
    let _g = heavy();
    for (ours, theirs_env) in [("core", None), ("none", Some(("I_MPI_PIN", "0")))] {
        let mut intel = Stack::Impi.own_launcher(["-n", &n.to_string(), "sh", "-c", PRINT_HINTS]);
        if let Some((k, v)) = theirs_env {
            intel = intel.env(k, v);
        }
        let theirs = hints_of(&intel.timeout(T4).run());
        let mine = hints_of(
            &launch([
                "-bind-to",
                ours,
                "-n",
                &n.to_string(),
                "sh",
                "-c",
                PRINT_HINTS,
            ])
            .timeout(T4)
            .run(),
        );
        assert_eq!(mine.len(), n as usize, "-bind-to {ours}: {mine:?}");
        assert_eq!(theirs.len(), n as usize, "Intel's launcher: {theirs:?}");
        for (r, vars) in &mine {
            for must in ["I_MPI_INFO_LCPU", "I_MPI_INFO_CORE", "I_MPI_PIN_MAPPING"] {
                assert!(vars.contains_key(must), "rank {r} lacks {must}: {vars:?}");
            }
            for (k, v) in vars {
                let theirs_v = theirs[r].get(k);
                // Intel's launcher reads cache sizes and sharing itself
                // (CPUID); on some virtual machines it answers zeros or
                // stray bytes. Then the kernel's values are the reference.
                let kernel = sysfs_cache_hints();
                if let Some((_, want)) = kernel.iter().find(|(name, _)| name == k) {
                    if theirs_v.is_some_and(|t| is_cache_list(t)) {
                        assert_eq!(theirs_v, Some(v), "-bind-to {ours}, rank {r}, {k}");
                        continue;
                    }
                    assert_eq!(
                        v, want,
                        "-bind-to {ours}, rank {r}, {k}: fastpmi {v:?}, the kernel's \
                         (Intel's launcher says {theirs_v:?})"
                    );
                    continue;
                }
                assert_eq!(
                    theirs_v,
                    Some(v),
                    "-bind-to {ours}, rank {r}, {k}: fastpmi {v:?}, Intel's launcher {:?}",
                    theirs[r].get(k)
                );
            }
        }
    }
}

/// A hint the user set is theirs: fastpmi does not replace it.
#[test]
fn impi_hints_never_replace_the_users_variables() {
    let out = launch(["-n", "2", "sh", "-c", PRINT_HINTS])
        .env("I_MPI_PIN_MAPPING", "mine")
        .env("I_MPI_INFO_LCPU", "99")
        .timeout(T4)
        .run();
    for (r, vars) in hints_of(&out) {
        assert_eq!(
            vars.get("I_MPI_PIN_MAPPING").map(String::as_str),
            Some("mine"),
            "rank {r}"
        );
        assert_eq!(
            vars.get("I_MPI_INFO_LCPU").map(String::as_str),
            Some("99"),
            "rank {r}"
        );
        assert!(vars.contains_key("I_MPI_INFO_CORE"), "rank {r}: {vars:?}");
    }
}

// ---------------------------------------------------------------------------
// Fence cohorts from the binding
// ---------------------------------------------------------------------------

/// Ranks bound by the default policy, `COHORT_MIN_MEMBERS` or more per
/// core: the launcher releases their fence by cohorts, one per core, and a
/// job fencing on fastpmi's libpmi2 (shared memory) completes; one rank
/// fewer per core than that, and -bind-to none, keep the fence without
/// cohorts.
#[test]
fn ranks_sharing_cores_fence_by_cohorts() {
    let _g = heavy();
    let nc = cores().len() as u32;
    let min = shm_layout::cohort::COHORT_MIN_MEMBERS;
    let exe = common::prog(common::Prog::Pmi2Trivial);
    let lib = common::capi_lib_dir();
    let run = |n: u32, extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec!["-genv".into(), "LD_LIBRARY_PATH".into()];
        args.push(lib.into());
        args.extend(extra.iter().map(|a| a.into()));
        args.extend([
            "--stats".into(),
            "-n".into(),
            n.to_string().into(),
            exe.into(),
        ]);
        let out = launch(args)
            .env("FASTPMI_LOG", "debug")
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_success();
        let ok = format!("pmi2 trivial ok size={n}");
        assert!(
            out.stdout_lines().contains(&ok.as_str()),
            "{}",
            out.report()
        );
        // Every rank fenced through the segment.
        let shm = out
            .stderr_lines()
            .iter()
            .find(|l| l.trim_start().starts_with("shared-memory"))
            .map(|l| l.split_whitespace().nth(3).map(str::to_string))
            .unwrap_or_else(|| panic!("no --stats table\n{}", out.report()));
        assert_eq!(shm, Some(n.to_string()), "{}", out.report());
        out
    };
    let cohort_line = |out: &Outcome| {
        out.stderr_lines()
            .iter()
            .find(|l| l.contains("fence released by cohorts"))
            .map(|l| l.to_string())
    };
    let out = run(min * nc, &[]);
    let line = cohort_line(&out).unwrap_or_else(|| panic!("no cohorts\n{}", out.report()));
    assert!(line.contains(&format!("cohorts={nc}")), "{line}");
    let out = run(min * nc - 1, &[]);
    assert_eq!(cohort_line(&out), None, "{}", out.report());
    let out = run(min * nc, &["-bind-to", "none"]);
    assert_eq!(cohort_line(&out), None, "{}", out.report());
}
