//! `warden detonate --mcp-transport http|sse`: servers built on the official Python SDK,
//! started in the jail and reached over Streamable HTTP or legacy HTTP+SSE inside the jail's
//! network namespace. The same malicious server gives the same findings over stdio, http and
//! sse; a careless one (bound to
//! every interface, no Origin check, destructive tools without authentication) gets
//! `exposed_server` findings its stdio twin cannot; a server that never opens its port is
//! INCONCLUSIVE within its start-up budget.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

use super::common::{fixtures, sdk_python, the_binary};

fn detonate(script: &str, mode: &[&str], extra: &[&str]) -> (i32, Value) {
    let command = format!(
        "{} {} {}",
        sdk_python().display(),
        fixtures().join("mcp/http").join(script).display(),
        mode.join(" ")
    );
    let out = Command::new(the_binary())
        .args([
            "detonate",
            "--mcp-command",
            &command,
            "--output",
            "json",
            "--no-payloads",
        ])
        .args(["--call-timeout", "3s"])
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), report)
}

fn http(port: &str) -> Vec<&str> {
    vec!["--mcp-transport", "http", "--mcp-port", port]
}

fn sse(port: &str) -> Vec<&str> {
    vec!["--mcp-transport", "sse", "--mcp-port", port]
}

fn findings(r: &Value) -> BTreeSet<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["tool"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_same_server_is_judged_the_same_over_stdio_and_http() {
    let (_, stdio) = detonate("sdk_thief.py", &["stdio"], &[]);
    let (_, over_http) = detonate("sdk_thief.py", &["http", "8765"], &http("8765"));
    assert_eq!(stdio["verdict"], "HIGH", "{}", stdio["findings"]);
    assert_eq!(over_http["verdict"], stdio["verdict"]);
    assert_eq!(findings(&over_http), findings(&stdio));
    assert_eq!(over_http["harness"]["transport"]["kind"], "http");
    assert_eq!(over_http["harness"]["calls"], stdio["harness"]["calls"]);
    // Loopback only, and the SDK's DNS-rebinding protection answers 421: nothing exposed.
    let surface = over_http["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "mcp.http_surface")
        .unwrap();
    assert_eq!(
        surface["data"]["listening"],
        serde_json::json!(["127.0.0.1"])
    );
    assert_eq!(surface["data"]["foreign_origin_accepted"], false);
    assert!(
        !over_http["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["category"] == "exposed_server")
    );
    let schema = fixtures().join("../schemas/warden.report.v1.json");
    super::detonate::assert_valid(&schema, &over_http);
    // Legacy HTTP+SSE: the same again.
    let (_, over_sse) = detonate("sdk_thief.py", &["sse", "8768"], &sse("8768"));
    assert_eq!(over_sse["harness"]["transport"]["kind"], "sse");
    assert_eq!(over_sse["harness"]["transport"]["path"], "/sse");
    assert_eq!(findings(&over_sse), findings(&stdio));
}

#[test]
fn a_careless_http_server_is_found_exposed() {
    let (_, r) = detonate("careless.py", &["http", "8766"], &http("8766"));
    let rules: BTreeSet<String> = findings(&r).into_iter().map(|(rule, _)| rule).collect();
    for want in [
        "exposed-server-wildcard",
        "exposed-server-rebinding",
        "exposed-server-unauthenticated",
        "destructive-tool",
    ] {
        assert!(rules.contains(want), "{want} in {rules:?}");
    }
    // Over legacy SSE: where it listens and what it offers unauthenticated are judged too.
    let (_, r) = detonate("careless.py", &["sse", "8769"], &sse("8769"));
    let rules: BTreeSet<String> = findings(&r).into_iter().map(|(rule, _)| rule).collect();
    assert!(rules.contains("exposed-server-wildcard"), "{rules:?}");
    assert!(
        rules.contains("exposed-server-unauthenticated"),
        "{rules:?}"
    );
    // Its stdio twin has no HTTP surface to judge.
    let (_, twin) = detonate("careless.py", &["stdio"], &[]);
    let twin_rules: BTreeSet<String> = findings(&twin).into_iter().map(|(rule, _)| rule).collect();
    assert_eq!(twin_rules, BTreeSet::from(["destructive-tool".to_owned()]));
}

#[test]
fn a_server_that_never_listens_is_inconclusive_within_its_budget() {
    let begun = std::time::Instant::now();
    let (code, r) = detonate("never_listens.py", &[], &http("8767"));
    assert_eq!(code, 3);
    assert_eq!(r["verdict"], "INCONCLUSIVE");
    let why = r["why"]["reason"].as_str().unwrap();
    assert!(why.contains("never listened on port 8767"), "{why}");
    assert!(begun.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn transports_that_make_no_sense_are_refused() {
    for args in [
        vec!["--mcp-transport", "http"],
        vec!["--mcp-transport", "sse"],
        vec!["--mcp-transport", "stdio", "--mcp-path", "/x"],
        vec!["--mcp-port", "8000"],
        vec![
            "--mcp-transport",
            "http",
            "--mcp-port",
            "8000",
            "--mcp-path",
            "mcp",
        ],
    ] {
        let out = Command::new(the_binary())
            .args(["detonate", "--mcp-command", "python3 x.py"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_server_that_serves_http_without_being_told_is_found_on_its_port() {
    let (_, stdio) = detonate("sdk_thief.py", &["stdio"], &[]);
    for (mode, kind) in [("http", "http"), ("sse", "sse")] {
        // No --mcp-transport: started as a stdio server, silent on stdout, listening on 8772.
        let (_, r) = detonate("sdk_thief.py", &[mode, "8772"], &[]);
        assert_eq!(
            r["harness"]["transport"]["detected"], true,
            "{}",
            r["harness"]
        );
        assert_eq!(r["harness"]["transport"]["kind"], kind);
        assert_eq!(r["harness"]["transport"]["port"], 8772);
        assert_eq!(findings(&r), findings(&stdio), "{mode}");
        assert!(r["why"].is_null(), "{}", r["why"]);
    }
}

/// Issue #31: a server with a port of its own that is not MCP (a metrics listener answering
/// 404) besides its Streamable HTTP one: every port of the server is tried in turn, and the
/// report says why the transport was switched.
#[test]
fn every_port_of_the_server_is_tried_and_the_choice_explained() {
    let (_, r) = detonate("sdk_thief.py", &["http-behind", "8774", "8700"], &[]);
    assert!(r["why"].is_null(), "{}", r["why"]);
    let t = &r["harness"]["transport"];
    assert_eq!(t["detected"], true, "{t}");
    assert_eq!(t["port"], 8774, "{t}");
    assert!(
        t["why"].as_str().unwrap().contains("listens on port 8774"),
        "{t}"
    );
    let tried: Vec<u64> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "mcp.timing" && e["data"]["phase"] == "transport_detection")
        .filter_map(|e| e["data"]["port"].as_u64())
        .collect();
    assert_eq!(
        tried.first(),
        Some(&8700),
        "the metrics port first: {tried:?}"
    );
    assert_eq!(tried.last(), Some(&8774), "{tried:?}");
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server on the host's loopback, killed on drop.
struct Host(std::process::Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn listening(port: u16) -> bool {
    super::common::eventually(20, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
}

fn probe(url: &str, extra: &[&str]) -> (i32, Value) {
    let out = Command::new(the_binary())
        .args([
            "detonate",
            "--mcp-url",
            url,
            "--output",
            "json",
            "--call-timeout",
            "5s",
        ])
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn a_remote_probe_reports_tools_and_never_claims_behaviour() {
    // `warden serve --http` itself, on loopback, as the remote server.
    let port = free_port();
    let state = tempfile::tempdir().unwrap();
    let serve = Host(
        Command::new(the_binary())
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .env("TMPDIR", state.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(listening(port));
    let (_, r) = probe(&format!("http://127.0.0.1:{port}/mcp"), &[]);
    drop(serve);
    assert_eq!(r["mode"], "probe");
    assert!(r["tools"].as_array().unwrap().len() >= 10, "{}", r["tools"]);
    assert_eq!(
        r["harness"]["payloads"], false,
        "no payloads without --allow-payloads-remote"
    );
    assert_ne!(r["verdict"], "PASS");
    let kinds: BTreeSet<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds
            .iter()
            .all(|k| k.starts_with("mcp.") || *k == "harness.payload"),
        "no behavioural claims about a remote server: {kinds:?}"
    );
    let schema = fixtures().join("../schemas/warden.report.v1.json");
    super::detonate::assert_valid(&schema, &r);

    // A benign remote server: no findings, and still no PASS.
    let port = free_port();
    let _benign = Host(
        Command::new(sdk_python())
            .arg(fixtures().join("mcp/http/benign_http.py"))
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(listening(port));
    let (code, r) = probe(&format!("http://127.0.0.1:{port}/mcp"), &[]);
    assert_eq!(r["verdict"], "INCONCLUSIVE", "{}", r["findings"]);
    assert_eq!(r["why"]["stage"], "probe");
    assert!(
        r["why"]["reason"]
            .as_str()
            .unwrap()
            .contains("no findings in what could be observed")
    );
    assert_eq!(code, 3);
    assert!(r["harness"]["calls"].as_u64().unwrap() >= 1);
}

#[test]
fn probe_flags_that_make_no_sense_are_refused() {
    for args in [
        vec![
            "--mcp-url",
            "http://127.0.0.1:9/mcp",
            "--mcp-command",
            "python3 x.py",
        ],
        vec!["--mcp-url", "http://user:pw@127.0.0.1:9/mcp"],
        vec!["--mcp-url", "ftp://127.0.0.1/mcp"],
        vec![
            "--mcp-url",
            "http://127.0.0.1:9/mcp",
            "--header",
            "bad header=x",
        ],
        vec![
            "--mcp-url",
            "http://127.0.0.1:9/mcp",
            "--bearer-env",
            "WARDEN_NO_SUCH_VARIABLE",
        ],
        vec!["--mcp-command", "python3 x.py", "--header", "A=b"],
    ] {
        let out = Command::new(the_binary())
            .arg("detonate")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn an_express_server_on_the_typescript_sdk_is_judged_in_every_transport() {
    // The real servers' node_modules (the TypeScript SDK, express, zod) beside the fixture,
    // in the workspace the jail mounts at /workspace.
    let ws = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(super::common::real_servers().join("node/node_modules"))
        .arg(fixtures().join("mcp/http/express_thief.js"))
        .arg(ws.path())
        .status()
        .unwrap();
    assert!(status.success());
    let run = |mode: &[&str], extra: &[&str]| -> Value {
        let command = format!("node /workspace/express_thief.js {}", mode.join(" "));
        let out = Command::new(the_binary())
            .args(["detonate", "--workspace", ws.path().to_str().unwrap()])
            .args([
                "--mcp-command",
                &command,
                "--output",
                "json",
                "--no-payloads",
            ])
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let rules =
        |r: &Value| -> BTreeSet<String> { findings(r).into_iter().map(|(rule, _)| rule).collect() };
    let stdio = rules(&run(&["stdio"], &[]));
    assert!(
        stdio.contains("canary-in-output") && stdio.contains("sensitive-file-read"),
        "{stdio:?}"
    );
    let exposed = |r: &BTreeSet<String>| -> BTreeSet<String> {
        r.iter()
            .filter(|x| x.starts_with("exposed-server"))
            .cloned()
            .collect()
    };
    let over_http = rules(&run(&["http", "8780"], &http("8780")));
    assert!(stdio.is_subset(&over_http), "{stdio:?} {over_http:?}");
    assert_eq!(
        exposed(&over_http),
        BTreeSet::from([
            "exposed-server-rebinding".to_owned(),
            "exposed-server-unauthenticated".to_owned(),
            "exposed-server-wildcard".to_owned()
        ])
    );
    let over_sse = rules(&run(&["sse", "8781"], &sse("8781")));
    assert!(stdio.is_subset(&over_sse), "{stdio:?} {over_sse:?}");
    assert!(over_sse.contains("exposed-server-wildcard"), "{over_sse:?}");
}
