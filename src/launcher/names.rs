//! Client of a shared `fastpmi nameserver` (`--nameserver HOST:PORT`). A
//! thread of its own talks to the name server so the event loop never
//! blocks on it; answers come back through a queue and the loop's waker.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::nameserver::Connection;
use fastpmi_server::{Event, NameError, NameOp, NameResult, Server};

/// How long one name-server call may take before it fails.
const TIMEOUT: Duration = Duration::from_secs(10);

type Request = (u64, String, NameOp);

pub(super) struct NameClient {
    tx: mpsc::Sender<Request>,
    replies: Arc<Mutex<Vec<(u64, NameResult)>>>,
}

impl NameClient {
    pub fn start(addr: String, waker: Arc<mio::Waker>) -> std::io::Result<NameClient> {
        let mut conn: Option<Connection> = None;
        NameClient::with(waker, move |owner, op| call(&addr, &mut conn, owner, op))
    }

    /// A client whose thread answers each operation with `call` (a shared
    /// name server, or a node server's outer PMI server, docs/nested.md).
    pub fn with(
        waker: Arc<mio::Waker>,
        mut call: impl FnMut(&str, &NameOp) -> NameResult + Send + 'static,
    ) -> std::io::Result<NameClient> {
        let (tx, rx) = mpsc::channel::<Request>();
        let replies = Arc::new(Mutex::new(Vec::new()));
        let out = replies.clone();
        std::thread::Builder::new()
            .name("fastpmi-nameclient".into())
            .spawn(move || {
                for (id, owner, op) in rx {
                    let r = call(&owner, &op);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push((id, r));
                    let _ = waker.wake();
                }
            })?;
        Ok(NameClient { tx, replies })
    }

    pub fn send(&self, id: u64, owner: String, op: NameOp) {
        let _ = self.tx.send((id, owner, op));
    }

    /// Hand the name server's answers to the ranks waiting for them.
    pub fn hand_replies(&self, server: &mut Server, events: &mut Vec<Event>) {
        let replies = std::mem::take(&mut *self.replies.lock().unwrap_or_else(|e| e.into_inner()));
        for (id, result) in replies {
            server.name_reply(id, result, events);
        }
    }
}

/// One call, reconnecting once if the connection had gone stale.
fn call(addr: &str, conn: &mut Option<Connection>, owner: &str, op: &NameOp) -> NameResult {
    for attempt in 0..2 {
        if conn.is_none() {
            match Connection::open(addr, TIMEOUT) {
                Ok(c) => *conn = Some(c),
                Err(e) => {
                    return Err(NameError::Unavailable(format!(
                        "cannot reach the name server {addr}: {e}"
                    )))
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        match c.call(owner, op) {
            Ok(r) => return r,
            Err(e) => {
                *conn = None;
                if attempt == 1 {
                    return Err(NameError::Unavailable(format!("name server {addr}: {e}")));
                }
            }
        }
    }
    unreachable!("the loop returns")
}
