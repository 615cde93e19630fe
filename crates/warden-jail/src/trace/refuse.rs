//! Refusing a parked connect: when the target refuses a connect that was parked (see
//! [`super::park`]), the program's socket must fail with `ECONNREFUSED` exactly as a refused
//! connect does — at once, and without ever looking connected in between. It is still
//! connecting to its parking spot, so the refusal is the spot's: a TCP reset from the spot to
//! the socket, acknowledging its SYN (the only reset a connecting socket accepts), written on
//! a raw socket in the jail's network namespace. The sequence number to acknowledge is read
//! from the socket in repair mode.
//!
//! Guarantees: only a reset from a parking spot to a socket we parked is ever written; when
//! anything fails (no raw socket, no repair mode, the socket not closed afterwards) the caller
//! learns so and leaves the socket parked (it then reads as no answer: filtered).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, MsgFlags, SockFlag, SockType, SockaddrIn, SockaddrIn6, SockaddrStorage,
    getsockname, sendto, socket,
};

/// TCP flags of the reset: RST and ACK.
const RST_ACK: u8 = 0x14;
/// `TCP_SYN_SENT` and `TCP_CLOSE`, as `TCP_INFO` reports them.
const TCP_SYN_SENT: u8 = 2;
const TCP_CLOSE: u8 = 7;
/// How long a written reset may take to be handled, at most.
const SETTLE_MS: u16 = 20;

/// Raw sockets of the jail's namespace that write resets (made there, held for the run).
#[derive(Debug)]
pub struct Refuser {
    v4: Option<OwnedFd>,
    v6: Option<OwnedFd>,
}

impl Refuser {
    /// Open the raw sockets (call in the jail's namespace); `None` when neither can be made.
    pub fn open() -> Option<Refuser> {
        let raw = |family| {
            socket(
                family,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                Some(raw_protocol()),
            )
            .map_err(|e| tracing::debug!(error = %e, "no raw socket"))
            .ok()
        };
        let r = Refuser {
            v4: raw(AddressFamily::Inet),
            v6: raw(AddressFamily::Inet6),
        };
        (r.v4.is_some() || r.v6.is_some()).then_some(r)
    }

    /// Whether connects to `dest` can be refused.
    pub fn covers(&self, dest: &SocketAddr) -> bool {
        match dest {
            SocketAddr::V4(_) => self.v4.is_some(),
            SocketAddr::V6(_) => self.v6.is_some(),
        }
    }

    /// Refuse `sock`, parked at `spot` from `local`: true when it is closed now (with
    /// `ECONNREFUSED` waiting for the program). Only a socket still connecting from the
    /// address it was parked from is touched: one the program has since disconnected, turned
    /// into a listener or connected elsewhere from another port is left alone. (A connecting
    /// socket has no peer to ask for; the reset itself only lands on a connect to the spot.)
    pub fn refuse(&self, sock: &OwnedFd, spot: SocketAddr, local: SocketAddr) -> bool {
        if local_of(sock) != Some(local)
            || crate::sys::tcp_state(sock.as_fd()) != Some(TCP_SYN_SENT)
        {
            return false;
        }
        // Repair mode resets `SO_REUSEADDR`: the program's setting is put back.
        let reuse = nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::ReuseAddr);
        let seq = crate::sys::tcp_send_seq(sock.as_fd());
        if let Ok(r) = reuse {
            let _ = nix::sys::socket::setsockopt(sock, nix::sys::socket::sockopt::ReuseAddr, &r);
        }
        let Ok(ack) = seq else {
            return false;
        };
        let Some(packet) = reset(spot, local, ack) else {
            return false;
        };
        let sent = match (local.ip(), &self.v4, &self.v6) {
            (IpAddr::V4(ip), Some(raw), _) => sendto(
                raw.as_raw_fd(),
                &packet,
                &SockaddrIn::from(std::net::SocketAddrV4::new(ip, 0)),
                MsgFlags::empty(),
            ),
            (IpAddr::V6(ip), _, Some(raw)) => sendto(
                raw.as_raw_fd(),
                &packet,
                &SockaddrIn6::from(std::net::SocketAddrV6::new(ip, 0, 0, 0)),
                MsgFlags::empty(),
            ),
            _ => return false,
        };
        if sent.is_err() {
            return false;
        }
        // The reset is usually handled before `sendto` returns; on a busy machine it may wait
        // for the softirq thread, or for the program's hold on the socket: a few milliseconds.
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLERR)];
        let _ = poll(&mut fds, PollTimeout::from(SETTLE_MS));
        crate::sys::tcp_state(sock.as_fd()) == Some(TCP_CLOSE)
    }
}

