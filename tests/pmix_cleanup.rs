//! Nothing of an Open MPI 5 job is left behind (docs/pmix.md, "Cleanup"):
//! the launcher deregisters each PMIx rank when it ends and each
//! namespace when its job ends, so the library runs the epilogs the ranks
//! registered (Open MPI 5's shared-memory files in /dev/shm), and removes
//! its own directories; a launch after a SIGKILL of the launcher removes
//! what the dead one left, and nothing of a live one. Each job runs with
//! its own runtime and temporary directories (`XDG_RUNTIME_DIR`,
//! `TMPDIR`), so what they hold afterwards is this job's alone; /dev/shm
//! is shared, so the files checked there are those the ranks said they
//! mapped.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::heavy;
use common::stacks::Stack;

const S: Stack = Stack::Ompi5;

/// A job's private runtime and temporary directories.
struct Dirs {
    xdg: tempfile::TempDir,
    tmp: tempfile::TempDir,
}

impl Dirs {
    fn new(tag: &str) -> Dirs {
        Dirs {
            xdg: common::tools::runtime_dir(&format!("{tag}-xdg")),
            tmp: common::scratch_dir(&format!("{tag}-tmp")),
        }
    }

    fn launch(&self, args: &[&str]) -> common::Cmd {
        S.fastpmi(args)
            .env("XDG_RUNTIME_DIR", self.xdg.path())
            .env("TMPDIR", self.tmp.path())
            .timeout(Duration::from_secs(300))
    }

    /// Everything under both directories (the launchers' sockets and
    /// topology cache aside: they belong to no job).
    fn contents(&self) -> BTreeSet<PathBuf> {
        let mut all = BTreeSet::new();
        for d in [self.xdg.path(), self.tmp.path()] {
            walk(d, &mut all);
        }
        all.retain(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.starts_with("topology-") && p != &self.xdg.path().join("fastpmi")
        });
        all
    }

    /// This launcher's PMIx directory.
    fn pmix_dir(&self, pid: u32) -> PathBuf {
        self.xdg.path().join(format!("fastpmi/pmix-{pid}"))
    }
}

fn walk(d: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(d) else {
        return;
    };
    for e in entries.flatten() {
        out.insert(e.path());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&e.path(), out);
        }
    }
}

/// The /dev/shm files the ranks said they map.
fn shm_files(stderr: &str) -> BTreeSet<PathBuf> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("shm "))
        .filter_map(|l| l.split_once(' ').map(|(_, p)| PathBuf::from(p)))
        .collect()
}

fn mapped(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.starts_with("mapped ")).count()
}

/// Open MPI 5 made files in /dev/shm (else nothing here could fail), and
/// none of them is left.
fn assert_gone(files: &BTreeSet<PathBuf>, report: &str) {
    assert!(
        !files.is_empty(),
        "the ranks mapped no file in /dev/shm: nothing to check\n{report}"
    );
    let left: Vec<_> = files.iter().filter(|f| f.exists()).collect();
    assert!(left.is_empty(), "left behind: {left:?}\n{report}");
}

/// The node's system rendezvous file in `tmp` does not name `pid`.
fn system_file_not_of(tmp: &Path, pid: u32) {
    for e in std::fs::read_dir(tmp).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("pmix.sys.") {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            assert_ne!(
                text.lines().nth(2).map(str::trim),
                Some(pid.to_string().as_str()),
                "{name} still names the ended launcher {pid}"
            );
        }
    }
}

