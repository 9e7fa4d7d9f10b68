//! `fastpmi nameserver`: a name service shared by several launchers, so
//! that `MPI_Comm_accept`/`MPI_Comm_connect` work between jobs started by
//! different `fastpmi` commands (what `hydra_nameserver` is to Hydra).
//!
//! Wire format: PMI-1 style lines, every value hex-encoded (port strings
//! and owners may hold any byte):
//!
//! ```text
//! cmd=publish service=HEX port=HEX owner=HEX     -> cmd=publish_result rc=0
//! cmd=unpublish service=HEX owner=HEX            -> cmd=unpublish_result rc=0
//! cmd=lookup service=HEX owner=HEX               -> cmd=lookup_result rc=0 [port=HEX]
//! any error                                      -> cmd=<op>_result rc=1 msg=HEX
//! ```
//!
//! The owner is the publishing job's id; only the owner may unpublish.
//! Names published over a connection are dropped when it closes (the
//! launcher that made them is gone).

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastpmi_codec::{pmi1, Message};
use fastpmi_server::{NameError, NameOp, NameResult, NameTable};

/// Longest request line.
pub const LINE_MAX: usize = 16 * 1024;
/// Most launchers served at once.
pub const CONNECTIONS_MAX: usize = 256;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 {
        return None;
    }
    s.chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect()
}

fn field(m: &Message, k: &str) -> Option<String> {
    String::from_utf8(unhex(m.get(k)?)?).ok()
}

/// Encode one request line.
pub fn encode_request(owner: &str, op: &NameOp) -> Vec<u8> {
    let m = match op {
        NameOp::Publish { service, port } => Message::new("publish")
            .with("service", hex(service.as_bytes()))
            .with("port", hex(port.as_bytes())),
        NameOp::Unpublish { service } => {
            Message::new("unpublish").with("service", hex(service.as_bytes()))
        }
        NameOp::Lookup { service } => {
            Message::new("lookup").with("service", hex(service.as_bytes()))
        }
    };
    pmi1::encode(&m.with("owner", hex(owner.as_bytes())))
}

/// Decode one reply line.
pub fn decode_reply(line: &[u8]) -> NameResult {
    let m = pmi1::decode(line)
        .map_err(|e| NameError::Unavailable(format!("bad reply from the name server: {e}")))?;
    match m.get_str("rc") {
        Some("0") => Ok(field(&m, "port")),
        _ => Err(NameError::Remote(
            field(&m, "msg").unwrap_or_else(|| "name server error".into()),
        )),
    }
}

/// Why a request line is refused (its text goes back in the reply).
#[derive(Debug, thiserror::Error)]
enum RequestError {
    /// Not a PMI-1 line.
    #[error(transparent)]
    Decode(#[from] fastpmi_codec::WireError),
    #[error("missing or bad {0}")]
    Field(&'static str),
    #[error("unknown command {0}")]
    UnknownCommand(String),
}

fn decode_request(line: &[u8]) -> Result<(String, String, NameOp), RequestError> {
    let m = pmi1::decode(line)?;
    let need = |k: &'static str| field(&m, k).ok_or(RequestError::Field(k));
    let owner = need("owner")?;
    let op = match m.cmd.as_str() {
        "publish" => NameOp::Publish {
            service: need("service")?,
            port: need("port")?,
        },
        "unpublish" => NameOp::Unpublish {
            service: need("service")?,
        },
        "lookup" => NameOp::Lookup {
            service: need("service")?,
        },
        other => return Err(RequestError::UnknownCommand(other.to_string())),
    };
    Ok((m.cmd, owner, op))
}

fn reply(cmd: &str, r: &NameResult) -> Vec<u8> {
    let mut m = Message::new(format!("{cmd}_result"));
    match r {
        Ok(port) => {
            m.push("rc", "0");
            if let Some(p) = port {
                m.push("port", hex(p.as_bytes()));
            }
        }
        Err(e) => {
            m.push("rc", "1");
            m.push("msg", hex(e.to_string().as_bytes()));
        }
    }
    pmi1::encode(&m)
}

/// Read one line of at most [`LINE_MAX`] bytes; `None` at end of stream.
pub fn read_line(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = r.take(LINE_MAX as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("line longer than {LINE_MAX} bytes"),
        ));
    }
    line.pop();
    Ok(Some(line))
}

