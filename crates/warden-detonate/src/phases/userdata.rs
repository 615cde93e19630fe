//! The user's own data, followed out: every sighting of the argument canary (the marker the
//! harness puts in the free text it gives tools as the user's) is marked, before the rules run,
//! with the tool and the arguments that carried it (`data.argument`: `add.note`), the host it
//! went to (`data.host`) and whether anything the user was shown names that host
//! (`data.disclosed`): the tools' names and descriptions, the server's name and instructions,
//! the target as given and its configuration (command line, environment). A tracker or a
//! hidden recipient is a host none of them names (`user-data-undisclosed`, high); the API a
//! search tool says it queries is one they name (`user-data-disclosed`, info). A host that is
//! the only one a credential the operator configured (`--env Z_AI_API_KEY=…`, watched as
//! `arg:cfg:Z_AI_API_KEY`) went to in the run is the service of the user's own account
//! (`data.with_credential` names the variable; `user-data-to-account`, low): a vendor's
//! backend under another domain (`open.bigmodel.cn` for Z.AI) is not a third party.
//!
//! Guarantees: only sightings of the argument canary are touched (the planted secrets keep
//! their own rules); a sighting on the sandbox's own loopback (the harness talking to an HTTP
//! server, a server's own local service) gets no `disclosed` and so no network finding. A host
//! counts as named when its registrable label (`metrics` of `collect.metrics.test`; `example`
//! of `api.example.co.uk`) is written in that text, squashed of spaces and punctuation, or a
//! word of the text of five letters or more begins it (`OpenWeather` names
//! `api.openweathermap.org`), or, for a label of three letters or fewer, a word of the text
//! is exactly it; an address literal counts as named when written whole.

use std::collections::HashMap;
use std::net::IpAddr;

use serde_json::{Value, json};
use warden_events::{Event, EventKind};

/// What the user was shown of the server: its tools, its words, its configuration.
#[derive(Debug, Default)]
pub struct Shown {
    /// All of it, lower-cased.
    text: String,
}

impl Shown {
    /// From the listed `tools` (name and description), the server's `name` and
    /// `instructions`, and `config` (the target, its command line and environment).
    pub fn new(
        tools: &[Value],
        name: Option<&str>,
        instructions: Option<&str>,
        config: &[String],
    ) -> Shown {
        let mut text = String::new();
        for t in tools {
            for k in ["name", "title", "description"] {
                if let Some(s) = t[k].as_str() {
                    text.push_str(s);
                    text.push('\n');
                }
            }
        }
        for s in name.into_iter().chain(instructions) {
            text.push_str(s);
            text.push('\n');
        }
        for s in config {
            text.push_str(s);
            text.push('\n');
        }
        Shown {
            text: text.to_lowercase(),
        }
    }

    /// Whether `host` (a name or an address) is named in what the user was shown: the name
    /// or its registered domain written out, or its registered label as a word, or as two or
    /// three words run together ("Open Weather Map"), or begun by a word of six letters or
    /// more that covers seven tenths of it ("OpenWeather" names `openweathermap.org`,
    /// "Datadog" `datadoghq.com`), or a vendor's API domain by the vendor. A label of
    /// three letters or fewer counts as a word only when it is no common English word; an
    /// address counts only written whole.
    pub fn names(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_lowercase();
        if host.parse::<IpAddr>().is_ok() {
            return self.text.contains(&host);
        }
        let label_raw = registrable(&host);
        let domain = host.find(label_raw).map_or(host.as_str(), |at| &host[at..]);
        if self.text.contains(&host) || (domain.contains('.') && self.text.contains(domain)) {
            return true;
        }
        let label = label_raw.replace(|c: char| !c.is_ascii_alphanumeric(), "");
        if label.is_empty() {
            return false;
        }
        // A vendor's API domain is named by the vendor (Google Maps' `maps.googleapis.com`).
        if let Some((_, names)) = VENDORS.iter().find(|(domains, _)| {
            domains
                .iter()
                .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
        }) {
            let words: Vec<&str> = self
                .text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .collect();
            if names.iter().any(|n| words.contains(n)) {
                return true;
            }
        }
        let words: Vec<&str> = self
            .text
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        if label.len() <= 3 {
            return !COMMON.contains(&label.as_str()) && words.contains(&label.as_str());
        }
        let joined = |n: usize| words.windows(n).any(|w| w.concat() == label);
        words.contains(&label.as_str())
            || joined(2)
            || joined(3)
            || words
                .iter()
                .any(|w| w.len() >= 6 && label.starts_with(w) && w.len() * 10 >= label.len() * 7)
    }
}

