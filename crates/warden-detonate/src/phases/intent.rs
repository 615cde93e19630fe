//! What a server's connections were aimed at, marked on the events before the rules run: the
//! cloud's instance metadata services (where a cloud host hands out its own credentials),
//! scans (many addresses, or many ports of one address, touched in one window: `scan`), and
//! probes of many ports of the sandbox's own loopback (`loopback_probe`, low: developer tools look
//! for local dev servers that way, e.g. ports 3000–3010, so that is a shape).
//!
//! Guarantees: a lookup or connection is marked `cloud_metadata` only when its address (IPv4,
//! IPv6, or IPv4 mapped into IPv6) or name is one of the providers' metadata endpoints, and
//! never in the window of a harness payload that named that endpoint itself (a fetch tool
//! given the metadata URL is an SSRF, judged by its own rule); that is a shape (medium): cloud
//! SDKs' credential chains (boto3, google-auth, Azure's `DefaultAzureCredential`, OpenTelemetry's
//! resource detectors) ask the metadata service too when no credentials are configured. A
//! window is a scan only by
//! addresses the program chose itself — addresses a DNS answer gave (the chamber answers every
//! name with its own) do not count, so a browser that looks up many names is not a scanner —
//! and ports the server itself listens on do not count either. One event per scan is marked:
//! the connection that crossed the threshold.

use std::collections::{HashMap, HashSet};

use serde_json::json;
use warden_events::{Event, EventKind};
use warden_jail::warden_trace::imds;

/// Distinct addresses of the program's own choosing, in one window, that make a scan.
pub const SCAN_ADDRESSES: usize = 16;
/// Distinct ports of one address, in one window, that make a port scan.
pub const SCAN_PORTS: usize = 9;

/// An address as one spelling: IPv4 mapped into IPv6 (a dual-stack socket's, as Java and .NET
/// open by default) as the IPv4 address, IPv6 compressed; anything unparsed as given.
fn canonical(address: &str) -> String {
    address
        .parse::<std::net::IpAddr>()
        .map_or_else(|_| address.to_owned(), |ip| ip.to_canonical().to_string())
}

/// `address` is in [`canonical`] form, as the table's entries are written.
fn metadata_address(address: &str) -> Option<&'static str> {
    imds::by_address(address)
}

fn metadata_name(name: &str) -> Option<&'static str> {
    imds::by_name(name)
}

