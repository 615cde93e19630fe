//! What a web call's sandbox did on the network, from its trace: the names it looked up, each
//! connection that was forwarded to a real host (host, port, request line or TLS name, bytes
//! each way) and each one that was refused, with the reason (a name or port off the
//! allowlist reaches only the capture sink; an allowlisted name whose address is private or
//! whose request names another host is cut). This goes in the call's result and its audit
//! entry, so every URL a page or a browser reached is on record.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use warden_events::{Event, EventKind};

/// Entries per list, at most (the rest are counted).
const MAX_ENTRIES: usize = 200;

/// The summary of `events`.
pub fn summarize(events: &[Event], dropped: u64) -> Value {
    let mut names = BTreeSet::new();
    let mut requests = Vec::new();
    let mut refused = Vec::new();
    let (mut requests_total, mut refused_total) = (0u64, 0u64);
    for e in events {
        let d = &e.data;
        match e.kind {
            EventKind::NetDns => {
                if let Some(n) = d["name"].as_str()
                    && names.len() < MAX_ENTRIES
                {
                    names.insert(n.trim_end_matches('.').to_ascii_lowercase());
                }
            }
            EventKind::NetSend => {
                let request = d["request_line"]
                    .as_str()
                    .or(d["sni"].as_str().map(|_| "TLS"))
                    .map(str::to_owned);
                let host = d["host"]
                    .as_str()
                    .or(d["sni"].as_str())
                    .or(d["http_host"].as_str());
                let entry = |reason: Option<&str>| {
                    let mut v = json!({
                        "host": host,
                        "port": d["port"],
                        "protocol": d["protocol"],
                        "request": request,
                    });
                    match reason {
                        Some(r) => v["reason"] = json!(r),
                        None => {
                            v["bytes_sent"] = d["bytes"].clone();
                            v["bytes_received"] = d["bytes_received"].clone();
                        }
                    }
                    v
                };
                match (d["captured"].as_str(), d["error"].as_str()) {
                    (Some("forwarded"), None) => {
                        requests_total += 1;
                        if requests.len() < MAX_ENTRIES {
                            requests.push(entry(None));
                        }
                    }
                    (Some("forwarded"), Some(err)) => {
                        refused_total += 1;
                        if refused.len() < MAX_ENTRIES {
                            refused.push(entry(Some(err)));
                        }
                    }
                    (Some("sink"), _) => {
                        refused_total += 1;
                        if refused.len() < MAX_ENTRIES {
                            let mut v = entry(Some(
                                "not on the allowlist: the connection reached Warden's capture \
                                 sink and nothing left the machine",
                            ));
                            v["address"] = d["address"].clone();
                            refused.push(v);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    json!({
        "dns": names,
        "requests": requests,
        "requests_total": requests_total,
        "refused": refused,
        "refused_total": refused_total,
        "events_dropped": dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tools::test_event as ev;

    #[test]
    fn forwarded_refused_and_sunk_connections_are_told_apart() {
        let events = vec![
            ev(EventKind::NetDns, json!({"name": "Svc.test.", "type": "A"})),
            ev(
                EventKind::NetDns,
                json!({"name": "svc.test", "type": "AAAA"}),
            ),
            ev(
                EventKind::NetSend,
                json!({"captured": "forwarded", "host": "svc.test", "port": 8080,
                       "protocol": "http", "request_line": "GET / HTTP/1.1",
                       "bytes": 80, "bytes_received": 900, "error": null}),
            ),
            ev(
                EventKind::NetSend,
                json!({"captured": "forwarded", "host": "priv.test", "port": 8080,
                       "protocol": "http", "request_line": "GET / HTTP/1.1",
                       "bytes": 0, "bytes_received": 0,
                       "error": "priv.test resolves to 10.0.0.2, a private address"}),
            ),
            ev(
                EventKind::NetSend,
                json!({"captured": "sink", "host": "other.test", "address": "198.18.0.9",
                       "port": 443, "protocol": "tls", "sni": "other.test", "bytes": 300}),
            ),
        ];
        let s = summarize(&events, 0);
        assert_eq!(s["dns"], json!(["svc.test"]));
        assert_eq!(s["requests_total"], 1);
        assert_eq!(s["requests"][0]["bytes_received"], 900);
        assert_eq!(s["refused_total"], 2);
        assert!(
            s["refused"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("private")
        );
        assert_eq!(s["refused"][1]["host"], "other.test");
        assert_eq!(s["refused"][1]["request"], "TLS");
        assert!(
            s["refused"][1]["reason"]
                .as_str()
                .unwrap()
                .contains("allowlist")
        );
    }
}
