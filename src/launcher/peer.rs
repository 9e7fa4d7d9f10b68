//! Who is on the other end of a port-mode TCP connection: the owner uid and
//! socket inode of a local peer (Linux `sock_diag`), and whether that socket
//! belongs to a given process or its descendants (`/proc`). OS glue; no
//! `unsafe`.

use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr as NlAddr};

/// Owner uid and inode of the socket at `peer` connected to `local`, both
/// on this node. Errors when the kernel does not know that socket (the peer
/// is elsewhere, or already gone).
pub fn local_owner(local: SocketAddr, peer: SocketAddr) -> io::Result<(u32, u32)> {
    let mut sock = Socket::new(NETLINK_SOCK_DIAG)?;
    sock.bind_auto()?;
    sock.connect(&NlAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST;
    // The peer's socket: its source is the peer, its destination us.
    let id = SocketId {
        source_port: peer.port(),
        destination_port: local.port(),
        source_address: peer.ip(),
        destination_address: local.ip(),
        interface_id: 0,
        // INET_DIAG_NOCOOKIE: match by address and port only.
        cookie: [0xff; 8],
    };
    let mut packet = NetlinkMessage::new(
        hdr,
        SockDiagMessage::InetRequest(InetRequest {
            family: if peer.is_ipv4() { AF_INET } else { AF_INET6 },
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: id,
        })
        .into(),
    );
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf[..]);
    sock.send(&buf, 0)?;
    let mut rx = vec![0u8; 8192];
    let n = sock.recv(&mut &mut rx[..], 0)?;
    let msg = NetlinkMessage::<SockDiagMessage>::deserialize(&rx[..n])
        .map_err(|e| io::Error::other(format!("sock_diag reply: {e}")))?;
    match msg.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
            Ok((r.header.uid, r.header.inode))
        }
        NetlinkPayload::Error(e) => Err(io::Error::other(format!(
            "sock_diag: no such socket ({e:?})"
        ))),
        other => Err(io::Error::other(format!(
            "sock_diag: unexpected reply {other:?}"
        ))),
    }
}

/// Most processes searched below a rank (a rank that is a script starting
/// the real program, a wrapper, ...).
const TREE_MAX: usize = 256;

/// Whether process `pid` or one of its descendants holds the socket with
/// inode `inode` open.
pub fn tree_holds_socket(pid: u32, inode: u32) -> bool {
    let want = format!("socket:[{inode}]");
    let mut todo = vec![pid];
    let mut seen = 0;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > TREE_MAX {
            return false;
        }
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/fd")) {
            for e in dir.flatten() {
                if std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == want.as_str()) {
                    return true;
                }
            }
        }
        // Children of every thread of `p`.
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
                    todo.extend(
                        list.split_whitespace()
                            .filter_map(|c| c.parse::<u32>().ok()),
                    );
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_local_peer_is_ours_and_held_by_this_process() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server_side, peer) = l.accept().unwrap();
        let (uid, inode) = local_owner(server_side.local_addr().unwrap(), peer).unwrap();
        assert_eq!(uid, rustix::process::geteuid().as_raw());
        assert!(tree_holds_socket(std::process::id(), inode));
        drop(client);
        // A pid that is not an ancestor of the socket's holder.
        assert!(!tree_holds_socket(1, inode) || std::process::id() == 1);
    }
}
