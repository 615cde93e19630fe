//! Flows: packets grouped by their two endpoints and protocol, the side that began each one,
//! and the bytes that side sent, put back in order.
//!
//! A flow's initiator is the sender of its first packet (for TCP, of the SYN without ACK when it
//! was seen). What the initiator sends is the flow's *outbound* stream: TCP's is reassembled by
//! sequence number (a retransmission adds nothing, a segment ahead of a gap waits for it); the
//! datagrams of UDP, ICMP or another protocol are its stream in the order they were sent, so a
//! secret split over several datagrams of one flow is whole again in the stream.
//!
//! Guarantees: bounded — at most [`MAX_FLOWS`] flows at once (the oldest makes way and is
//! reported ended), at most [`MAX_PENDING`] bytes waiting behind a gap per flow and
//! [`MAX_PENDING_TOTAL`] in all (past that the gap is skipped and counted in [`Flow::gaps`]);
//! never panics on any sequence of packets.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::packet::{Packet, Protocol};

/// Flows tracked at once, at most.
pub const MAX_FLOWS: usize = 4096;
/// Bytes held behind a gap in one flow's stream, at most.
pub const MAX_PENDING: usize = 256 << 10;
/// Bytes held behind gaps in all flows together, at most.
pub const MAX_PENDING_TOTAL: usize = 16 << 20;
/// Segments held behind a gap in one flow, at most (tiny segments cost more than their bytes).
pub const MAX_SEGMENTS: usize = 1024;
/// Flows pushed out of a full table whose initiator is remembered, at most: a flow that goes
/// on after it was pushed out keeps its direction (else its first packet's sender would be
/// taken for its initiator, and what the real initiator sends would count as inbound).
pub const MAX_REMEMBERED: usize = 65_536;
/// A flow of a protocol without an end (UDP, ICMP…) ends after this long without a packet.
pub const IDLE: Duration = Duration::from_secs(2);

/// One flow and what was counted of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Its number in this capture (from 1).
    pub id: u64,
    /// Its protocol.
    pub protocol: Protocol,
    /// The side that sent the first packet.
    pub initiator: SocketAddr,
    /// The other side.
    pub responder: SocketAddr,
    /// Packets and payload bytes sent by the initiator.
    pub packets_out: u64,
    /// Payload bytes sent by the initiator.
    pub bytes_out: u64,
    /// Packets sent by the responder.
    pub packets_in: u64,
    /// Payload bytes sent by the responder.
    pub bytes_in: u64,
    /// Gaps in the outbound stream that were skipped (bytes never seen).
    pub gaps: u64,
}

/// What one packet did to the table.
#[derive(Debug, Default)]
pub struct Fed {
    /// The flow it belongs to, as it is now.
    pub flow: Option<Flow>,
    /// Whether the packet began the flow.
    pub began: bool,
    /// Outbound bytes now in order that were not before.
    pub outbound: Vec<u8>,
    /// Whether the flow is over (TCP: RST, or FIN from both sides).
    pub ended: bool,
}

type Key = (Protocol, SocketAddr, SocketAddr);

fn key(p: &Packet<'_>) -> Key {
    if p.src <= p.dst {
        (p.protocol, p.src, p.dst)
    } else {
        (p.protocol, p.dst, p.src)
    }
}

#[derive(Debug)]
struct Entry {
    flow: Flow,
    last: Instant,
    /// The next outbound sequence number expected (TCP).
    next: Option<u32>,
    /// The initiator's SYN's sequence number, when it was seen (TCP).
    syn: Option<u32>,
    /// Outbound segments ahead of a gap, by sequence number.
    pending: BTreeMap<u32, Vec<u8>>,
    pending_bytes: usize,
    fin_out: bool,
    fin_in: bool,
}

/// The flows of one capture.
#[derive(Debug, Default)]
pub struct Table {
    flows: HashMap<Key, Entry>,
    next_id: u64,
    /// Bytes held behind gaps in all flows.
    pending: usize,
    /// The initiators of flows pushed out of the table.
    remembered: HashMap<Key, SocketAddr>,
}

/// How far `a` is ahead of `b` in sequence space (negative: behind).
fn ahead(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b).cast_signed())
}

impl Table {
    /// A new, empty table.
    pub fn new() -> Table {
        Table::default()
    }