/// Start `args` and wait until all `n` ranks said what they map.
fn start_mapped(dirs: &Dirs, n: u32, args: &[&str]) -> common::Job {
    let job = dirs.launch(args).spawn();
    let deadline = Instant::now() + Duration::from_secs(240);
    while mapped(&job.stderr_so_far()) < n as usize {
        assert!(
            Instant::now() < deadline,
            "the ranks did not start: {}",
            job.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    job
}

#[test]
fn open_mpi_5_jobs_of_8_and_256_ranks_leave_nothing_behind() {
    let _g = heavy();
    let prog = S.program("ompi_shm_files");
    for n in [8u32, 256] {
        let dirs = Dirs::new(&format!("cleanup-{n}"));
        let before = dirs.contents();
        let ns = n.to_string();
        let out = dirs.launch(&["-n", &ns, prog.to_str().unwrap()]).run();
        out.assert_success();
        assert!(
            out.stdout
                .contains(&format!("allreduce ok size={n} sum={n}")),
            "{}",
            out.report()
        );
        let files = shm_files(&out.stderr);
        assert_gone(&files, &out.report());
        assert_eq!(dirs.contents(), before, "{}", out.report());
    }
}

#[test]
fn open_mpi_5_files_go_when_a_rank_is_killed() {
    let _g = heavy();
    let prog = S.program("ompi_shm_files");
    let dirs = Dirs::new("cleanup-killed");
    let before = dirs.contents();
    // Rank 3 kills itself with SIGKILL once all have mapped their files.
    let out = dirs
        .launch(&["-n", "8", prog.to_str().unwrap(), "2", "3"])
        .run();
    assert!(!out.status.success(), "{}", out.report());
    assert!(
        out.stderr.contains("rank 3") && out.stderr.contains("SIGKILL"),
        "{}",
        out.report()
    );
    assert_eq!(mapped(&out.stderr), 8, "{}", out.report());
    assert_gone(&shm_files(&out.stderr), &out.report());
    assert_eq!(dirs.contents(), before, "{}", out.report());
}

#[test]
fn open_mpi_5_files_go_when_the_launcher_gets_sigterm() {
    let _g = heavy();
    let prog = S.program("ompi_shm_files");
    let dirs = Dirs::new("cleanup-sigterm");
    let before = dirs.contents();
    let job = start_mapped(&dirs, 8, &["-n", "8", prog.to_str().unwrap(), "60"]);
    let pid = job.pid();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let out = job.wait_or_kill(Duration::from_secs(60));
    assert!(
        out.stderr.contains("SIGTERM"),
        "the launcher did not report the signal\n{}",
        out.report()
    );
    assert_gone(&shm_files(&out.stderr), &out.report());
    assert_eq!(dirs.contents(), before, "{}", out.report());
    system_file_not_of(dirs.tmp.path(), pid);
}

/// Wait until launcher `pid` recorded every file in `files` for the
/// launch after a SIGKILL (its `pmix-<pid>/cleanup`).
fn wait_recorded(dirs: &Dirs, pid: u32, files: &BTreeSet<PathBuf>) {
    let record = dirs.pmix_dir(pid).join("cleanup");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        if files.iter().all(|f| text.contains(&*f.to_string_lossy())) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} does not list {files:?}:\n{text}",
            record.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn after_a_sigkill_of_the_launcher_the_next_launch_removes_its_files_only() {
    let _g = heavy();
    let prog = S.program("ompi_shm_files");
    let dirs = Dirs::new("cleanup-sigkill");
    let before = dirs.contents();
    // A live launcher whose files must survive the sweep.
    let live = start_mapped(&dirs, 4, &["-n", "4", prog.to_str().unwrap(), "60"]);
    let live_files = shm_files(&live.stderr_so_far());
    assert!(!live_files.is_empty(), "{}", live.stderr_so_far());
    // The one that is killed; its ranks also map a file that was there
    // before the job, which must survive.
    let kept = PathBuf::from(format!("/dev/shm/fastpmi-test-kept-{}", std::process::id()));
    std::fs::write(&kept, vec![0u8; 4096]).unwrap();
    let doomed = start_mapped(
        &dirs,
        4,
        &[
            "-n",
            "4",
            prog.to_str().unwrap(),
            "60",
            "-1",
            kept.to_str().unwrap(),
        ],
    );
    let doomed_pid = doomed.pid();
    let mut doomed_files = shm_files(&doomed.stderr_so_far());
    assert!(
        doomed_files.remove(&kept),
        "the ranks did not map {}",
        kept.display()
    );
    assert!(!doomed_files.is_empty(), "{}", doomed.stderr_so_far());
    wait_recorded(&dirs, doomed_pid, &doomed_files);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(doomed_pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let killed = doomed.wait_or_kill(Duration::from_secs(30));
    assert!(
        doomed_files.iter().all(|f| f.exists()),
        "the files were removed before the next launch: nothing tested\n{}",
        killed.report()
    );
    assert!(dirs.pmix_dir(doomed_pid).exists());

    // Any launch sweeps (here a PMI job of one rank).
    let next = dirs.launch(&["-n", "1", "true"]).run();
    next.assert_success();
    let left: Vec<_> = doomed_files.iter().filter(|f| f.exists()).collect();
    assert!(left.is_empty(), "left behind: {left:?}\n{}", next.report());
    assert!(
        kept.exists(),
        "a file older than the job, which its ranks only mapped, was removed"
    );
    std::fs::remove_file(&kept).unwrap();
    assert!(!dirs.pmix_dir(doomed_pid).exists());
    system_file_not_of(dirs.tmp.path(), doomed_pid);
    assert!(
        !dirs
            .xdg
            .path()
            .join(format!("fastpmi/{doomed_pid}.sock"))
            .exists(),
        "the dead launcher's rendezvous socket is left"
    );

    // The live launcher's files are untouched, and it ends cleanly.
    let live_pid = live.pid();
    assert!(
        live_files.iter().all(|f| f.exists()),
        "a live launcher's files were removed"
    );
    assert!(dirs.pmix_dir(live_pid).exists());
    let out = live.wait_or_kill(Duration::from_secs(120));
    out.assert_success();
    assert_gone(&live_files, &out.report());
    assert_eq!(dirs.contents(), before, "{}", out.report());
}
