//! Helpers of the tools tests (`tools_*.rs`): private runtime directories,
//! `fastpmi ps` as a command and as JSON, and a 256-rank job whose rank 17
//! is late to PMI while the others fence ([`Late`]).

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fastpmi::tools::proto::JobTable;

use crate::common;
use crate::common::launch;

pub const LATE: u32 = 17;
pub const N: u32 = 256;

/// A private runtime directory (the launcher's rendezvous goes into
/// `<it>/fastpmi/`).
pub fn runtime_dir(tag: &str) -> tempfile::TempDir {
    let d = common::scratch_dir(tag);
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// `fastpmi ARGS` (not a launch) with this runtime dir.
pub fn fastpmi(xdg: &Path, args: &[&str]) -> Output {
    Command::new(common::launcher())
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .stdin(Stdio::null())
        .output()
        .expect("run fastpmi")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The proc table of launcher `pid` (`fastpmi ps PID --json`).
pub fn ps_json(xdg: &Path, pid: u32) -> Result<Vec<JobTable>, String> {
    let o = fastpmi(xdg, &["ps", &pid.to_string(), "--json"]);
    if !o.status.success() {
        return Err(format!("fastpmi ps failed: {}", text(&o.stderr)));
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("ps --json: {e}: {}", text(&o.stdout)))
}

/// Poll `f` every 200 ms until it yields `Some`, for at most `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The job's table once every rank but the late one is in fence 1.
pub fn wait_late_fence(xdg: &Path, pid: u32) -> JobTable {
    wait_for(Duration::from_secs(120), "255 ranks in fence 1", || {
        let jobs = ps_json(xdg, pid).ok()?;
        let t = jobs.into_iter().next()?;
        let inside = t.ranks.iter().filter(|r| r.kind == "in_fence").count();
        (inside == N as usize - 1).then_some(t)
    })
}

pub struct Late {
    pub xdg: tempfile::TempDir,
    pub marks: tempfile::TempDir,
    pub go: PathBuf,
}

impl Late {
    pub fn new(tag: &str) -> Late {
        let xdg = runtime_dir(tag);
        let marks = common::scratch_dir(&format!("{tag}-marks"));
        let go = marks.path().join("go");
        Late { xdg, marks, go }
    }

    /// `fastpmi FLAGS SECTIONS` with rank 17 late.
    pub fn launch(&self, args: Vec<OsString>) -> common::Cmd {
        launch(args)
            .env("XDG_RUNTIME_DIR", self.xdg.path())
            .env("FASTPMI_TEST_LATE_RANK", LATE.to_string())
            .env("FASTPMI_TEST_GO", &self.go)
            .env("FASTPMI_TEST_MARK_DIR", self.marks.path())
            .timeout(Duration::from_secs(180))
    }

    pub fn late_pid(&self) -> u32 {
        let p = self.marks.path().join(format!("pid.{LATE}"));
        wait_for(Duration::from_secs(60), "pid file of rank 17", || {
            fs::read_to_string(&p).ok()?.trim().parse().ok()
        })
    }

    pub fn release(&self) {
        fs::write(&self.go, "go").unwrap();
    }
}

pub fn args(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_owned()).collect()
}