/// Vendors whose APIs live on a domain that is not their product's name: (domains, the words
/// that name the vendor).
const VENDORS: &[(&[&str], &[&str])] = &[
    (
        &["googleapis.com", "google.com", "gstatic.com"],
        &["google", "gemini", "youtube", "gmail"],
    ),
    (&["amazonaws.com", "amazon.com"], &["aws", "amazon"]),
    (
        &[
            "azure.com",
            "azure.net",
            "windows.net",
            "microsoft.com",
            "microsoftonline.com",
            "office.com",
        ],
        &[
            "azure",
            "microsoft",
            "onedrive",
            "outlook",
            "sharepoint",
            "teams",
            "office",
        ],
    ),
    (
        &["atlassian.net", "atlassian.com"],
        &["jira", "confluence", "atlassian", "bitbucket"],
    ),
    (&["githubusercontent.com", "github.com"], &["github"]),
    (&["slack.com"], &["slack"]),
    // Ant Group's AntV charts render on its own servers.
    (
        &["alipay.com", "antgroup.com"],
        &["antv", "alipay", "antgroup"],
    ),
];

/// Short English words that a three-letter host label must not be named by.
const COMMON: &[&str] = &[
    "a", "an", "as", "at", "be", "by", "do", "go", "if", "in", "is", "it", "me", "my", "no", "of",
    "on", "or", "so", "to", "up", "us", "we", "add", "all", "and", "any", "api", "app", "are",
    "ask", "can", "day", "for", "get", "has", "how", "its", "key", "log", "map", "max", "min",
    "new", "not", "now", "one", "our", "out", "own", "per", "put", "raw", "row", "run", "see",
    "set", "tag", "the", "top", "two", "use", "via", "was", "web", "who", "why", "you",
];

/// The label a name is registered under: the one before the public suffix, taken to be the
/// last label, or the last two when the one before it is a short generic second level
/// (`co.uk`, `com.au`).
fn registrable(host: &str) -> &str {
    let labels: Vec<&str> = host.split('.').filter(|l| !l.is_empty()).collect();
    let generic = ["co", "com", "net", "org", "gov", "ac", "edu", "ne", "or"];
    let skip = match labels.as_slice() {
        [.., second, last] if labels.len() >= 3 && last.len() == 2 && generic.contains(second) => 2,
        _ => 1,
    };
    labels
        .len()
        .checked_sub(skip + 1)
        .map_or(host, |i| labels[i])
}

fn loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|a| a.is_loopback() || a.is_unspecified())
}

/// The host a sighting went to: the name the chamber's DNS answered for its address (on the
/// sighting, the connection it points at, or any answer the chamber gave for that address),
/// or the name a DNS query asked for, else the address. Never the client's own TLS name or
/// `Host` header: a program that connects to an address of its choosing can write any name
/// there.
fn host_of(
    data: &Value,
    by_id: &HashMap<u64, Value>,
    answered: &super::answers::Answers,
) -> Option<String> {
    let linked = data["event"].as_u64().and_then(|id| by_id.get(&id));
    let pick = |v: &Value| {
        ["host", "name"]
            .iter()
            .find_map(|k| v[*k].as_str().filter(|s| !s.is_empty()).map(str::to_owned))
    };
    pick(data).or_else(|| linked.and_then(pick)).or_else(|| {
        let address = data["address"].as_str()?;
        Some(
            answered
                .name(address)
                .map_or_else(|| address.to_owned(), str::to_owned),
        )
    })
}

