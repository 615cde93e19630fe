//! One IP packet, read: its endpoints, its protocol, its payload, and for TCP what the
//! reassembly needs. Parsing is `etherparse`'s; this module only says what a flow is made of.
//!
//! Guarantees: never panics on any input (a packet it cannot read is `None`, and counted by the
//! caller); the payload it returns is a slice of the packet, never more.

use std::net::{IpAddr, SocketAddr};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

/// The protocol of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP or ICMPv6.
    Icmp,
    /// Anything else carried by IP (its protocol number): UDP-Lite, SCTP, a fragment of a
    /// datagram too large for one packet (its payload read whole, headers and all).
    Other(u8),
}

impl Protocol {
    /// The protocol's name in reports (`tcp`, `udp`, `icmp`, `ip-47`).
    pub fn name(self) -> String {
        match self {
            Protocol::Tcp => "tcp".into(),
            Protocol::Udp => "udp".into(),
            Protocol::Icmp => "icmp".into(),
            Protocol::Other(n) => format!("ip-{n}"),
        }
    }
}

/// TCP's part of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp {
    /// The sequence number of the first payload byte (of the SYN itself on a SYN).
    pub seq: u32,
    /// SYN set.
    pub syn: bool,
    /// FIN set.
    pub fin: bool,
    /// RST set.
    pub rst: bool,
    /// ACK set.
    pub ack: bool,
}

/// One packet, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The sender (port 0 where the protocol has none).
    pub src: SocketAddr,
    /// The receiver (port 0 where the protocol has none).
    pub dst: SocketAddr,
    /// Its protocol.
    pub protocol: Protocol,
    /// What the protocol carries: TCP's or UDP's data, an ICMP message's body, or the whole IP
    /// payload of another protocol.
    pub payload: &'a [u8],
    /// TCP's sequence and flags.
    pub tcp: Option<Tcp>,
    /// An ICMP answer (an echo reply, unreachable, time exceeded, parameter problem, too
    /// big…): the kernel's answer to another packet; never part of what a flow's initiator
    /// sent (the jail's own addresses answer its echoes, from the same address).
    pub icmp_error: bool,
}

/// Read an IP packet (v4 or v6, no link header).
pub fn parse(bytes: &[u8]) -> Option<Packet<'_>> {
    let sliced = SlicedPacket::from_ip(bytes).ok()?;
    let (src, dst, ip_payload, number): (IpAddr, IpAddr, &[u8], u8) = match &sliced.net {
        Some(NetSlice::Ipv4(v4)) => (
            v4.header().source_addr().into(),
            v4.header().destination_addr().into(),
            v4.payload().payload,
            v4.payload().ip_number.0,
        ),
        Some(NetSlice::Ipv6(v6)) => (
            v6.header().source_addr().into(),
            v6.header().destination_addr().into(),
            v6.payload().payload,
            v6.payload().ip_number.0,
        ),
        _ => return None,
    };
    let at = |ip: IpAddr, port: u16| SocketAddr::new(ip, port);
    let packet = match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => Packet {
            src: at(src, t.source_port()),
            dst: at(dst, t.destination_port()),
            protocol: Protocol::Tcp,
            payload: t.payload(),
            icmp_error: false,
            tcp: Some(Tcp {
                seq: t.sequence_number(),
                syn: t.syn(),
                fin: t.fin(),
                rst: t.rst(),
                ack: t.ack(),
            }),
        },
        Some(TransportSlice::Udp(u)) => Packet {
            src: at(src, u.source_port()),
            dst: at(dst, u.destination_port()),
            protocol: Protocol::Udp,
            payload: u.payload(),
            tcp: None,
            icmp_error: false,
        },
        Some(TransportSlice::Icmpv4(i)) => Packet {
            src: at(src, 0),
            dst: at(dst, 0),
            protocol: Protocol::Icmp,
            payload: i.payload(),
            tcp: None,
            // Echo reply (the kernel answers echoes to its own addresses), destination
            // unreachable, source quench, redirect, time exceeded, parameter problem.
            icmp_error: matches!(i.type_u8(), 0 | 3 | 4 | 5 | 11 | 12),
        },
        Some(TransportSlice::Icmpv6(i)) => Packet {
            src: at(src, 0),
            dst: at(dst, 0),
            protocol: Protocol::Icmp,
            payload: i.payload(),
            tcp: None,
            // Destination unreachable, packet too big, time exceeded, parameter problem, echo
            // reply.
            icmp_error: matches!(i.type_u8(), 1..=4 | 129),
        },
        None => Packet {
            src: at(src, 0),
            dst: at(dst, 0),
            protocol: Protocol::Other(number),
            payload: ip_payload,
            tcp: None,
            icmp_error: false,
        },
    };
    Some(packet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn tcp_udp_and_icmp_are_read() {
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [203, 0, 113, 7], 64)
            .tcp(40000, 443, 1000, 64000)
            .syn()
            .write(&mut out, b"")
            .unwrap();
        let p = parse(&out).unwrap();
        assert_eq!(p.protocol, Protocol::Tcp);
        assert_eq!(p.dst, "203.0.113.7:443".parse().unwrap());
        assert!(p.tcp.unwrap().syn);
        let mut out = Vec::new();
        PacketBuilder::ipv6(
            [0; 16],
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            64,
        )
        .udp(5000, 9999)
        .write(&mut out, b"hello")
        .unwrap();
        let p = parse(&out).unwrap();
        assert_eq!((p.protocol, p.payload), (Protocol::Udp, &b"hello"[..]));
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [192, 0, 2, 1], 64)
            .icmpv4_echo_request(7, 1)
            .write(&mut out, b"ping-data")
            .unwrap();
        let p = parse(&out).unwrap();
        assert_eq!((p.protocol, p.payload), (Protocol::Icmp, &b"ping-data"[..]));
    }

    #[test]
    fn garbage_is_none_never_a_panic() {
        assert!(parse(b"").is_none());
        assert!(parse(&[0x45, 0, 0, 200, 0, 0]).is_none());
        for n in 0..=255u8 {
            let _ = parse(&[n; 64]);
        }
    }
}
