//! Unit tests of the protocol core; the helpers here drive a `Server`
//! with raw PMI-1 and PMI-2 bytes.

use super::*;
use crate::store::MemStore;

/// Helpers shared with the group tests.
pub(super) mod support {
    pub(crate) use super::{init_all, pmi2_body, send1, send2, sent, server};
}
use fastpmi_codec::{frame::Frame, pmi1, pmi2};

pub(super) fn server(n: u32) -> (Server, JobIdx) {
    server_with(n, Box::new(MemStore::new(n, VALLEN)))
}

/// A job of `n` ranks on `store`, every rank connected.
pub(super) fn server_with(n: u32, store: Box<dyn Store>) -> (Server, JobIdx) {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "fastpmi_test_0".into(),
        apps: vec![n],
        universe_size: n,
        spawner: None,
        store,
    });
    for r in 0..n {
        s.connect(r as ConnId, Some((job, r)), None);
    }
    (s, job)
}
const VALLEN: usize = fastpmi_codec::VALLEN_MAX;

pub(super) fn sent(out: &[Event], conn: ConnId) -> Vec<Vec<u8>> {
    out.iter()
        .filter_map(|e| match e {
            Event::Send { conn: c, bytes } if *c == conn => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn pmi2_body(bytes: &[u8]) -> fastpmi_codec::Message {
    assert_eq!(
        fastpmi_codec::frame::parse_length(&bytes[..6]),
        Some(bytes.len() - 6)
    );
    pmi2::decode(&bytes[6..]).unwrap()
}

pub(super) fn send2(s: &mut Server, conn: ConnId, body: &str) -> Vec<Event> {
    let mut out = Vec::new();
    s.on_bytes(
        conn,
        format!("{:<6}{body}", body.len()).as_bytes(),
        &mut out,
    );
    out
}

pub(super) fn send1(s: &mut Server, conn: ConnId, line: &str) -> Vec<Event> {
    let mut out = Vec::new();
    s.on_bytes(conn, format!("{line}\n").as_bytes(), &mut out);
    out
}

pub(super) fn init_all(s: &mut Server, n: u32) {
    for r in 0..n as ConnId {
        send1(s, r, "cmd=init pmi_version=2 pmi_subversion=0");
        send2(s, r, "cmd=fullinit;threaded=FALSE;");
    }
}

mod continued;
mod deaths;
mod failure;
mod jobs;
mod kvs;
mod kvscopy;
mod oob;
mod place;
mod port_mode;
mod wire;