/// The names of the arguments of a call (`arguments` as recorded) carrying `marker`, nested
/// ones as `a.b`.
fn carrying(arguments: &Value, marker: &str, prefix: &str, out: &mut Vec<String>) {
    match arguments {
        Value::Object(m) => {
            for (k, v) in m {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                carrying(v, marker, &name, out);
            }
        }
        Value::Array(a) => {
            for v in a {
                carrying(v, marker, prefix, out);
            }
        }
        Value::String(s) if s.contains(marker) && !out.iter().any(|o| o == prefix) => {
            out.push(prefix.to_owned());
        }
        _ => {}
    }
}

/// Where the credentials the operator configured went: each host that is the only host one
/// of them was sent to in the whole run (beyond loopback), with that credential's name. The
/// user's data sent there went with the user's own credential to the one service it is used
/// on: the account the user configured. A credential sent to two hosts names neither (a
/// server that uses the key on its service and copies it to a collector keeps its high).
fn accounts(
    events: &[Event],
    by_id: &HashMap<u64, Value>,
    answered: &super::answers::Answers,
) -> HashMap<String, String> {
    let mut hosts: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for e in events {
        let Some(name) = e.data["planted"]
            .as_str()
            .and_then(|p| p.strip_prefix(warden_jail::warden_trace::decoys::CONFIGURED))
        else {
            continue;
        };
        let network = leaving(&e.data);
        if e.kind != EventKind::CanarySeen || !network {
            continue;
        }
        if let Some(h) = host_of(&e.data, by_id, answered).filter(|h| !loopback(h)) {
            hosts.entry(name.to_owned()).or_default().insert(h);
        }
    }
    let mut out = HashMap::new();
    for (name, set) in hosts {
        if set.len() == 1
            && let Some(only) = set.into_iter().next()
        {
            out.entry(only).or_insert(name);
        }
    }
    out
}

/// Whether a sighting is of bytes leaving the sandbox (a DNS name, a connection, a flow at the
/// boundary, inside TLS).
fn leaving(data: &Value) -> bool {
    matches!(
        data["where"].as_str(),
        Some("dns" | "net" | "boundary" | "tls")
    )
}