    /// Flows tracked now.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether no flow is tracked.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Account for one packet seen at `now`; a flow pushed out to make room is appended to
    /// `evicted`.
    pub fn feed(&mut self, p: &Packet<'_>, now: Instant, evicted: &mut Vec<Flow>) -> Fed {
        let k = key(p);
        let mut fed = Fed::default();
        if p.icmp_error {
            // The kernel's answer to another packet (it quotes it): not what anyone sent.
            return fed;
        }
        // A TCP packet of no known flow that carries nothing and opens nothing is the tail of
        // a flow already over (a last ACK, a RST): not a flow. One that carries data is taken
        // as its sender's (a flow pushed out of a full table goes on being read).
        let stray = p
            .tcp
            .is_some_and(|t| (t.ack || !t.syn) && p.payload.is_empty());
        if stray && !self.flows.contains_key(&k) {
            return fed;
        }
        // A new SYN on the endpoints of a known flow: the old flow is over (its end
        // was missed), a new one begins (a retransmitted SYN is not new).
        if let Some(t) = p.tcp
            && t.syn
            && !t.ack
            && let Some(e) = self.flows.get(&k)
            && e.syn != Some(t.seq)
            && let Some(e) = self.flows.remove(&k)
        {
            self.pending -= e.pending_bytes;
            evicted.push(e.flow);
        }
        if !self.flows.contains_key(&k) {
            if self.flows.len() >= MAX_FLOWS
                && let Some(old) = self
                    .flows
                    .iter()
                    .min_by_key(|(_, e)| e.last)
                    .map(|(k, _)| *k)
                && let Some(e) = self.flows.remove(&old)
            {
                self.pending -= e.pending_bytes;
                if self.remembered.len() >= MAX_REMEMBERED {
                    self.remembered.clear();
                }
                self.remembered.insert(old, e.flow.initiator);
                evicted.push(e.flow);
            }
            self.next_id += 1;
            // The capture starts before the jail's first program: the first packet of a flow
            // is its initiator's, unless the flow was pushed out of the table and goes on.
            let initiator = match self.remembered.remove(&k) {
                Some(i) if i == p.src || i == p.dst => i,
                _ => p.src,
            };
            let responder = if initiator == p.src { p.dst } else { p.src };
            self.flows.insert(
                k,
                Entry {
                    flow: Flow {
                        id: self.next_id,
                        protocol: p.protocol,
                        initiator,
                        responder,
                        packets_out: 0,
                        bytes_out: 0,
                        packets_in: 0,
                        bytes_in: 0,
                        gaps: 0,
                    },
                    last: now,
                    next: None,
                    syn: None,
                    pending: BTreeMap::new(),
                    pending_bytes: 0,
                    fin_out: false,
                    fin_in: false,
                },
            );
            fed.began = true;
        }
        let Some(e) = self.flows.get_mut(&k) else {
            return fed;
        };
        e.last = now;
        let out = p.src == e.flow.initiator;
        let len = p.payload.len() as u64;
        if out {
            e.flow.packets_out += 1;
            e.flow.bytes_out += len;
        } else {
            e.flow.packets_in += 1;
            e.flow.bytes_in += len;
        }
        match p.tcp {
            Some(t) => {
                if out {
                    if t.syn && !t.ack {
                        e.syn.get_or_insert(t.seq);
                    }
                    fed.outbound = e.tcp_out(t.seq, t.syn, p.payload, &mut self.pending);
                    e.fin_out |= t.fin;
                } else {
                    e.fin_in |= t.fin;
                }
                fed.ended = t.rst || (e.fin_out && e.fin_in);
            }
            None if out => fed.outbound = p.payload.to_vec(),
            None => {}
        }
        fed.flow = Some(e.flow.clone());
        if fed.ended
            && let Some(e) = self.flows.remove(&k)
        {
            self.pending -= e.pending_bytes;
        }
        fed
    }

    /// Flows of protocols without an end that have been idle for [`IDLE`] at `now`: removed and
    /// returned.
    pub fn expire(&mut self, now: Instant) -> Vec<Flow> {
        let idle: Vec<Key> = self
            .flows
            .iter()
            .filter(|(k, e)| k.0 != Protocol::Tcp && now.duration_since(e.last) >= IDLE)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for k in idle {
            if let Some(e) = self.flows.remove(&k) {
                self.pending -= e.pending_bytes;
                out.push(e.flow);
            }
        }
        out
    }

    /// Every flow still tracked (the capture is over), oldest first.
    pub fn drain(&mut self) -> Vec<Flow> {
        self.pending = 0;
        let mut all: Vec<Flow> = self.flows.drain().map(|(_, e)| e.flow).collect();
        all.sort_by_key(|f| f.id);
        all
    }
}

