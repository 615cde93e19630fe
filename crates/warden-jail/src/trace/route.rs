//! Whether the kernel would deliver a packet for an address to this host itself: a route
//! lookup (`RTM_GETROUTE`, as `ip route get` asks it) in the network namespace of the calling
//! thread. An address is the host's own not only when an interface carries it: a `local`
//! route (an AnyIP range such as `ip route add local 192.0.2.0/24 dev lo`) delivers a whole
//! range to the host's sockets, and broadcast and multicast routes reach the host's listeners
//! too. The egress forwarder and the recon targets ask this before every connect they make.
//!
//! Guarantees: one request and one answer on a fresh netlink socket with a receive timeout;
//! a lookup that fails (no route: `ENETUNREACH`) says "not the host", since a connect there
//! fails on its own; any other failure is returned, and callers refuse on it (fail closed).

use std::net::IpAddr;
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, NetlinkAddr, recv, sendto, setsockopt, sockopt};
use nix::sys::time::TimeVal;

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
/// `RTA_DST`: the destination attribute.
const RTA_DST: u16 = 1;

/// The route types that deliver to the host itself (`RTN_LOCAL`, `RTN_BROADCAST`,
/// `RTN_ANYCAST` — an IPv6 router's subnet-router anycast address, which no interface lists —
/// and `RTN_MULTICAST`), by name.
fn local_type(rtm_type: u8) -> Option<&'static str> {
    match rtm_type {
        2 => Some("local"),
        3 => Some("broadcast"),
        4 => Some("anycast"),
        5 => Some("multicast"),
        _ => None,
    }
}

/// The `RTM_GETROUTE` request for `ip`.
fn request(ip: IpAddr, seq: u32) -> Vec<u8> {
    let (family, addr): (u8, Vec<u8>) = match ip {
        IpAddr::V4(v4) => (
            u8::try_from(libc::AF_INET).unwrap_or(2),
            v4.octets().to_vec(),
        ),
        IpAddr::V6(v6) => (
            u8::try_from(libc::AF_INET6).unwrap_or(10),
            v6.octets().to_vec(),
        ),
    };
    let bits = u8::try_from(addr.len() * 8).unwrap_or(128);
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
    let mut body = vec![family, bits, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let rta_len = u16::try_from(4 + addr.len()).unwrap_or(20);
    body.extend_from_slice(&rta_len.to_ne_bytes());
    body.extend_from_slice(&RTA_DST.to_ne_bytes());
    body.extend_from_slice(&addr);
    let len = u32::try_from(16 + body.len()).unwrap_or(u32::MAX);
    let mut m = Vec::with_capacity(16 + body.len());
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&body);
    m
}

/// The answer to a lookup: the route's type when it delivers locally, `None` when it does not
/// or there is no route.
fn answer(reply: &[u8]) -> Result<Option<&'static str>, Errno> {
    let kind = reply.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    match kind {
        Some(RTM_NEWROUTE) => Ok(reply.get(16 + 7).copied().and_then(local_type)),
        Some(NLMSG_ERROR) => {
            let code = reply
                .get(16..20)
                .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(-libc::EPROTO);
            match Errno::from_raw(-code) {
                Errno::ENETUNREACH | Errno::EHOSTUNREACH => Ok(None),
                e => Err(e),
            }
        }
        _ => Err(Errno::EPROTO),
    }
}

/// Whether a connection to `ip` from the calling thread's network namespace would reach this
/// host itself: the route type that says so (`local`, `broadcast`, `multicast`), or `None`.
pub fn delivered_locally(ip: IpAddr) -> Result<Option<&'static str>, Errno> {
    // An IPv4-mapped IPv6 address goes where its IPv4 address goes.
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let sock = super::netlink::route_socket()?;
    setsockopt(&sock, sockopt::ReceiveTimeout, &TimeVal::new(2, 0))?;
    sendto(
        sock.as_raw_fd(),
        &request(ip, 1),
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut buf = [0u8; 4096];
    let n = recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())?;
    answer(buf.get(..n).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback is the host's on every machine; a documentation address is not, unless a
    /// local route says so (the lab test adds one in a namespace of its own).
    #[test]
    fn the_kernel_says_which_addresses_are_the_hosts() {
        assert_eq!(
            delivered_locally("127.0.0.1".parse().unwrap()),
            Ok(Some("local"))
        );
        assert_eq!(
            delivered_locally("::ffff:127.0.0.2".parse().unwrap()),
            Ok(Some("local")),
            "mapped addresses go where their IPv4 goes"
        );
        assert!(matches!(
            delivered_locally("224.0.0.1".parse().unwrap()),
            Ok(Some("multicast")) | Ok(None)
        ));
        assert_eq!(
            answer(&{
                let mut m = vec![0u8; 28];
                m[4..6].copy_from_slice(&RTM_NEWROUTE.to_ne_bytes());
                m[16 + 7] = 1;
                m
            }),
            Ok(None),
            "a unicast route is not local"
        );
        assert_eq!(local_type(4), Some("anycast"));
    }
}