/// A socket's local address.
pub fn local_of(sock: &OwnedFd) -> Option<SocketAddr> {
    getsockname::<SockaddrStorage>(sock.as_raw_fd())
        .ok()
        .and_then(|a| socket_addr(&a))
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
        (Some(v4), _) => Some(SocketAddr::from(std::net::SocketAddrV4::from(*v4))),
        (_, Some(v6)) => Some(SocketAddr::from(std::net::SocketAddrV6::from(*v6))),
        _ => None,
    }
}

/// `IPPROTO_RAW`: the caller writes the IP header, and nothing is received.
fn raw_protocol() -> nix::sys::socket::SockProtocol {
    nix::sys::socket::SockProtocol::Raw
}

/// A TCP reset from `from` to `to`, acknowledging `ack`, with its IP header: `None` when the
/// two are not of one family.
pub fn reset(from: SocketAddr, to: SocketAddr, ack: u32) -> Option<Vec<u8>> {
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&from.port().to_be_bytes());
    tcp[2..4].copy_from_slice(&to.port().to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = RST_ACK;
    let mut pseudo = Vec::with_capacity(40 + tcp.len());
    let mut packet = Vec::with_capacity(60);
    match (from.ip(), to.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, 6, 0, 20]);
            pseudo.extend_from_slice(&tcp);
            tcp[16..18].copy_from_slice(&checksum(&pseudo).to_be_bytes());
            // Version 4, 5 words; 40 bytes; don't fragment; TTL 64; TCP. The kernel fills in
            // the header's checksum and identification.
            packet.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
            packet.extend_from_slice(&s.octets());
            packet.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, 0, 0, 20, 0, 0, 0, 6]);
            pseudo.extend_from_slice(&tcp);
            tcp[16..18].copy_from_slice(&checksum(&pseudo).to_be_bytes());
            // Version 6; payload 20 bytes; next header TCP; hop limit 64.
            packet.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
            packet.extend_from_slice(&s.octets());
            packet.extend_from_slice(&d.octets());
        }
        _ => return None,
    }
    packet.extend_from_slice(&tcp);
    Some(packet)
}

/// The Internet checksum (RFC 1071) of `bytes`.
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).unwrap_or(0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_carries_the_ports_the_ack_and_a_checksum_that_verifies() {
        let from: SocketAddr = "127.255.255.254:9".parse().unwrap();
        let to: SocketAddr = "127.0.0.1:40668".parse().unwrap();
        let p = reset(from, to, 0x51CC_4E23).unwrap();
        assert_eq!(p.len(), 40);
        let tcp = &p[20..];
        assert_eq!(&tcp[0..4], &[0, 9, 0x9e, 0xdc]);
        assert_eq!(&tcp[8..12], &[0x51, 0xcc, 0x4e, 0x23]);
        assert_eq!(tcp[13], RST_ACK);
        // The checksum over the pseudo-header and the segment, checksum included, is zero.
        let mut all = vec![127, 255, 255, 254, 127, 0, 0, 1, 0, 6, 0, 20];
        all.extend_from_slice(tcp);
        assert_eq!(checksum(&all), 0);
        let v6 = reset(
            "[fd00:ffff:ffff:ffff::fe]:9".parse().unwrap(),
            "[::1]:38440".parse().unwrap(),
            7,
        )
        .unwrap();
        assert_eq!(v6.len(), 60);
        assert_eq!(v6[0] >> 4, 6);
        assert!(reset(from, "[::1]:1".parse().unwrap(), 1).is_none());
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071's example words sum to 0xddf2; the checksum is its complement.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        assert_eq!(checksum(&[0xff]), !0xff00);
    }
}
