//! The two rtnetlink requests the capture network needs, sent from a thread that has joined the
//! jail's network namespace: bring loopback up, and make every address local to it
//! (`ip route add local 0.0.0.0/0 dev lo table local`, and the same for IPv6), so a connection
//! to any destination lands on a listener inside the namespace instead of failing with
//! "network unreachable". Hand-built messages: a dozen fixed fields do not warrant an async
//! netlink stack.

use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, sendto,
    socket,
};

const RTM_NEWLINK: u16 = 16;
const RTM_NEWROUTE: u16 = 24;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
/// `RTA_OIF`: the output interface attribute.
const RTA_OIF: u16 = 4;
/// Loopback is always interface 1 in a new network namespace.
const LO_INDEX: u32 = 1;

fn message(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(16 + body.len()).unwrap_or(u32::MAX);
    let mut m = Vec::with_capacity(16 + body.len());
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// Send one request and wait for its acknowledgement.
fn request(sock: &OwnedFd, msg: &[u8]) -> Result<(), Errno> {
    sendto(
        std::os::fd::AsRawFd::as_raw_fd(sock),
        msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut buf = [0u8; 1024];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(sock),
        &mut buf,
        MsgFlags::empty(),
    )?;
    let ack = buf.get(..n).unwrap_or_default();
    let kind = ack.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = ack
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, code) {
        (Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (Some(NLMSG_ERROR), Some(e)) => Err(Errno::from_raw(-e)),
        _ => Err(Errno::EPROTO),
    }
}

fn route_local_default(family: u8) -> Vec<u8> {
    // struct rtmsg: family, dst_len 0 (default), src_len, tos, table local (255),
    // protocol boot (3), scope host (254), type local (2), flags.
    let mut body = vec![family, 0, 0, 0, 255, 3, 254, 2, 0, 0, 0, 0];
    body.extend_from_slice(&8u16.to_ne_bytes());
    body.extend_from_slice(&RTA_OIF.to_ne_bytes());
    body.extend_from_slice(&LO_INDEX.to_ne_bytes());
    body
}

/// A new rtnetlink socket, bound (the kernel picks its port id).
pub(super) fn route_socket() -> Result<OwnedFd, Errno> {
    let sock = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&sock),
        &NetlinkAddr::new(0, 0),
    )?;
    Ok(sock)
}

/// Bring loopback up and make every IPv4 (and, when the namespace has IPv6, IPv6) address
/// local to it. IPv4 failures are errors; IPv6 is best effort.
pub fn capture_everything() -> Result<(), Errno> {
    let sock = route_socket()?;
    // struct ifinfomsg: family, pad, type, index, flags, change.
    let up = u32::try_from(libc::IFF_UP).unwrap_or(1);
    let mut link = vec![0u8, 0, 0, 0];
    link.extend_from_slice(&LO_INDEX.to_ne_bytes());
    link.extend_from_slice(&up.to_ne_bytes());
    link.extend_from_slice(&up.to_ne_bytes());
    request(&sock, &message(RTM_NEWLINK, 0, 1, &link))?;
    let create = NLM_F_CREATE | NLM_F_REPLACE;
    let inet = u8::try_from(libc::AF_INET).unwrap_or(2);
    let inet6 = u8::try_from(libc::AF_INET6).unwrap_or(10);
    request(
        &sock,
        &message(RTM_NEWROUTE, create, 2, &route_local_default(inet)),
    )?;
    if let Err(e) = request(
        &sock,
        &message(RTM_NEWROUTE, create, 3, &route_local_default(inet6)),
    ) {
        tracing::debug!(error = %e, "no IPv6 capture route");
    }
    Ok(())
}
