//! Init on the job segment without a word on the socket: fastpmi's
//! launcher hands its ranks the segment in the environment
//! (`client::Direct`), so the Rust client (and the C libraries built on it)
//! only reads the environment, maps the segment and registers. The socket
//! is opened (`init`, `fullinit`) when a rank first needs the launcher, and
//! the launcher's rules for ranks that leave early still hold for ranks
//! that never opened it.
//!
//! The launcher's debug log (`FASTPMI_LOG=debug`) shows every PMI message
//! it reads as `rank R -> cmd=...`: that is what these tests count.

mod common;
mod rank_role;

use fastpmi_client::TransportKind;

/// `rank R -> cmd=fullinit` lines of the launcher's log, by rank.
fn fullinits(stderr: &str) -> Vec<u32> {
    let mut ranks: Vec<u32> = stderr
        .lines()
        .filter(|l| l.contains("-> cmd=fullinit;"))
        .filter_map(|l| {
            let rest = &l[l.find("rank ")? + 5..];
            let end = rest.find(|c: char| !c.is_ascii_digit())?;
            rest[..end].parse().ok()
        })
        .collect();
    ranks.sort_unstable();
    ranks
}

/// Every rank: init (on the segment), put, fence, get everyone's, finalize.
fn role_quiet() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let want = if std::env::var("FASTPMI_TRANSPORT").is_ok_and(|v| v == "socket") {
        TransportKind::Socket
    } else {
        TransportKind::Shm
    };
    rank_role::ensure(pmi.transport() == want, || {
        format!("transport {:?}, expected {want:?}", pmi.transport())
    })?;
    let me = pmi.rank();
    pmi.put(format!("k{me}"), format!("v{me}"))
        .map_err(|e| format!("put: {e}"))?;
    pmi.fence().map_err(|e| format!("fence: {e}"))?;
    for r in 0..pmi.size() {
        let v = pmi
            .get(format!("k{r}"), Some(r))
            .map_err(|e| e.to_string())?;
        rank_role::ensure(v.as_deref() == Some(format!("v{r}").as_bytes()), || {
            format!("rank {me}: k{r} is {v:?}")
        })?;
    }
    pmi.finalize().map_err(|e| format!("finalize: {e}"))
}

#[test]
fn segment_ranks_init_and_finalize_without_a_word_on_the_socket() {
    match rank_role::role().as_deref() {
        Some("quiet") => rank_role::finish(role_quiet()),
        Some(_) => return,
        None => {}
    }
    let n = 4;
    let test = "segment_ranks_init_and_finalize_without_a_word_on_the_socket";
    let out = rank_role::launch(test, "quiet", n, &["--stats"])
        .env("FASTPMI_LOG", "debug")
        .run();
    out.assert_success();
    assert_eq!(
        fullinits(&out.stderr),
        Vec::<u32>::new(),
        "segment ranks sent fullinit: {}",
        out.report()
    );
    assert!(
        !out.stderr.contains("-> cmd=init") && !out.stderr.contains("cmd=finalize"),
        "segment ranks talked to the launcher: {}",
        out.report()
    );
    let shm = common::stats_row(&out.stderr, "shared-memory");
    assert_eq!(shm.map(|r| r[2]), Some(n as u64), "{}", out.report());
    // The same ranks forced onto the socket: the log does show each init,
    // so the count above can fail.
    let out = rank_role::launch(test, "quiet", n, &[])
        .env("FASTPMI_LOG", "debug")
        .env("FASTPMI_TRANSPORT", "socket")
        .run();
    out.assert_success();
    assert_eq!(fullinits(&out.stderr), vec![0, 1, 2, 3], "{}", out.report());
}

/// Rank 0 reads a job attribute and rank 1 looks up a name nobody
/// published (both only the launcher answers); the others only use the
/// segment. Then all fence and finalize.
fn role_lazy() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let me = pmi.rank();
    rank_role::ensure(pmi.transport() == TransportKind::Shm, || {
        format!("rank {me}: transport {:?}", pmi.transport())
    })?;
    match me {
        0 => {
            let u = pmi
                .job_attr("universeSize")
                .map_err(|e| format!("universeSize: {e}"))?;
            rank_role::ensure(
                u.as_deref() == Some(pmi.size().to_string().as_bytes()),
                || format!("universeSize {u:?}, job of {}", pmi.size()),
            )?;
        }
        1 => {
            let r = pmi.lookup("nobody-published-this");
            // Not found: no name, or the server's refusal (never a socket
            // that failed to open).
            let refused = matches!(r, Err(fastpmi_client::PmiError::Server { .. }));
            rank_role::ensure(matches!(r, Ok(None)) || refused, || {
                format!("lookup of an unpublished name gave {r:?}")
            })?;
        }
        _ => {}
    }
    pmi.put(format!("k{me}"), "v").map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    for r in 0..pmi.size() {
        let v = pmi
            .get(format!("k{r}"), Some(r))
            .map_err(|e| e.to_string())?;
        rank_role::ensure(v.as_deref() == Some(&b"v"[..]), || format!("k{r}: {v:?}"))?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn the_socket_opens_when_a_rank_first_needs_the_launcher() {
    match rank_role::role().as_deref() {
        Some("lazy") => rank_role::finish(role_lazy()),
        Some(_) => return,
        None => {}
    }
    let out = rank_role::launch(
        "the_socket_opens_when_a_rank_first_needs_the_launcher",
        "lazy",
        4,
        &[],
    )
    .env("FASTPMI_LOG", "debug")
    .run();
    out.assert_success();
    assert_eq!(fullinits(&out.stderr), vec![0, 1], "{}", out.report());
    assert!(
        out.stderr.contains("cmd=info-getjobattr") && out.stderr.contains("cmd=name-lookup"),
        "{}",
        out.report()
    );
}

/// Rank 1 attaches, fences, and exits 0 without finalize (no destructor
/// runs); the others fence and then wait in a second fence it never joins.
fn role_leaves_early() -> Result<(), String> {
    let pmi = rank_role::init()?;
    pmi.fence().map_err(|e| e.to_string())?;
    if pmi.rank() == 1 {
        std::process::exit(0);
    }
    match pmi.fence() {
        Err(e) => Err(format!("second fence: {e}")),
        Ok(()) => Ok(()),
    }
}

#[test]
fn a_segment_rank_that_exits_before_finalize_still_fails_the_job() {
    match rank_role::role().as_deref() {
        Some("leaves-early") => rank_role::finish(role_leaves_early()),
        Some(_) => return,
        None => {}
    }
    let out = rank_role::launch(
        "a_segment_rank_that_exits_before_finalize_still_fails_the_job",
        "leaves-early",
        4,
        &[],
    )
    .run();
    assert_ne!(out.code(), Some(0), "{}", out.report());
    assert!(
        // "closed its PMI connection before finalize" or "exited with
        // status 0 before PMI finalize", whichever the launcher saw first.
        out.stderr.contains("rank 1") && out.stderr.contains("finalize"),
        "the launcher did not name rank 1 leaving before finalize: {}",
        out.report()
    );
}