/// Mark the sightings of the argument canary in `events` (see the module's documentation);
/// `tools` names the tool of each call window.
pub fn mark(events: &mut [Event], tools: &HashMap<String, String>, shown: &Shown) {
    let marker = events
        .iter()
        .find(|e| e.kind == EventKind::SandboxStarted)
        .and_then(|e| e.data["canaries"].as_array())
        .and_then(|list| {
            list.iter()
                .find(|c| c["planted"] == warden_jail::warden_trace::decoys::ARGUMENT)
        })
        .and_then(|c| c["value"].as_str())
        .map(str::to_owned);
    let Some(marker) = marker else { return };
    let by_id: HashMap<u64, Value> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::NetSend | EventKind::NetConnect | EventKind::NetDns
            ) || e.kind == EventKind::McpToolCall
        })
        .map(|e| (e.id, e.data.clone()))
        .collect();
    let answered = super::answers::Answers::of(events);
    let accounts = accounts(events, &by_id, &answered);
    for e in events.iter_mut() {
        if e.kind != EventKind::CanarySeen
            || e.data["planted"] != warden_jail::warden_trace::decoys::ARGUMENT
        {
            continue;
        }
        let window = e.triggered_by.clone();
        let tool = window.as_deref().and_then(|w| tools.get(w)).cloned();
        let mut names = Vec::new();
        if let Some(call) = window
            .as_deref()
            .and_then(|w| w.strip_prefix("tool_call:"))
            .and_then(|id| id.parse::<u64>().ok())
            .and_then(|id| by_id.get(&id))
        {
            carrying(&call["arguments"], &marker, "", &mut names);
        }
        let argument = match (&tool, names.is_empty()) {
            (Some(t), false) => names
                .iter()
                .map(|n| format!("{t}.{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            (Some(t), true) => t.clone(),
            (None, _) => "a tool".to_owned(),
        };
        let network = leaving(&e.data);
        let host = network
            .then(|| host_of(&e.data, &by_id, &answered))
            .flatten();
        let Some(d) = e.data.as_object_mut() else {
            continue;
        };
        d.insert("argument".into(), json!(crate::report::clean(&argument)));
        if let Some(t) = tool {
            d.insert("tool".into(), json!(t));
        }
        if let Some(h) = host {
            if !loopback(&h) {
                d.insert("disclosed".into(), json!(shown.names(&h)));
                if let Some(name) = accounts.get(&h) {
                    d.insert("with_credential".into(), json!(name));
                }
            }
            d.insert("host".into(), json!(crate::report::clean(&h)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(description: &str, config: &[&str]) -> Shown {
        let config: Vec<String> = config.iter().map(|s| (*s).to_owned()).collect();
        Shown::new(
            &[json!({ "name": "search", "description": description })],
            Some("demo-server"),
            None,
            &config,
        )
    }

    #[test]
    fn a_host_is_named_by_its_registrable_label() {
        // Found by review: names the attacker's own words make up do not count.
        let docs = shown("Search the docs. Use this tool for anything.", &[]);
        assert!(!docs.names("searchanalytics.test"), "a prefix word");
        assert!(!docs.names("docssearch.test"), "across words");
        assert!(!docs.names("use.test"), "a common short word");
        let s = shown("Search the web with the Brave Search API.", &[]);
        assert!(s.names("api.search.brave.com"));
        assert!(!s.names("collect.metrics-hub.test"));
        let w = shown("Current weather from OpenWeather.", &[]);
        assert!(w.names("api.openweathermap.org"), "a word begins the label");
        let exa = shown("Search using Exa AI", &[]);
        assert!(exa.names("api.exa.ai"), "a short label as a word");
        assert!(!shown("Search the example corpus", &[]).names("api.exa.ai"));
        assert!(shown("Datadog monitors", &[]).names("api.datadoghq.com"));
        let maps = shown("Geocode an address with Google Maps.", &[]);
        assert!(maps.names("maps.googleapis.com"), "a vendor's API domain");
        assert!(!docs.names("maps.googleapis.com"));
        let chart = shown("Generate a line chart using AntV.", &[]);
        assert!(chart.names("antv-studio.alipay.com"));
        assert!(!docs.names("antv-studio.alipay.com"));
        let uk = shown("Talks to Example Ltd", &[]);
        assert!(uk.names("api.example.co.uk"));
        let cfg = shown("Vector store", &["QDRANT_URL=http://qdrant.invalid:6333"]);
        assert!(cfg.names("qdrant.invalid"), "the configuration names it");
        assert!(!cfg.names("203.0.113.9"));
        assert!(shown("Posts to 203.0.113.9", &[]).names("203.0.113.9"));
    }

    use crate::test_event as event;

    #[test]
    fn a_sighting_names_the_tool_the_argument_and_the_host() {
        let m = "Q7x2Lm9PzR4tVb8NcK3w";
        let mut events = vec![
            event(
                1,
                EventKind::SandboxStarted,
                None,
                json!({ "canaries": [{ "planted": "env:X", "value": "zzz" }, { "planted": "arg:user", "value": m }] }),
            ),
            event(
                4,
                EventKind::McpToolCall,
                None,
                json!({ "tool": "add", "arguments": { "a": 1, "note": m, "tags": [m] } }),
            ),
            event(
                5,
                EventKind::NetSend,
                Some("tool_call:4"),
                json!({ "host": "collect.metrics-hub.test", "sni": "api.search.brave.com" }),
            ),
            event(
                6,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": "arg:user", "where": "tls", "address": "10.255.0.7", "port": 443, "event": 5 }),
            ),
            event(
                7,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": "arg:user", "where": "net", "address": "127.0.0.1", "port": 8080 }),
            ),
            event(
                8,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": "env:X", "where": "net", "address": "203.0.113.1", "port": 80 }),
            ),
            event(
                9,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": "arg:user", "where": "dns", "name": "x.search.brave.com" }),
            ),
            event(
                10,
                EventKind::NetDns,
                Some("tool_call:4"),
                json!({ "name": "api.search.brave.com", "answer": "198.18.0.9" }),
            ),
            event(
                11,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": "arg:user", "where": "tls", "address": "198.18.0.9", "port": 443 }),
            ),
        ];
        let tools: HashMap<String, String> = [("tool_call:4".to_owned(), "add".to_owned())].into();
        mark(
            &mut events,
            &tools,
            &shown("Adds numbers; search with Brave", &[]),
        );
        let d = &events[3].data;
        assert_eq!(d["argument"], "add.note, add.tags");
        assert_eq!(d["host"], "collect.metrics-hub.test");
        assert_eq!(d["disclosed"], false);
        assert!(
            events[4].data.get("disclosed").is_none(),
            "loopback is no leaving"
        );
        assert!(
            events[5].data.get("argument").is_none(),
            "secrets untouched"
        );
        assert_eq!(events[6].data["disclosed"], true);
        // Only the address on the sighting: the chamber's answer names it.
        assert_eq!(events[8].data["host"], "api.search.brave.com");
        assert_eq!(events[8].data["disclosed"], true);
    }

    #[test]
    fn the_host_a_configured_credential_alone_went_to_is_the_users_account() {
        let m = "Q7x2Lm9PzR4tVb8NcK3w";
        let seen = |id, planted: &str, host: &str| {
            event(
                id,
                EventKind::CanarySeen,
                Some("tool_call:4"),
                json!({ "planted": planted, "where": "tls", "host": host, "port": 443 }),
            )
        };
        let run = |extra: Vec<Event>| {
            let mut events = vec![
                event(
                    1,
                    EventKind::SandboxStarted,
                    None,
                    json!({ "canaries": [{ "planted": "arg:user", "value": m }, { "planted": "arg:cfg:Z_AI_API_KEY", "value": "" }] }),
                ),
                event(
                    4,
                    EventKind::McpToolCall,
                    None,
                    json!({ "tool": "ask", "arguments": { "prompt": m } }),
                ),
                seen(5, "arg:user", "open.bigmodel.cn"),
                seen(6, "arg:cfg:Z_AI_API_KEY", "open.bigmodel.cn"),
            ];
            events.extend(extra);
            let tools: HashMap<String, String> =
                [("tool_call:4".to_owned(), "ask".to_owned())].into();
            mark(&mut events, &tools, &shown("Ask Z.AI's vision model", &[]));
            events
        };
        let events = run(vec![]);
        assert_eq!(events[2].data["disclosed"], false);
        assert_eq!(events[2].data["with_credential"], "Z_AI_API_KEY");
        assert!(
            events[3].data.get("argument").is_none(),
            "the credential's own sighting is not the user's data"
        );
        // The key copied to a second host too: neither is the account.
        let events = run(vec![seen(7, "arg:cfg:Z_AI_API_KEY", "collect.test")]);
        assert!(events[2].data.get("with_credential").is_none());
        // Data to a host the key never went to.
        let events = run(vec![seen(7, "arg:user", "collect.test")]);
        assert_eq!(events[2].data["with_credential"], "Z_AI_API_KEY");
        assert!(events[4].data.get("with_credential").is_none());
    }
}
