//! The launcher's rendezvous socket (what `fastpmi ps` and `fastpmi
//! release` talk to): permissions and the peer-credential check against
//! another user, the default directory, cleanup after exit, failure and
//! SIGKILL, and behaviour under bad input.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::tools::{args, fastpmi, ps_json, runtime_dir, text, wait_for};
use common::{heavy, launch, prog, Prog};

/// The rendezvous sockets in `xdg`'s fastpmi directory (which also keeps
/// the launcher's topology cache, `topology-*.cache`).
fn rendezvous_files(xdg: &Path) -> Vec<PathBuf> {
    match fs::read_dir(xdg.join("fastpmi")) {
        Ok(d) => d
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_none_or(|x| x != "cache"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A second user is refused: by the directory's mode, and, with the modes
/// opened up, by the peer-credential check. Modes and ownership are right.
#[test]
fn rendezvous_refuses_other_users_and_has_private_modes() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test runs the client as nobody with setpriv: run the suite as root (as .ci/run does)"
    );
    let xdg = runtime_dir("rdv-users");
    // Let nobody reach the runtime dir itself (the fastpmi/ inside is the
    // launcher's).
    fs::set_permissions(xdg.path(), fs::Permissions::from_mode(0o711)).unwrap();
    for p in xdg.path().ancestors().skip(1) {
        let m = fs::metadata(p).unwrap().mode();
        assert!(
            m & 0o001 != 0,
            "{} is not searchable by others; nobody cannot reach the socket",
            p.display()
        );
    }
    let job = launch(["-n", "2", "sleep", "5"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .spawn();
    let pid = job.pid();
    let dir = xdg.path().join("fastpmi");
    let sock = dir.join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket", || {
        sock.exists().then_some(())
    });
    let dm = fs::symlink_metadata(&dir).unwrap();
    assert_eq!(dm.mode() & 0o777, 0o700, "directory mode");
    assert_eq!(dm.uid(), 0);
    let sm = fs::symlink_metadata(&sock).unwrap();
    assert_eq!(sm.mode() & 0o777, 0o600, "socket mode");
    assert_eq!(sm.uid(), 0);
    let as_nobody = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(common::launcher())
            .args(["ps", "--socket"])
            .arg(&sock)
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run setpriv")
    };
    let o = as_nobody();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o.stderr)
    );
    // Modes opened up by mistake: the launcher still refuses the peer.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711)).unwrap();
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    let o = as_nobody();
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("refused: uid 65534 is not the launcher's user"),
        "{e}"
    );
    assert!(
        !text(&o.stdout).contains("rank"),
        "nothing of the job is shown: {}",
        text(&o.stdout)
    );
    // The owner is served.
    assert!(ps_json(xdg.path(), pid).is_ok());
    job.wait_or_kill(Duration::from_secs(30)).assert_success();
    assert!(rendezvous_files(xdg.path()).is_empty());
}

/// Without XDG_RUNTIME_DIR the rendezvous is /tmp/fastpmi-<uid>, 0700.
#[test]
fn rendezvous_default_dir_in_tmp() {
    let job = launch(["-n", "1", "sleep", "2"])
        .env_remove("XDG_RUNTIME_DIR")
        .spawn();
    let pid = job.pid();
    let uid = rustix::process::geteuid().as_raw();
    let dir = PathBuf::from(format!("/tmp/fastpmi-{uid}"));
    let sock = dir.join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket in /tmp", || {
        sock.exists().then_some(())
    });
    assert_eq!(fs::symlink_metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(fs::symlink_metadata(&sock).unwrap().mode() & 0o777, 0o600);
    job.wait_or_kill(Duration::from_secs(30)).assert_success();
    assert!(!sock.exists(), "{} left behind", sock.display());
}