/// Serve one launcher's connection until it closes.
fn serve(stream: TcpStream, table: Arc<Mutex<NameTable>>) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut owners = HashSet::new();
    let mut w = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut r = BufReader::new(stream);
    loop {
        let line = match read_line(&mut r) {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                let _ = w.write_all(&reply("error", &Err(NameError::BadRequest(e.to_string()))));
                tracing::warn!("name server: {peer}: {e}; closing");
                break;
            }
        };
        let out = match decode_request(&line) {
            Ok((cmd, owner, op)) => {
                let r = table
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .apply(&owner, &op);
                if matches!(op, NameOp::Publish { .. }) && r.is_ok() {
                    owners.insert(owner);
                }
                reply(&cmd, &r)
            }
            Err(e) => reply("error", &Err(NameError::BadRequest(e.to_string()))),
        };
        if w.write_all(&out).is_err() {
            break;
        }
    }
    table
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove_owned(|o| owners.contains(o));
}

/// `fastpmi nameserver`: serve until killed. Prints the address it listens on.
pub fn run(bind: &str, port: u16) -> i32 {
    let listener = match TcpListener::bind((bind, port)) {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("fastpmi nameserver: cannot listen on {bind}:{port}: {e}");
            return 1;
        }
    };
    match listener.local_addr() {
        Ok(a) => crate::outln!("fastpmi nameserver: listening on {a}"),
        Err(e) => {
            crate::errln!("fastpmi nameserver: {e}");
            return 1;
        }
    }
    let table = Arc::new(Mutex::new(NameTable::default()));
    let live = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        if live.load(Ordering::Relaxed) >= CONNECTIONS_MAX {
            let mut s = stream;
            let _ = s.write_all(&reply(
                "error",
                &Err(NameError::Unavailable(format!(
                    "too many connections ({CONNECTIONS_MAX})"
                ))),
            ));
            continue;
        }
        let _ = stream.set_nodelay(true);
        let (table, live) = (table.clone(), live.clone());
        live.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("fastpmi-names".into())
            .spawn(move || {
                serve(stream, table);
                live.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            tracing::warn!("name server: cannot serve a connection: {e}");
        }
    }
    0
}

/// A blocking connection to a name server (used by the launcher's client
/// thread, off the event loop).
pub struct Connection {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Connection {
    pub fn open(addr: &str, timeout: Duration) -> io::Result<Connection> {
        use std::net::ToSocketAddrs;
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr}: no address"));
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    s.set_read_timeout(Some(timeout))?;
                    s.set_write_timeout(Some(timeout))?;
                    let _ = s.set_nodelay(true);
                    return Ok(Connection {
                        w: s.try_clone()?,
                        r: BufReader::new(s),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn call(&mut self, owner: &str, op: &NameOp) -> io::Result<NameResult> {
        self.w.write_all(&encode_request(owner, op))?;
        match read_line(&mut self.r)? {
            Some(line) => Ok(decode_reply(&line)),
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the name server closed the connection",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_reply_roundtrip() {
        let op = NameOp::Publish {
            service: "svc with space".into(),
            port: "tag#0$conn;x=y$".into(),
        };
        let line = encode_request("job_1", &op);
        let (cmd, owner, back) = decode_request(&line[..line.len() - 1]).unwrap();
        assert_eq!(
            (cmd.as_str(), owner.as_str(), back),
            ("publish", "job_1", op)
        );
        let r = reply("lookup", &Ok(Some("p o r t".into())));
        assert_eq!(decode_reply(&r[..r.len() - 1]), Ok(Some("p o r t".into())));
        let r = reply("publish", &Err(NameError::AlreadyPublished("x".into())));
        assert_eq!(
            decode_reply(&r[..r.len() - 1]),
            Err(NameError::Remote("service x is already published".into()))
        );
        assert!(decode_request(b"cmd=frob owner=00").is_err());
        assert!(decode_request(b"cmd=lookup service=zz owner=00").is_err());
    }
}
