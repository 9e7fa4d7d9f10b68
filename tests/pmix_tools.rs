//! PMIx tools (RFC0010) against a running fastpmi job: Debian's `pps`
//! (`libpmix-bin`) finds the launcher's PMIx server by the rendezvous file
//! named by its pid in the launcher's private directory and lists the
//! job's namespace, which it
//! gets through the host's query upcall; a tool of another uid (65534,
//! through `setpriv`) cannot reach the server (the directory is 0700) and
//! the job goes on.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::heavy;

/// The server's tool rendezvous file of launcher `pid` in `dir`.
fn rendezvous(dir: &Path, pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pmix.") && n.ends_with(&format!(".tool.{pid}")))
        })
}

#[test]
fn pps_lists_a_running_jobs_namespace_and_another_uid_is_refused() {
    let _g = heavy();
    // A short path: the server's sockets live under it (at most 108 bytes
    // for a socket's path).
    let xdg = tempfile::Builder::new()
        .prefix("fpt")
        .tempdir_in("/tmp")
        .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(xdg.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut job = common::launch(["--pmi", "pmix", "-n", "2", "sleep", "60"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .timeout(Duration::from_secs(120))
        .spawn();
    let pid = job.pid();
    let dir = xdg.path().join("fastpmi").join(format!("pmix-{pid}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let file = loop {
        if let Some(f) = rendezvous(&dir, pid) {
            break f;
        }
        assert!(
            Instant::now() < deadline && job.try_wait().is_none(),
            "no tool rendezvous in {}\n{}",
            dir.display(),
            job.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let pps = |uid: Option<u32>| {
        let mut c = match uid {
            Some(u) => {
                let mut c = Command::new("setpriv");
                c.args([
                    format!("--reuid={u}"),
                    format!("--regid={u}"),
                    "--clear-groups".into(),
                    "pps".into(),
                ]);
                c
            }
            None => Command::new("pps"),
        };
        // The file of this launcher's server (the directory also holds
        // one named by the server's namespace).
        c.arg("--uri")
            .arg(format!("file:{}", file.display()))
            .output()
            .expect("run pps (Debian package libpmix-bin) or setpriv (util-linux)")
    };
    let mine = pps(None);
    // pps writes its answers to stderr.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&mine.stdout),
        String::from_utf8_lossy(&mine.stderr)
    );
    let want = format!("fastpmi_{pid}_0");
    let listed = text
        .lines()
        .any(|l| l.starts_with("Active nspaces:") && l.split([' ', ',']).any(|w| w.trim() == want));
    let other = pps(Some(65534));
    let running = job.try_wait().is_none();
    let out = job.kill_all();
    assert!(
        mine.status.success() && listed,
        "pps: {} (launcher {pid})\n{text}\n{}",
        mine.status,
        out.report()
    );
    assert!(
        !other.status.success(),
        "a tool of uid 65534 reached the server: {}",
        String::from_utf8_lossy(&other.stdout)
    );
    assert!(running, "the job ended while tools asked\n{}", out.report());
}
