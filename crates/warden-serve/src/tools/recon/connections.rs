//! What a recon call's sandbox did on the network, from its trace: every connect attempt by
//! destination and the port state it was answered with, and every relayed connection with its
//! bytes each way. This goes in the call's result and its audit entry.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use warden_events::{Event, EventKind};

/// Relayed connections listed one by one, at most (the rest are counted).
const MAX_RELAYED: usize = 500;

/// The summary of `events`.
pub fn summarize(events: &[Event], dropped: u64) -> Value {
    // address → state → ports
    let mut attempts: BTreeMap<String, BTreeMap<String, Vec<u16>>> = BTreeMap::new();
    let mut relayed = Vec::new();
    let mut relayed_total = 0u64;
    let mut not_allowed = 0u64;
    for e in events {
        let d = &e.data;
        let (Some(addr), Some(port)) = (d["address"].as_str(), d["port"].as_u64()) else {
            continue;
        };
        let port = u16::try_from(port).unwrap_or(0);
        match e.kind {
            EventKind::NetConnect if d["op"] == "connect" => {
                let state = d["target"].as_str().unwrap_or("captured").to_owned();
                if state == "not_allowed" {
                    not_allowed += 1;
                }
                attempts
                    .entry(addr.to_owned())
                    .or_default()
                    .entry(state)
                    .or_default()
                    .push(port);
            }
            EventKind::NetSend if d["captured"] == "target" => {
                relayed_total += 1;
                if relayed.len() < MAX_RELAYED {
                    relayed.push(json!({
                        "address": addr,
                        "port": port,
                        "bytes_sent": d["bytes"],
                        "bytes_received": d["bytes_received"],
                        "error": d["error"],
                    }));
                }
            }
            _ => {}
        }
    }
    let attempts: Vec<Value> = attempts
        .into_iter()
        .map(|(address, states)| {
            let mut v = json!({ "address": address });
            for (state, mut ports) in states {
                ports.sort_unstable();
                v[state] = json!(ranges(&ports));
            }
            v
        })
        .collect();
    json!({
        "attempts": attempts,
        "relayed": relayed,
        "relayed_total": relayed_total,
        "not_allowed": not_allowed,
        "events_dropped": dropped,
    })
}

/// Sorted ports as `22,80,8000-8100` (repeats counted once).
fn ranges(ports: &[u16]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ports.len() {
        let start = ports[i];
        let mut end = start;
        while i + 1 < ports.len() && (ports[i + 1] == end || ports[i + 1] == end.saturating_add(1))
        {
            i += 1;
            end = ports[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tools::test_event as ev;

    #[test]
    fn attempts_are_grouped_by_address_and_state() {
        let c = |addr: &str, port: u16, target: &str| {
            ev(
                EventKind::NetConnect,
                json!({"op": "connect", "address": addr, "port": port, "target": target}),
            )
        };
        let mut events: Vec<Event> = (1..=5).map(|p| c("192.0.2.2", p, "closed")).collect();
        events.push(c("192.0.2.2", 8080, "open"));
        events.push(c("192.0.2.2", 8080, "open"));
        events.push(c("192.0.2.3", 80, "not_allowed"));
        events.push(ev(
            EventKind::NetSend,
            json!({"captured": "target", "address": "192.0.2.2", "port": 8080, "bytes": 10, "bytes_received": 99}),
        ));
        events.push(ev(
            EventKind::NetSend,
            json!({"captured": "sink", "address": "198.18.0.1", "port": 80, "bytes": 3}),
        ));
        let s = summarize(&events, 0);
        assert_eq!(s["attempts"][0]["address"], "192.0.2.2");
        assert_eq!(s["attempts"][0]["closed"], "1-5");
        assert_eq!(s["attempts"][0]["open"], "8080");
        assert_eq!(s["attempts"][1]["not_allowed"], "80");
        assert_eq!(s["not_allowed"], 1);
        assert_eq!(s["relayed_total"], 1);
        assert_eq!(s["relayed"][0]["bytes_received"], 99);
    }

    #[test]
    fn port_ranges_are_compact() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[22]), "22");
        assert_eq!(ranges(&[1, 2, 3, 5, 7, 8]), "1-3,5,7-8");
        assert_eq!(ranges(&[80, 80, 81]), "80-81");
        assert_eq!(ranges(&[65534, 65535]), "65534-65535");
    }
}
