//! Words for the consequence findings, put on the events before the rules run: where a
//! planted secret went (`data.to`: "a DNS query for x.example", "a connection to
//! 203.0.113.7:443 (TLS name api.example)") and when (`data.during`: "start-up", "the install",
//! "call 7 of send_report"), so that a HIGH or CRITICAL finding says its consequence in one
//! sentence a maintainer can check against the evidence it links.
//!
//! Guarantees: only adds fields (`to`, `during`) to `canary.seen` events, opens of decoys and
//! writes, deletes and renames (for the persistence findings);
//! never changes what a rule matches on. Text that came from the server is cut to 200
//! characters and shown with control characters escaped.

use std::collections::HashMap;

use serde_json::{Value, json};
use warden_events::{Event, EventKind};

/// `text` as a finding shows it: at most 200 characters, control characters escaped.
fn shown(text: &str) -> String {
    crate::report::clean(&text.chars().take(200).collect::<String>())
}

/// When an event happened, in words, from its window and the tools of the session's calls.
fn during(window: Option<&str>, tools: &HashMap<String, String>) -> String {
    match window {
        Some("install") => "the install".into(),
        Some("startup") => "start-up".into(),
        Some("dwell") => "the dwell after the last call".into(),
        Some(w) => match (w.strip_prefix("tool_call:"), tools.get(w)) {
            (Some(n), Some(tool)) => format!("call {n} of {}", shown(tool)),
            (Some(n), None) => format!("call {n}"),
            _ => shown(w),
        },
        None => "the session".into(),
    }
}

/// Where a sighting of a canary went, in words; the connection's TLS name or HTTP host from
/// the event the sighting points at, when there is one.
fn to(data: &Value, by_id: &HashMap<u64, &Value>) -> Option<String> {
    let s = |k: &str| data[k].as_str().map(shown);
    match data["where"].as_str()? {
        "dns" => Some(format!("a DNS query for {}", s("name")?)),
        "net" => {
            let linked = data["event"].as_u64().and_then(|id| by_id.get(&id));
            let name = linked.and_then(|e| e["sni"].as_str().or(e["http_host"].as_str()));
            let dest = match (s("address"), data["port"].as_u64()) {
                (Some(a), Some(p)) => format!("a connection to {a}:{p}"),
                (Some(a), None) => format!("a connection to {a}"),
                _ => "a connection".into(),
            };
            Some(match name {
                Some(n) => format!("{dest} (for {})", shown(n)),
                None => dest,
            })
        }
        "boundary" => {
            let proto = s("protocol").unwrap_or_else(|| "network".into());
            let dest = match (s("address"), data["port"].as_u64()) {
                (Some(a), Some(p)) => format!("a {proto} flow to {a}:{p}"),
                (Some(a), None) => format!("a {proto} flow to {a}"),
                _ => format!("a {proto} flow"),
            };
            Some(match s("host") {
                Some(h) => format!("{dest} (for {h})"),
                None => dest,
            })
        }
        "tls" => {
            let linked = data["event"].as_u64().and_then(|id| by_id.get(&id));
            let name = linked.and_then(|e| e["sni"].as_str().or(e["http_host"].as_str()));
            let line = linked.and_then(|e| e["request_line"].as_str());
            let dest = match (s("address"), data["port"].as_u64()) {
                (Some(a), Some(p)) => format!("a TLS connection to {a}:{p}"),
                _ => "a TLS connection".into(),
            };
            let dest = match name {
                Some(n) => format!("{dest} (for {})", shown(n)),
                None => dest,
            };
            Some(match line {
                Some(l) => format!("{dest}, inside the request {}", shown(l)),
                None => dest,
            })
        }
        "file" => Some(format!("the file {}", s("path")?)),
        "argv" => Some(format!(
            "the command line of {}",
            s("path").unwrap_or_else(|| "a program".into())
        )),
        "tool_result" | "output" => Some("a tool's result".into()),
        "error" => Some("an error message".into()),
        "resource" => Some("a resource's content".into()),
        "prompt" => Some("a prompt".into()),
        other => Some(shown(other)),
    }
}

/// Add `to` and `during` to the sightings of canaries and the opens of decoys in `events`.
/// `tools` names the tool of each call window.
pub fn explain(events: &mut [Event], tools: &HashMap<String, String>) {
    let by_id: HashMap<u64, Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::NetSend)
        .map(|e| (e.id, e.data.clone()))
        .collect();
    let refs: HashMap<u64, &Value> = by_id.iter().map(|(k, v)| (*k, v)).collect();
    for e in events.iter_mut() {
        if !matches!(
            e.kind,
            EventKind::CanarySeen
                | EventKind::FileOpen
                | EventKind::FileWrite
                | EventKind::FileDelete
                | EventKind::FileRename
        ) {
            continue;
        }
        if e.kind == EventKind::FileOpen && e.data.get("decoy").is_none() {
            continue;
        }
        // What the harness found in a call's answer is recorded after its window closed, with
        // the call's id.
        let window = e
            .triggered_by
            .clone()
            .or_else(|| e.data["call"].as_u64().map(|c| format!("tool_call:{c}")));
        let when = during(window.as_deref(), tools);
        let whither = (e.kind == EventKind::CanarySeen)
            .then(|| to(&e.data, &refs))
            .flatten();
        if let Some(d) = e.data.as_object_mut() {
            d.insert("during".into(), json!(when));
            if let Some(w) = whither {
                d.insert("to".into(), json!(w));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_event as event;

    #[test]
    fn a_sighting_says_where_the_secret_went_and_when() {
        let tools: HashMap<String, String> =
            [("tool_call:7".to_owned(), "send_report".to_owned())].into();
        let mut events = vec![
            event(
                5,
                EventKind::NetSend,
                Some("tool_call:7"),
                json!({ "sni": "api.example.test" }),
            ),
            event(
                6,
                EventKind::CanarySeen,
                Some("tool_call:7"),
                json!({ "planted": "file:~/.aws/credentials", "where": "net", "address": "203.0.113.7", "port": 443, "event": 5 }),
            ),
            event(
                7,
                EventKind::CanarySeen,
                Some("startup"),
                json!({ "planted": "env:GITHUB_TOKEN", "where": "dns", "name": "x\u{1b}.evil.test" }),
            ),
            event(
                8,
                EventKind::FileOpen,
                Some("install"),
                json!({ "path": "/home/sandbox/.npmrc", "decoy": "file:~/.npmrc" }),
            ),
            event(
                9,
                EventKind::FileOpen,
                Some("install"),
                json!({ "path": "/usr/lib/x" }),
            ),
            event(
                10,
                EventKind::CanarySeen,
                None,
                json!({ "planted": "env:X", "where": "tool_result", "call": 7 }),
            ),
        ];
        explain(&mut events, &tools);
        assert_eq!(
            events[1].data["to"],
            "a connection to 203.0.113.7:443 (for api.example.test)"
        );
        assert_eq!(events[1].data["during"], "call 7 of send_report");
        assert_eq!(events[2].data["to"], "a DNS query for x\\u{1b}.evil.test");
        assert_eq!(events[2].data["during"], "start-up");
        assert_eq!(events[3].data["during"], "the install");
        assert!(
            events[4].data.get("during").is_none(),
            "a plain open gets nothing"
        );
        assert_eq!(events[5].data["during"], "call 7 of send_report");
        assert_eq!(events[5].data["to"], "a tool's result");
    }
}
