//! The run's side of the boundary capture (`warden-capture`): what the tap's flows mean for a
//! run. A flow *leaves* when its initiator sent it to an address other than loopback (every
//! such address is the capture network's, so nothing really left; the flow is what the
//! program tried to send out). For each such flow, every byte its initiator sent is searched
//! for the run's canaries, as one stream (a secret split over segments or datagrams is
//! whole again), and its end is a `net.flow` event with what was counted.
//!
//! Guarantees: each canary is reported once per flow (again only for a more direct find: a
//! fragment first, the whole secret later), with the transformation that found it
//! and `where: "boundary"`; the carry-over between chunks is bounded ([`OVERLAP`]); flows of
//! the jail's own loopback (a server and its own helper, the DNS stub) are not judged here.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde_json::json;
use warden_capture::{Flow, Observer, Protocol};
use warden_events::EventKind;
use warden_trace::Stub;

use super::Hub;

/// Bytes carried over between chunks of a flow's stream.
const OVERLAP: usize = 512;
/// Bytes of a flow's start kept for its `net.flow` event.
const PREVIEW: usize = 256;
/// A chunk this small is also searched joined to the small chunks sent before to the same
/// address by other flows (a secret cut into short pieces, one per connection or socket).
const SMALL: usize = 64;
/// Addresses whose small chunks are joined, at most (the least recent makes way).
const MAX_DESTINATIONS: usize = 256;

/// The observer of one run's tap.
pub struct Boundary {
    hub: Arc<Hub>,
    stub: Arc<Mutex<Stub>>,
    flows: Mutex<HashMap<u64, FlowScan>>,
    /// Small chunks sent to each address, joined across flows.
    destinations: Mutex<HashMap<IpAddr, Joined>>,
    clock: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Joined {
    tail: Vec<u8>,
    reported: warden_trace::Reported,
    at: u64,
}

impl std::fmt::Debug for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Boundary").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct FlowScan {
    tail: Vec<u8>,
    reported: warden_trace::Reported,
    preview: Vec<u8>,
}

/// Whether a flow's initiator sent it out of the jail (to anything but loopback).
pub fn leaves(flow: &Flow) -> bool {
    !super::net::local(flow.responder.ip())
}