fn is_loopback(address: &str) -> bool {
    address
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Mark metadata requests and scans in `events`.
pub fn mark(events: &mut [Event]) {
    // What each payload window's payload named: a request there for the same endpoint was
    // asked for.
    let asked: HashMap<String, String> = events
        .iter()
        .filter(|e| e.kind == EventKind::HarnessPayload)
        .filter_map(|e| {
            let call = e.data["call"].as_u64()?;
            let payload = e.data["payload"].as_str()?.to_ascii_lowercase();
            Some((format!("tool_call:{call}"), payload))
        })
        .collect();
    let answered: HashSet<String> = events
        .iter()
        .filter(|e| e.kind == EventKind::NetDns)
        .filter_map(|e| e.data["answer"].as_str().map(canonical))
        .collect();
    let listening: HashSet<u64> = events
        .iter()
        .filter(|e| e.kind == EventKind::NetConnect && e.data["op"] == "listen")
        .filter_map(|e| e.data["port"].as_u64())
        .collect();
    // Per window: the addresses chosen, and the ports per address.
    let mut chosen: HashMap<Option<String>, HashSet<String>> = HashMap::new();
    let mut ports: HashMap<(Option<String>, String), HashSet<u64>> = HashMap::new();
    for e in events.iter_mut() {
        let target = match e.kind {
            EventKind::NetConnect if e.data["op"] == "connect" => {
                e.data["address"].as_str().map(canonical).map(|a| {
                    let whose = metadata_address(&a);
                    (a, whose)
                })
            }
            EventKind::NetDns => e.data["name"]
                .as_str()
                .map(|n| (n.to_owned(), metadata_name(n))),
            _ => None,
        };
        let Some((target, whose)) = target else {
            continue;
        };
        let window = e.triggered_by.clone();
        if let Some(whose) = whose {
            let requested = window
                .as_ref()
                .and_then(|w| asked.get(w))
                .is_some_and(|p| p.contains(&target.to_ascii_lowercase()));
            if !requested && let Some(data) = e.data.as_object_mut() {
                data.insert("cloud_metadata".into(), json!(whose));
                data.insert("metadata_target".into(), json!(target));
            }
        }
        if e.kind != EventKind::NetConnect {
            continue;
        }
        let Some(port) = e.data["port"].as_u64() else {
            continue;
        };
        let loopback = is_loopback(&target);
        // (key, what): a port scan first, so an address sweep crossing its threshold on the
        // same connection is the `scan` told.
        let mut marks = Vec::new();
        // Its own listeners are exempt on loopback only (listening on 22 does not make a sweep
        // of other hosts' port 22 its own).
        if !(loopback && listening.contains(&port)) {
            let set = ports.entry((window.clone(), target.clone())).or_default();
            if set.insert(port) && set.len() == SCAN_PORTS {
                let key = if loopback { "loopback_probe" } else { "scan" };
                marks.push((key, format!("{SCAN_PORTS} ports of {target} in one call")));
            }
        }
        if !loopback && !answered.contains(&target) {
            let set = chosen.entry(window).or_default();
            if set.insert(target) && set.len() == SCAN_ADDRESSES {
                marks.push((
                    "scan",
                    format!("{SCAN_ADDRESSES} addresses of its own choosing in one call"),
                ));
            }
        }
        if let Some(data) = e.data.as_object_mut() {
            for (key, what) in marks {
                data.insert(key.into(), json!(what));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn ev(id: u64, kind: EventKind, window: &str, data: Value) -> Event {
        Event {
            id,
            t_ms: 0,
            kind,
            pid: Some(3),
            triggered_by: Some(window.into()),
            data,
        }
    }

    fn connect(id: u64, window: &str, address: &str, port: u64) -> Event {
        ev(
            id,
            EventKind::NetConnect,
            window,
            json!({"op": "connect", "address": address, "port": port, "family": "inet"}),
        )
    }

    #[test]
    fn metadata_endpoints_are_marked_unless_a_payload_asked_for_them() {
        let mut events = vec![
            connect(1, "tool_call:1", "169.254.169.254", 80),
            connect(2, "tool_call:2", "::ffff:100.100.100.200", 80),
            connect(8, "tool_call:7", "FE80::A9FE:A9FE", 80),
            ev(
                3,
                EventKind::NetDns,
                "tool_call:3",
                json!({"name": "Metadata.Google.Internal.", "type": "A", "answer": "198.18.0.9"}),
            ),
            // The SSRF payload's own request.
            ev(
                4,
                EventKind::HarnessPayload,
                "tool_call:5",
                json!({"call": 5, "kind": "ssrf", "payload": "http://169.254.169.254/latest/meta-data/"}),
            ),
            connect(5, "tool_call:5", "169.254.169.254", 80),
            connect(6, "tool_call:6", "169.254.169.25", 80),
            ev(
                7,
                EventKind::NetDns,
                "tool_call:6",
                json!({"name": "metadata.example.test", "type": "A"}),
            ),
        ];
        mark(&mut events);
        let marked: Vec<u64> = events
            .iter()
            .filter(|e| e.data.get("cloud_metadata").is_some())
            .map(|e| e.id)
            .collect();
        assert_eq!(marked, vec![1, 2, 8, 3]);
        assert!(
            events[1].data["cloud_metadata"]
                .as_str()
                .unwrap()
                .contains("Alibaba")
        );
    }

    #[test]
    fn a_sweep_of_addresses_or_ports_is_a_scan_and_a_browser_is_not() {
        let mut events = Vec::new();
        // A /24 sweep: 20 addresses of its own choosing.
        for i in 0..20 {
            events.push(connect(i, "tool_call:1", &format!("10.0.0.{i}"), 22));
        }
        // Nine ports of one host.
        for (i, port) in [21, 22, 23, 25, 80, 443, 3306, 5432, 6379]
            .iter()
            .enumerate()
        {
            events.push(connect(100 + i as u64, "tool_call:2", "10.1.1.1", *port));
        }
        // A browser: 30 names looked up, each answered by the chamber, then connected to.
        for i in 0..30 {
            let address = format!("198.18.1.{i}");
            events.push(ev(
                200 + i,
                EventKind::NetDns,
                "tool_call:3",
                json!({"name": format!("cdn{i}.example.test"), "type": "A", "answer": address}),
            ));
            // Half through a dual-stack socket (Java, .NET): the same addresses, mapped.
            let spelled = if i % 2 == 0 {
                format!("::ffff:{address}")
            } else {
                address
            };
            events.push(connect(300 + i, "tool_call:3", &spelled, 443));
        }
        // Loopback, mapped or not: a probe of its ports is a shape of its own.
        for (i, port) in (3000..3011).enumerate() {
            let lo = if i % 2 == 0 {
                "::ffff:127.0.0.1"
            } else {
                "127.0.0.1"
            };
            events.push(connect(600 + i as u64, "tool_call:5", lo, port));
        }
        // A server talking to its own listener on many ports of loopback.
        for (i, port) in (40000..40012).enumerate() {
            events.push(ev(
                400 + i as u64,
                EventKind::NetConnect,
                "tool_call:4",
                json!({"op": "listen", "address": "127.0.0.1", "port": port}),
            ));
            events.push(connect(500 + i as u64, "tool_call:4", "127.0.0.1", port));
        }
        mark(&mut events);
        let scans: Vec<(u64, &str)> = events
            .iter()
            .filter_map(|e| Some((e.id, e.data.get("scan")?.as_str()?)))
            .collect();
        assert_eq!(scans.len(), 2, "{scans:?}");
        assert_eq!(scans[0].0, 15, "{scans:?}");
        assert!(scans[1].1.contains("9 ports of 10.1.1.1"), "{scans:?}");
        let probes: Vec<u64> = events
            .iter()
            .filter(|e| e.data.get("loopback_probe").is_some())
            .map(|e| e.id)
            .collect();
        assert_eq!(probes, vec![608], "the ninth port of loopback, once");
    }
}
