//! `kvs-getall` and `kvs-putall` through fastpmi's Rust client, real
//! launcher and ranks, on shared memory and on the socket: after a fence,
//! a getall returns every rank's pair once; a putall's pairs are visible
//! to every rank after the next fence; a putall with a bad pair fails
//! with the server's reason and puts none. On shared memory the getall
//! reads the segment (no get reaches the server). The wire details (framing,
//! bounds, connected jobs) are the server's tests (server/src/tests).

mod common;
mod rank_role;

use std::time::Duration;

const N: u32 = 6;

fn role_kvscopy() -> Result<(), String> {
    let pmi = rank_role::init()?;
    let (rank, size) = (pmi.rank(), pmi.size());
    rank_role::ensure_transport(&pmi)?;
    pmi.put(format!("card-{rank}"), format!("value-{rank};x"))
        .map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    let mut all = pmi.kvs_getall(None).map_err(|e| format!("getall: {e}"))?;
    all.sort();
    let mut expect: Vec<(Vec<u8>, Vec<u8>)> = (0..size)
        .map(|r| {
            (
                format!("card-{r}").into_bytes(),
                format!("value-{r};x").into_bytes(),
            )
        })
        .collect();
    expect.sort();
    rank_role::ensure(all == expect, || format!("getall: {all:?}"))?;
    pmi.fence().map_err(|e| e.to_string())?;
    if rank == 0 {
        let pairs: [(&[u8], &[u8]); 2] = [(b"copied-a", b"1"), (b"copied-b", b"2;2")];
        pmi.kvs_putall(&pairs).map_err(|e| format!("putall: {e}"))?;
        let big = vec![b'x'; 70_000];
        let bad: [(&[u8], &[u8]); 2] = [(b"never-a", b"1"), (b"never-b", &big)];
        match pmi.kvs_putall(&bad) {
            Err(e) if e.to_string().contains("pair 2") => {}
            other => return Err(format!("putall of a bad pair: {other:?}")),
        }
    }
    pmi.fence().map_err(|e| e.to_string())?;
    for (k, v) in [("copied-a", "1"), ("copied-b", "2;2")] {
        let got = pmi.get(k, Some(0)).map_err(|e| e.to_string())?;
        rank_role::ensure(got.as_deref() == Some(v.as_bytes()), || {
            format!("{k}: {got:?}")
        })?;
    }
    for k in ["never-a", "never-b"] {
        let got = pmi.get(k, Some(0)).map_err(|e| e.to_string())?;
        rank_role::ensure(got.is_none(), || format!("{k} was put: {got:?}"))?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn run(test: &str, transport: &str) {
    if rank_role::role().is_some() {
        rank_role::finish(role_kvscopy());
    }
    let out = rank_role::launch(test, "kvscopy", N, &["--stats"])
        .env("FASTPMI_TRANSPORT", transport)
        .env("FASTPMI_TEST_TRANSPORT", transport)
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    // On shared memory a getall of the job's own pairs reads the segment:
    // no get reaches the server. On the socket every rank's getall does.
    let gets = fastpmi::launcher::stats_row(&out.stderr, "socket")
        .unwrap_or_else(|| panic!("no socket row in --stats\n{}", out.report()))[1];
    if transport == "shm" {
        assert_eq!(gets, 0, "socket gets on shared memory\n{}", out.report());
    } else {
        assert!(
            gets >= u64::from(N * N),
            "{gets} socket gets\n{}",
            out.report()
        );
    }
}

#[test]
fn getall_and_putall_on_shared_memory() {
    run("getall_and_putall_on_shared_memory", "shm");
}

#[test]
fn getall_and_putall_on_the_socket() {
    run("getall_and_putall_on_the_socket", "socket");
}
