//! A credential used on its own service is not a theft: the GitHub token the chamber gave the
//! server, sent to `api.github.com` in a TLS connection whose server name says so, is the
//! server doing its job. This pass marks such sightings (`own_service: true`) before the rules
//! run; `canary-leaving` and `decoy-read-and-exposed` pass them over, and
//! `credential-sent-to-its-service` (low) records them.
//!
//! Guarantees: only a sighting in a connection (the sink's first bytes, a flow at the boundary,
//! a request inside TLS) is ever marked, only when the name its address stood for (the
//! chamber's DNS answer, which the program cannot forge) and every name the connection gave
//! besides (the TLS server name, the HTTP Host) are services the
//! credential is for (`warden_trace::decoys::audience`), by whole labels. A DNS name, a tool's
//! result, a file or a connection to a bare address is never "its service". Limit: a server
//! that sends a token to its own service in order to leak it there (a public gist holding it)
//! is marked the same.

use std::collections::HashMap;

use serde_json::json;
use warden_events::{Event, EventKind};
use warden_jail::warden_trace::decoys::is_audience;

/// Mark the sightings of credentials sent to their own service in `events`.
pub fn mark(events: &mut [Event]) {
    let answered = super::answers::Answers::of(events);
    let names: HashMap<u64, Vec<String>> = events
        .iter()
        .filter(|e| e.kind == EventKind::NetSend)
        .map(|e| {
            let names = ["sni", "http_host", "host"]
                .iter()
                .filter_map(|k| e.data[*k].as_str().map(str::to_owned))
                .collect();
            (e.id, names)
        })
        .collect();
    for e in events
        .iter_mut()
        .filter(|e| e.kind == EventKind::CanarySeen)
    {
        let Some(planted) = e.data["planted"].as_str().map(str::to_owned) else {
            continue;
        };
        let candidates: Vec<String> = match e.data["where"].as_str() {
            // The name the chamber's DNS gave the address the connection went to — which the
            // program cannot write, unlike its TLS server name or Host header: a hard-coded
            // address (or another name's) with `api.github.com` written in the hello is not
            // GitHub — and every name the connection's request gave besides.
            Some("net" | "tls") => {
                // The tracer's own name for the address on the sighting, else the run's
                // recorded DNS answers.
                let answer = e.data["host"].as_str().map(str::to_owned).or_else(|| {
                    let address = e.data["address"].as_str()?;
                    answered.name(address).map(str::to_owned)
                });
                match answer {
                    Some(answer) => {
                        let mut all: Vec<String> = e.data["event"]
                            .as_u64()
                            .and_then(|id| names.get(&id).cloned())
                            .unwrap_or_default();
                        all.push(answer);
                        all
                    }
                    None => Vec::new(),
                }
            }
            Some("boundary") => e.data["host"]
                .as_str()
                .map(str::to_owned)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        // Every name the connection gave must be the service's (a TLS name for GitHub and a
        // Host for another site is not GitHub's).
        let own = !candidates.is_empty() && candidates.iter().all(|n| is_audience(&planted, n));
        if own && let Some(data) = e.data.as_object_mut() {
            data.insert("own_service".into(), json!(true));
        }
    }
}

/// For tests: an event.
#[cfg(test)]
fn event(id: u64, kind: EventKind, data: serde_json::Value) -> Event {
    Event {
        id,
        t_ms: 0,
        kind,
        pid: None,
        triggered_by: None,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_named_for_the_credentials_service_is_its_use() {
        let mut events = vec![
            event(
                1,
                EventKind::NetSend,
                json!({ "sni": "api.github.com", "captured": "tls" }),
            ),
            event(
                2,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "tls", "event": 1,
                        "address": "198.18.0.1" }),
            ),
            event(
                3,
                EventKind::NetSend,
                json!({ "sni": "api.github.com", "http_host": "drop.invalid" }),
            ),
            event(
                4,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "tls", "event": 3,
                        "address": "198.18.0.1" }),
            ),
            event(
                9,
                EventKind::NetDns,
                json!({ "name": "api.github.com", "answer": "198.18.0.1" }),
            ),
            event(
                10,
                EventKind::NetDns,
                json!({ "name": "drop.invalid", "answer": "198.18.0.2" }),
            ),
            // GitHub's name written in the hello, sent to another name's address.
            event(
                11,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "tls", "event": 1,
                        "address": "198.18.0.2" }),
            ),
            // … or to an address the chamber never gave (hard-coded).
            event(
                12,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "tls", "event": 1,
                        "address": "203.0.113.7" }),
            ),
            event(
                5,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "boundary", "host": "uploads.github.com" }),
            ),
            event(
                6,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "dns", "name": "x.github.com" }),
            ),
            event(
                7,
                EventKind::CanarySeen,
                json!({ "planted": "env:OPENAI_API_KEY", "where": "tls", "event": 1,
                        "address": "198.18.0.1" }),
            ),
            event(
                8,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "boundary", "host": null }),
            ),
        ];
        mark(&mut events);
        let own: Vec<u64> = events
            .iter()
            .filter(|e| e.data["own_service"] == true)
            .map(|e| e.id)
            .collect();
        assert_eq!(own, [2, 5]);
    }

    /// Regression (held-out precision draw of 2026-12-07, AWS's billing server): an AWS SDK's
    /// signed request inside TLS that the tracer could not link to a request of its own is
    /// named by the chamber's DNS answer for its address; a connection to an address the
    /// chamber never gave is still nobody's service.
    #[test]
    fn an_unlinked_tls_sighting_is_named_by_the_address_it_went_to() {
        let mut events = vec![
            event(
                1,
                EventKind::NetDns,
                json!({ "name": "billingconductor.us-east-1.amazonaws.com", "answer": "198.18.0.7" }),
            ),
            event(
                2,
                EventKind::CanarySeen,
                json!({ "planted": "env:AWS_ACCESS_KEY_ID", "where": "tls", "event": null,
                        "address": "::ffff:198.18.0.7" }),
            ),
            event(
                3,
                EventKind::CanarySeen,
                json!({ "planted": "env:AWS_ACCESS_KEY_ID", "where": "tls", "event": null,
                        "address": "203.0.113.9" }),
            ),
            event(
                4,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN", "where": "tls", "event": null,
                        "address": "198.18.0.7" }),
            ),
        ];
        mark(&mut events);
        let own: Vec<u64> = events
            .iter()
            .filter(|e| e.data["own_service"] == true)
            .map(|e| e.id)
            .collect();
        assert_eq!(own, [2]);
    }
}