impl Entry {
    /// The outbound bytes a TCP segment puts in order.
    fn tcp_out(&mut self, seq: u32, syn: bool, payload: &[u8], total: &mut usize) -> Vec<u8> {
        // The SYN takes one sequence number; data starts after it.
        let start = if syn { seq.wrapping_add(1) } else { seq };
        let next = *self.next.get_or_insert(start);
        if payload.is_empty() {
            return Vec::new();
        }
        let behind = ahead(next, start);
        let mut out = Vec::new();
        if behind >= 0 {
            // In order, or a retransmission overlapping what was had.
            let skip = usize::try_from(behind).unwrap_or(usize::MAX);
            if skip < payload.len() {
                out.extend_from_slice(&payload[skip..]);
                self.next =
                    Some(next.wrapping_add(u32::try_from(payload.len() - skip).unwrap_or(0)));
            }
        } else if self.pending.contains_key(&start) {
            // A segment already waiting, sent again.
            return out;
        } else if self.pending_bytes + payload.len() <= MAX_PENDING
            && *total + payload.len() <= MAX_PENDING_TOTAL
            && self.pending.len() < MAX_SEGMENTS
        {
            self.pending_bytes += payload.len();
            *total += payload.len();
            self.pending.insert(start, payload.to_vec());
            return out;
        } else {
            // Too much behind a gap: skip the gap.
            self.flow.gaps += 1;
            out.extend_from_slice(payload);
            self.next = Some(start.wrapping_add(u32::try_from(payload.len()).unwrap_or(0)));
        }
        // Segments that were waiting and now fit.
        while let Some(at) = self.next {
            let ready = self.pending.keys().copied().find(|s| ahead(at, *s) >= 0);
            let Some(s) = ready else { break };
            let Some(seg) = self.pending.remove(&s) else {
                break;
            };
            self.pending_bytes -= seg.len();
            *total -= seg.len();
            let skip = usize::try_from(ahead(at, s)).unwrap_or(usize::MAX);
            if skip < seg.len() {
                out.extend_from_slice(&seg[skip..]);
                self.next = Some(at.wrapping_add(u32::try_from(seg.len() - skip).unwrap_or(0)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Tcp;

    fn tcp<'a>(from: &str, to: &str, seq: u32, syn: bool, fin: bool, data: &'a [u8]) -> Packet<'a> {
        Packet {
            src: from.parse().unwrap(),
            dst: to.parse().unwrap(),
            protocol: Protocol::Tcp,
            payload: data,
            tcp: Some(Tcp {
                seq,
                syn,
                fin,
                rst: false,
                ack: !syn || from.ends_with(":443"),
            }),
            icmp_error: false,
        }
    }

    #[test]
    fn tcp_is_put_back_in_order_and_retransmissions_add_nothing() {
        let (c, s) = ("10.0.0.1:4000", "203.0.113.7:443");
        let mut t = Table::new();
        let now = Instant::now();
        let mut ev = Vec::new();
        let f = t.feed(&tcp(c, s, 99, true, false, b""), now, &mut ev);
        assert!(f.began);
        assert_eq!(f.flow.as_ref().unwrap().initiator, c.parse().unwrap());
        // The server's answer counts in, and adds nothing outbound.
        let f = t.feed(&tcp(s, c, 5000, true, false, b""), now, &mut ev);
        assert!(!f.began && f.outbound.is_empty());
        // A segment ahead of a gap waits; the gap's segment releases both.
        assert!(
            t.feed(&tcp(c, s, 106, false, false, b"world"), now, &mut ev)
                .outbound
                .is_empty()
        );
        assert_eq!(
            t.feed(&tcp(c, s, 100, false, false, b"hello "), now, &mut ev)
                .outbound,
            b"hello world"
        );
        // A retransmission overlapping the end adds only what is new.
        assert_eq!(
            t.feed(&tcp(c, s, 109, false, false, b"ld!!"), now, &mut ev)
                .outbound,
            b"!!"
        );
        assert!(
            t.feed(&tcp(c, s, 100, false, false, b"hello"), now, &mut ev)
                .outbound
                .is_empty()
        );
        t.feed(&tcp(c, s, 113, false, true, b""), now, &mut ev);
        let f = t.feed(&tcp(s, c, 5001, false, true, b""), now, &mut ev);
        assert!(f.ended);
        let flow = f.flow.unwrap();
        assert_eq!((flow.bytes_out, flow.packets_in), (20, 2));
        assert!(t.is_empty());
        // A last ACK after the end is no new flow.
        assert!(
            t.feed(&tcp(s, c, 5002, false, false, b""), now, &mut ev)
                .flow
                .is_none()
        );
        assert!(t.is_empty());
    }

    #[test]
    fn datagrams_are_one_stream_and_idle_flows_end() {
        let udp = |data: &'static [u8]| Packet {
            src: "10.0.0.1:5000".parse().unwrap(),
            dst: "198.51.100.1:9999".parse().unwrap(),
            protocol: Protocol::Udp,
            payload: data,
            tcp: None,
            icmp_error: false,
        };
        let mut t = Table::new();
        let now = Instant::now();
        let mut ev = Vec::new();
        assert_eq!(t.feed(&udp(b"AKIA"), now, &mut ev).outbound, b"AKIA");
        assert_eq!(
            t.feed(&udp(b"XYZ"), now, &mut ev).flow.unwrap().packets_out,
            2
        );
        assert!(t.expire(now).is_empty());
        assert_eq!(t.expire(now + IDLE).len(), 1);
    }

    #[test]
    fn a_flow_pushed_out_keeps_its_direction_and_a_new_syn_begins_a_new_flow() {
        let (c, s) = ("10.0.0.1:4000", "203.0.113.7:80");
        let mut t = Table::new();
        let now = Instant::now();
        let mut ev = Vec::new();
        t.feed(&tcp(c, s, 0, true, false, b""), now, &mut ev);
        // Pushed out by a flood of other flows.
        for port in 0..u16::try_from(MAX_FLOWS).unwrap() {
            let p = Packet {
                src: format!("10.0.0.2:{}", 1000 + port).parse().unwrap(),
                dst: "198.51.100.1:53".parse().unwrap(),
                protocol: Protocol::Udp,
                payload: b"x",
                tcp: None,
                icmp_error: false,
            };
            t.feed(&p, now + Duration::from_millis(1), &mut ev);
        }
        assert!(ev.iter().any(|f| f.initiator == c.parse().unwrap()));
        // The server speaks first when the flow comes back: still the client's flow.
        let f = t.feed(&tcp(s, c, 900, false, false, b"220 hello"), now, &mut ev);
        assert_eq!(f.flow.unwrap().initiator, c.parse().unwrap());
        let f = t.feed(&tcp(c, s, 1, false, false, b"secret"), now, &mut ev);
        assert_eq!(f.outbound, b"secret");
        // A new SYN on the same endpoints: a new flow, read from its own start.
        ev.clear();
        let f = t.feed(&tcp(c, s, 5000, true, false, b""), now, &mut ev);
        assert!(f.began, "{ev:?}");
        let f = t.feed(&tcp(c, s, 5001, false, false, b"again"), now, &mut ev);
        assert_eq!(f.outbound, b"again");
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = Table::new();
        let now = Instant::now();
        let mut ev = Vec::new();
        for port in 0..(u16::try_from(MAX_FLOWS).unwrap() + 10) {
            let src = format!("10.0.0.1:{}", 1000 + port);
            let p = Packet {
                src: src.parse().unwrap(),
                dst: "198.51.100.1:53".parse().unwrap(),
                protocol: Protocol::Udp,
                payload: b"x",
                tcp: None,
                icmp_error: false,
            };
            t.feed(&p, now, &mut ev);
        }
        assert_eq!(t.len(), MAX_FLOWS);
        assert_eq!(ev.len(), 10);
    }

    #[test]
    fn a_flood_behind_a_gap_is_bounded() {
        let (c, s) = ("10.0.0.1:4000", "203.0.113.7:80");
        let mut t = Table::new();
        let now = Instant::now();
        let mut ev = Vec::new();
        t.feed(&tcp(c, s, 0, true, false, b""), now, &mut ev);
        let chunk = vec![b'a'; 60_000];
        let mut seq = 100_000u32;
        let mut skipped = false;
        for _ in 0..10 {
            let f = t.feed(&tcp(c, s, seq, false, false, &chunk), now, &mut ev);
            skipped |= !f.outbound.is_empty();
            seq = seq.wrapping_add(60_000);
        }
        assert!(skipped, "past the bound, the gap is skipped");
        assert!(t.flows.values().all(|e| e.pending_bytes <= MAX_PENDING));
        let held: usize = t.flows.values().map(|e| e.pending_bytes).sum();
        assert_eq!(held, t.pending, "the total is kept exactly");
        assert!(t.pending <= MAX_PENDING_TOTAL);
    }
}