impl Boundary {
    /// The observer recording into `hub`, naming addresses by the DNS stub's answers.
    pub fn new(hub: Arc<Hub>, stub: Arc<Mutex<Stub>>) -> Boundary {
        Boundary {
            hub,
            stub,
            flows: Mutex::new(HashMap::new()),
            destinations: Mutex::new(HashMap::new()),
            clock: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn host(&self, at: SocketAddr) -> Option<String> {
        super::net::name_for(&self.stub, at.ip())
    }

    fn place(&self, flow: &Flow) -> serde_json::Value {
        let port = (flow.protocol != Protocol::Icmp).then_some(flow.responder.port());
        json!({
            "protocol": flow.protocol.name(),
            "address": flow.responder.ip().to_string(),
            "port": port,
            "host": self.host(flow.responder),
            "flow": flow.id,
        })
    }
}

impl Boundary {
    /// Record a sighting of `hit` in `flow` (`joined`: how it was joined to other flows' bytes).
    fn sighting(&self, flow: &Flow, hit: &warden_trace::Hit, joined: Option<&str>) {
        let mut data = self.place(flow);
        if let Some(o) = data.as_object_mut() {
            o.insert("planted".into(), json!(hit.planted));
            o.insert("encoding".into(), json!(hit.encoding));
            o.insert("where".into(), json!("boundary"));
            if let Some(j) = joined {
                o.insert("joined".into(), json!(j));
            }
        }
        self.hub.record(EventKind::CanarySeen, None, data);
    }

    /// Search `bytes` joined to the small chunks other flows sent to the same address before.
    fn joined(&self, flow: &Flow, bytes: &[u8]) {
        let Some(canaries) = self.hub.canaries() else {
            return;
        };
        let at = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let window = {
            let Ok(mut all) = self.destinations.lock() else {
                return;
            };
            let ip = flow.responder.ip();
            if !all.contains_key(&ip)
                && all.len() >= MAX_DESTINATIONS
                && let Some(oldest) = all.iter().min_by_key(|(_, j)| j.at).map(|(k, _)| *k)
            {
                all.remove(&oldest);
            }
            let j = all.entry(ip).or_default();
            j.at = at;
            let mut window = std::mem::take(&mut j.tail);
            window.extend_from_slice(bytes);
            let keep = window.len().min(OVERLAP);
            j.tail = window[window.len() - keep..].to_vec();
            window
        };
        for hit in canaries.find(&window) {
            // What the flow's own stream showed as directly is reported already.
            let in_flow = self
                .flows
                .lock()
                .is_ok_and(|f| f.get(&flow.id).is_some_and(|s| s.reported.covers(&hit)));
            let better = !in_flow
                && self.destinations.lock().is_ok_and(|mut all| {
                    all.entry(flow.responder.ip())
                        .or_default()
                        .reported
                        .improves(&hit)
                });
            if better {
                self.sighting(flow, &hit, Some("address"));
            }
        }
    }
}

impl Observer for Boundary {
    fn began(&self, flow: &Flow) {
        if leaves(flow)
            && let Ok(mut f) = self.flows.lock()
        {
            f.insert(flow.id, FlowScan::default());
        }
    }

    fn outbound(&self, flow: &Flow, bytes: &[u8]) {
        if !leaves(flow) {
            return;
        }
        let window = {
            let Ok(mut flows) = self.flows.lock() else {
                return;
            };
            let scan = flows.entry(flow.id).or_default();
            if scan.preview.len() < PREVIEW {
                let take = (PREVIEW - scan.preview.len()).min(bytes.len());
                scan.preview.extend_from_slice(&bytes[..take]);
            }
            let mut window = std::mem::take(&mut scan.tail);
            window.extend_from_slice(bytes);
            let keep = window.len().min(OVERLAP);
            scan.tail = window[window.len() - keep..].to_vec();
            window
        };
        let Some(canaries) = self.hub.canaries() else {
            return;
        };
        for hit in canaries.find(&window) {
            let new = self
                .flows
                .lock()
                .is_ok_and(|mut f| f.entry(flow.id).or_default().reported.improves(&hit));
            if new {
                self.sighting(flow, &hit, None);
            }
        }
        if bytes.len() <= SMALL {
            self.joined(flow, bytes);
        }
    }

    fn ended(&self, flow: &Flow) {
        if !leaves(flow) {
            return;
        }
        let scan = self.flows.lock().ok().and_then(|mut f| f.remove(&flow.id));
        let preview = scan
            .map(|s| String::from_utf8_lossy(&s.preview).into_owned())
            .unwrap_or_default();
        let mut data = self.place(flow);
        if let Some(o) = data.as_object_mut() {
            o.insert("from_port".into(), json!(flow.initiator.port()));
            o.insert("packets_out".into(), json!(flow.packets_out));
            o.insert("bytes_out".into(), json!(flow.bytes_out));
            o.insert("packets_in".into(), json!(flow.packets_in));
            o.insert("bytes_in".into(), json!(flow.bytes_in));
            o.insert("gaps".into(), json!(flow.gaps));
            o.insert("preview".into(), json!(preview));
        }
        self.hub.record(EventKind::NetFlow, None, data);
    }
}

/// Record what opening a TLS connection to `dest` gave: the request inside it (a `net.send`
/// with `captured: "tls"`, its bytes searched for canaries with `where: "tls"`), or the
/// client's refusal (`tls.refused`). `hello` is the event of the connection's hello; every
/// event is attributed to `window`, the one open when the hello was whole (the reading ends
/// later, on a thread of its own, maybe after the caller moved on).
pub fn record_tls(
    hub: &Hub,
    window: Option<String>,
    dest: SocketAddr,
    host: Option<String>,
    hello: Option<u64>,
    out: warden_capture::Outcome,
) {
    use warden_capture::Outcome;
    match out {
        Outcome::Opened {
            sni,
            alpn,
            plaintext,
        } => {
            let sniffed = warden_trace::sniff(&plaintext);
            let preview = String::from_utf8_lossy(&plaintext[..plaintext.len().min(512)]);
            let data = json!({
                "address": dest.ip().to_string(),
                "port": dest.port(),
                "host": host,
                "bytes": plaintext.len(),
                "captured": "tls",
                "protocol": sniffed.protocol,
                "sni": sni,
                "alpn": alpn,
                "request_line": sniffed.request_line,
                "http_host": sniffed.host,
                "preview": preview,
                "hello": hello,
            });
            let id = hub.record_in(window.clone(), EventKind::NetSend, None, data);
            // The chamber's name for the address rides on the sighting itself (which is never
            // dropped), so where it went is known even when the request's event is not.
            let ctx = json!({
                "where": "tls",
                "address": dest.ip().to_string(),
                "port": dest.port(),
                "host": host,
                "event": id,
            });
            hub.scan_in(window.clone(), &plaintext, None, &ctx);
        }
        // No per-connection id: the same refusal again in one window is folded into the first
        // (a flood of refusals cannot fill the cap), and refusals have no reserve of their own.
        Outcome::Refused { sni, reason } => {
            let data = json!({
                "address": dest.ip().to_string(),
                "port": dest.port(),
                "host": host,
                "sni": sni,
                "reason": reason,
            });
            hub.record_in(window, EventKind::TlsRefused, None, data);
        }
        // Not TLS the chamber could speak (no common version, cipher or application protocol:
        // an HTTP/2-only client): the hello's own event says so.
        Outcome::Failed { sni, reason } => {
            let data = json!({
                "address": dest.ip().to_string(),
                "port": dest.port(),
                "host": host,
                "bytes": 0,
                "captured": "tls",
                "sni": sni,
                "error": reason,
            });
            hub.record_in(window, EventKind::NetSend, None, data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(to: &str) -> Flow {
        flow_n(1, to)
    }

    fn flow_n(id: u64, to: &str) -> Flow {
        Flow {
            id,
            protocol: Protocol::Udp,
            initiator: "127.0.0.1:5000".parse().unwrap(),
            responder: to.parse().unwrap(),
            packets_out: 0,
            bytes_out: 0,
            packets_in: 0,
            bytes_in: 0,
            gaps: 0,
        }
    }

    #[test]
    fn short_pieces_over_many_flows_to_one_address_are_joined() {
        let d = warden_trace::Decoys::generate();
        let token = d.canaries.value("env:NPM_TOKEN").unwrap().to_owned();
        let hub = Arc::new(Hub::new(1000, None, Some(d.canaries.clone())));
        let stub = Arc::new(Mutex::new(Stub::new(warden_trace::DnsMode::FakeIp)));
        let b = Boundary::new(hub.clone(), stub);
        for (i, piece) in token.as_bytes().chunks(8).enumerate() {
            let f = flow_n(i as u64 + 10, &format!("198.51.100.9:{}", 7000 + i));
            b.began(&f);
            b.outbound(&f, piece);
            b.ended(&f);
        }
        let (events, _) = hub.take();
        assert!(
            events.iter().any(|e| e.kind == EventKind::CanarySeen
                && e.data["planted"] == "env:NPM_TOKEN"
                && e.data["joined"] == "address"
                && e.data["encoding"] == "plain"),
            "{events:?}"
        );
    }

    #[test]
    fn only_what_is_sent_out_of_the_jail_leaves() {
        assert!(leaves(&flow("203.0.113.7:443")));
        assert!(leaves(&flow("[2001:db8::1]:53")));
        assert!(!leaves(&flow("127.0.0.53:53")));
        assert!(!leaves(&flow("[::1]:8080")));
        assert!(!leaves(&flow("[::ffff:127.0.0.1]:80")));
    }

    #[test]
    fn a_canary_split_over_datagrams_is_found_once_per_flow() {
        let d = warden_trace::Decoys::generate();
        let token = d.canaries.value("env:GITHUB_TOKEN").unwrap().to_owned();
        let hub = Arc::new(Hub::new(1000, None, Some(d.canaries.clone())));
        let b = Boundary::new(
            hub.clone(),
            Arc::new(Mutex::new(Stub::new(warden_trace::DnsMode::FakeIp))),
        );
        let f = flow("198.51.100.9:9999");
        b.began(&f);
        let (a, z) = token.as_bytes().split_at(token.len() / 2);
        b.outbound(&f, a);
        b.outbound(&f, z);
        b.outbound(&f, token.as_bytes());
        b.ended(&f);
        let (events, _) = hub.take();
        let seen: Vec<_> = events
            .iter()
            .filter(|e| e.kind == EventKind::CanarySeen)
            .collect();
        // A fragment with the first half, the whole secret with the second, then no more.
        let forms: Vec<_> = seen.iter().map(|e| e.data["encoding"].clone()).collect();
        assert_eq!(forms, ["fragment", "plain"], "{seen:?}");
        assert!(seen.iter().all(|e| e.data["planted"] == "env:GITHUB_TOKEN"
            && e.data["where"] == "boundary"
            && e.data["protocol"] == "udp"));
        assert!(
            events
                .iter()
                .any(|e| e.kind == EventKind::NetFlow && e.data["port"] == 9999)
        );
    }
}