#[test]
fn rendezvous_removed_after_exit_failure_and_sigkill() {
    let xdg = runtime_dir("rdv-clean");
    // Normal exit.
    launch(["-n", "2", "true"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .run()
        .assert_success();
    assert!(rendezvous_files(xdg.path()).is_empty());
    // Failure.
    let out = launch(["-n", "2", "sh", "-c", "exit 3"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .run();
    assert_eq!(out.code(), Some(3));
    assert!(
        rendezvous_files(xdg.path()).is_empty(),
        "{:?}",
        rendezvous_files(xdg.path())
    );
    // SIGKILL: the file stays until the next `fastpmi ps` or launcher.
    let (pid, sock) = killed_launcher(xdg.path());
    assert!(
        sock.exists(),
        "a SIGKILLed launcher cannot remove its socket"
    );
    let o = fastpmi(xdg.path(), &["ps"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("stale"), "{}", text(&o.stderr));
    assert!(!sock.exists(), "fastpmi ps removes the stale socket");
    assert!(!text(&o.stdout).contains(&pid.to_string()));
    // SIGKILL again: the next launcher removes the dead one's socket. A
    // socket whose pid lives on (this test's, a process that is no
    // launcher) is left to `fastpmi ps`.
    let (_, sock) = killed_launcher(xdg.path());
    let alive = xdg
        .path()
        .join("fastpmi")
        .join(format!("{}.sock", std::process::id()));
    drop(std::os::unix::net::UnixListener::bind(&alive).unwrap());
    assert!(sock.exists() && alive.exists());
    launch(["-n", "1", "true"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .run()
        .assert_success();
    assert!(
        !sock.exists(),
        "the next launcher removes a dead one's socket"
    );
    assert!(alive.exists(), "a live pid's socket stays");
    fs::remove_file(&alive).unwrap();
}

/// A launcher (a sleeping job) in runtime dir `xdg`, SIGKILLed once its
/// rendezvous socket exists: its pid and that socket's path.
fn killed_launcher(xdg: &Path) -> (u32, PathBuf) {
    let job = launch(["-n", "1", "sleep", "30"])
        .env("XDG_RUNTIME_DIR", xdg)
        .spawn();
    let pid = job.pid();
    let sock = xdg.join("fastpmi").join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket", || {
        sock.exists().then_some(())
    });
    common::signal(pid, libc::SIGKILL);
    let out = job.wait_or_kill(Duration::from_secs(30));
    assert_eq!(out.status.code(), None, "killed");
    (pid, sock)
}

fn raw_request(sock: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Garbage, a huge request, bad versions and ops, and clients that connect
/// and never send or read: each is answered with an error or dropped; the
/// job runs on and a normal query still works.
#[test]
fn rendezvous_bad_input() {
    let _g = heavy();
    let xdg = runtime_dir("rdv-bad");
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let go = common::scratch_dir("rdv-bad-go");
    let gofile = go.path().join("go");
    // 16 ranks, rank 3 late so the job waits in fence 1 while we poke it.
    let job = launch(args(&[
        &"-genv",
        &"LD_LIBRARY_PATH",
        &lib,
        &"-n",
        &"16",
        &exe,
    ]))
    .env("XDG_RUNTIME_DIR", xdg.path())
    .env("FASTPMI_TEST_LATE_RANK", "3")
    .env("FASTPMI_TEST_GO", &gofile)
    .spawn();
    let pid = job.pid();
    let sock = xdg.path().join("fastpmi").join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(30), "socket", || {
        sock.exists().then_some(())
    });
    let err = |reply: &str, want: &str| {
        let v: serde_json::Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("{e}: {reply:?}"));
        assert_eq!(v["ok"], false, "{reply}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(want),
            "want {want:?}: {reply}"
        );
    };
    err(&raw_request(&sock, b"garbage\n"), "not a JSON request");
    err(
        &raw_request(&sock, b"\x00\xff\xfe{{{\n"),
        "not a JSON request",
    );
    err(
        &raw_request(&sock, br#"{"version":99,"op":"ps"}"#),
        "version 99 not supported",
    );
    err(
        &raw_request(&sock, b"{\"version\":1,\"op\":\"format-disk\"}\n"),
        "bad request",
    );
    err(
        &raw_request(&sock, b"{\"version\":1,\"op\":\"ps\",\"job\":\"nope\"}\n"),
        "no job nope",
    );
    let huge = vec![b'x'; 8 << 20];
    err(&raw_request(&sock, &huge), "longer than 4096");
    // Connect and never send; connect, send and never read.
    let mut idle: Vec<UnixStream> = (0..fastpmi::tools::rendezvous::MAX_CLIENTS)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // Over the limit of clients at once: told to retry.
    let busy = raw_request(&sock, b"{\"version\":1,\"op\":\"info\"}\n");
    err(&busy, "too many clients");
    // Clients that send a request and never read the reply.
    drop(idle.drain(..2));
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..2 {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(b"{\"version\":1,\"op\":\"ps\"}\n").unwrap();
        idle.push(s);
    }
    // The stalled clients are dropped after their deadline; then queries work.
    std::thread::sleep(Duration::from_millis(2500));
    let t = wait_for(Duration::from_secs(10), "a normal query", || {
        ps_json(xdg.path(), pid).ok()
    });
    assert_eq!(t[0].ranks.len(), 16);
    drop(idle);
    fs::write(&gofile, "go").unwrap();
    let out = job.wait_or_kill(Duration::from_secs(60));
    out.assert_success();
    assert_eq!(
        out.stdout_lines()
            .iter()
            .filter(|l| l.starts_with("late ok"))
            .count(),
        16
    );
}
