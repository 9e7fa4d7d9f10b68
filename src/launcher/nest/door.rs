//! A node server's door for the other node servers of a fault-tolerant
//! job ([`super::mesh`]): a listening socket, the address the others
//! should use, and a random token that a connection must name.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};

/// Why a node server cannot open its door.
#[derive(Debug, thiserror::Error)]
pub(in crate::launcher) enum DoorError {
    #[error("cannot open a port for the other node servers: {0}")]
    Listen(io::Error),
    #[error("no randomness for the node server's token: {0}")]
    Random(getrandom::Error),
}

/// This node server's door for the others, open before the first trade.
pub(super) struct Door {
    pub(super) listener: std::net::TcpListener,
    pub(super) token: String,
    host: String,
}

impl Door {
    /// Listen on `bind` (all addresses when `None`) and name the address the
    /// others should use: `bind`, else the address this host reaches the
    /// outer server by (`PMI_PORT`), else its host name.
    pub(super) fn open(bind: Option<IpAddr>) -> Result<Door, DoorError> {
        let ip = bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let listener = std::net::TcpListener::bind((ip, 0)).map_err(DoorError::Listen)?;
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(DoorError::Random)?;
        let token = raw.iter().map(|b| format!("{b:02x}")).collect();
        let host = match bind.filter(|b| !b.is_unspecified()) {
            Some(b) => b.to_string(),
            None => outward_ip().map_or_else(host_name, |ip| ip.to_string()),
        };
        Ok(Door {
            listener,
            token,
            host,
        })
    }

    /// What the others need to reach this door: `HOST PORT TOKEN`.
    pub(super) fn card(&self) -> io::Result<String> {
        let port = self.listener.local_addr()?.port();
        Ok(format!("{} {port} {}", self.host, self.token))
    }
}

/// The local address of a route to the outer server named in `PMI_PORT`
/// (a UDP socket's connect sends nothing).
fn outward_ip() -> Option<IpAddr> {
    let port = std::env::var(fastpmi_codec::names::env::PMI_PORT).ok()?;
    let to = port.to_socket_addrs().ok()?.next()?;
    let any: SocketAddr = match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(any).ok()?;
    s.connect(to).ok()?;
    Some(s.local_addr().ok()?.ip())
}

fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Another node server's card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Card {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) token: String,
}

impl Card {
    pub(super) fn parse(s: &str) -> Option<Card> {
        let mut w = s.split(' ');
        let (host, port, token) = (w.next()?, w.next()?, w.next()?);
        let ok = w.next().is_none()
            && !host.is_empty()
            && token.len() == 64
            && token.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| {
            Some(Card {
                host: host.to_string(),
                port: port.parse().ok()?,
                token: token.to_string(),
            })
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_need_host_port_and_a_full_token() {
        let token = "ab".repeat(32);
        let c = Card::parse(&format!("10.0.0.2 4000 {token}")).unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.token.as_str()),
            ("10.0.0.2", 4000, token.as_str())
        );
        assert_eq!(Card::parse(&format!("h 70000 {token}")), None);
        assert_eq!(Card::parse("h 4000 abcd"), None);
        assert_eq!(Card::parse(&format!("h 4000 {token} extra")), None);
        assert_eq!(Card::parse("off"), None);
    }
}
