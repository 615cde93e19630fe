//! `warden detonate` against the fixture servers (`fixtures/mcp/servers`): each malicious or
//! vulnerable one is caught for what it does, the benign one passes, every finding's evidence
//! points at events of the report, and the CI gate and the SARIF output work. Every run is
//! wrapped in `unshare --net`: the thief names a TEST-NET address and `.invalid` hosts.

use serde_json::{Value, json};

use super::common::*;

/// `unshare --net warden detonate --mcp-command "python3 <fixture>" ARGS`: exit status, report.
pub fn detonate(fixture: &str, args: &[&str]) -> (i32, String, String) {
    let script = fixtures().join("mcp/servers").join(fixture);
    let interpreter = if fixture.ends_with(".js") {
        "node"
    } else {
        "python3"
    };
    let command = format!("{interpreter} {}", script.display());
    let mut all = vec!["--net", warden_bin(), "detonate", "--mcp-command", &command];
    all.extend_from_slice(args);
    let out = std::process::Command::new("unshare")
        .args(&all)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("unshare runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Validate `doc` against the JSON Schema in `schema_file`.
pub fn assert_valid(schema_file: &std::path::Path, doc: &Value) {
    let errors = schema_errors(schema_file, doc);
    assert!(errors.is_empty(), "{}: {errors:#?}", schema_file.display());
}

/// What the JSON Schema in `schema_file` finds wrong with `doc`.
pub fn schema_errors(schema_file: &std::path::Path, doc: &Value) -> Vec<String> {
    let text = std::fs::read_to_string(schema_file)
        .unwrap_or_else(|e| panic!("{}: {e}", schema_file.display()));
    // The upstream SARIF 2.1.0 schema has one pattern that is not a valid regex (a stray `]`
    // in `run.language`); the validator checks patterns, so that one character is dropped.
    let text = text.replace("[a-zA-Z]{2}]?$", "[a-zA-Z]{2}$");
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(10)
        .collect()
}

/// The official SARIF 2.1.0 schema (shipped in @microsoft/jest-sarif, installed by
/// fixtures/real/install.sh).
pub fn sarif_schema() -> std::path::PathBuf {
    let servers =
        std::env::var("WARDEN_REAL_SERVERS").unwrap_or_else(|_| "/opt/warden-real-servers".into());
    std::path::Path::new(&servers)
        .join("node/node_modules/@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json")
}

fn json_report(fixture: &str) -> Value {
    let (code, out, err) = detonate(fixture, &["--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let schema = fixtures().join("../schemas/warden.report.v1.json");
    assert_valid(&schema, &report);
    let mut broken = report.clone();
    broken["verdict"] = "MAYBE".into();
    assert!(
        !schema_errors(&schema, &broken).is_empty(),
        "the schema check can fail"
    );
    report
}

fn categories(r: &Value) -> Vec<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["category"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every finding's evidence names events that exist in the report.
fn evidence_exists(r: &Value) {
    let ids: std::collections::HashSet<u64> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    for f in r["findings"].as_array().unwrap() {
        let ev = f["evidence"].as_array().unwrap();
        assert!(!ev.is_empty(), "{f}");
        for id in ev {
            assert!(
                ids.contains(&id.as_u64().unwrap()),
                "evidence {id} of {f} is not an event"
            );
        }
    }
}

#[test]
pub fn a_credential_thief_is_critical() {
    let r = json_report("thief.py");
    assert_eq!(r["schema"], "warden.report/v1");
    assert_eq!(r["mode"], "fast");
    assert_eq!(r["verdict"], "CRITICAL");
    assert!(r["score"].as_u64().unwrap() >= 80);
    let c = categories(&r);
    for (cat, sev) in [
        ("data_exfiltration", "critical"),
        // The decoy read and its secret leaving, as one chain (decoy-read-and-exposed).
        ("sensitive_file_read", "high"),
        // A shell in a tool call is a shape: command tools start shells too.
        ("shell_exec", "medium"),
        ("outbound_network", "medium"),
        ("suspicious_dns", "medium"),
        ("credential_access", "medium"),
    ] {
        assert!(
            c.contains(&(cat.into(), sev.into())),
            "{cat}/{sev} missing from {c:?}"
        );
    }
    // Nothing it does not do.
    for absent in [
        "command_injection",
        "tool_poisoning",
        "rug_pull",
        "sandbox_violation",
    ] {
        assert!(!c.iter().any(|(x, _)| x == absent), "{absent} in {c:?}");
    }
    evidence_exists(&r);
    let exfil = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "canary-leaving")
        .unwrap();
    assert_eq!(exfil["tool"], "weather");
    // The evidence is the kernel's and the sink's, attributed to a call of that tool.
    let first = exfil["evidence"][0].as_u64().unwrap();
    let event = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == first)
        .unwrap();
    assert_eq!(event["kind"], "canary.seen");
    assert!(
        event["triggered_by"]
            .as_str()
            .unwrap()
            .starts_with("tool_call:")
    );
    assert_eq!(r["tools"][0]["name"], "weather");
    assert!(r["harness"]["calls"].as_u64().unwrap() >= 1);
}

#[test]
pub fn a_vulnerable_server_is_caught_by_its_payloads() {
    // The same two flaws, in Python and in Node.
    for fixture in ["vulnerable.py", "vulnerable.js"] {
        let r = json_report(fixture);
        let f = r["findings"].as_array().unwrap();
        let ci = f
            .iter()
            .find(|f| f["category"] == "command_injection")
            .expect("command injection");
        assert_eq!(ci["tool"], "ping");
        assert_eq!(ci["severity"], "critical");
        let pt = f
            .iter()
            .find(|f| f["rule"] == "path-traversal")
            .expect("path traversal");
        assert_eq!(pt["tool"], "read_note");
        assert_eq!(pt["severity"], "high");
        // check_theme opens what it is given and shows nothing of it: a reach, not an exposure.
        if fixture == "vulnerable.py" {
            let reach = f
                .iter()
                .find(|f| f["rule"] == "path-reach")
                .expect("path reach");
            assert_eq!(reach["tool"], "check_theme");
            assert_eq!(reach["severity"], "medium");
            assert!(
                !f.iter()
                    .any(|x| x["rule"] == "path-traversal" && x["tool"] == "check_theme")
            );
        }
        // read_note is not injectable, ping does not traverse.
        assert!(
            !f.iter()
                .any(|x| x["category"] == "command_injection" && x["tool"] == "read_note")
        );
        assert!(
            !f.iter()
                .any(|x| x["category"] == "path_traversal" && x["tool"] == "ping")
        );
        evidence_exists(&r);
    }
}

#[test]
pub fn poisoned_metadata_and_a_rug_pull_are_caught() {
    let r = json_report("poisoned.py");
    let c = categories(&r);
    assert!(
        c.contains(&("tool_poisoning".into(), "high".into())),
        "{c:?}"
    );
    // The add tool's new description asks for no harm: a changed listing is a shape.
    assert!(c.contains(&("rug_pull".into(), "medium".into())), "{c:?}");
    let poison = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["category"] == "tool_poisoning")
        .unwrap();
    for marker in ["instruction_block", "invisible_unicode", "secret_path"] {
        assert!(
            poison["message"].as_str().unwrap().contains(marker),
            "{poison}"
        );
    }
    // The multiply tool's description gives orders about another server's send_email tool.
    let shadow = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["category"] == "tool_poisoning" && f["tool"] == "multiply")
        .expect("shadowing is tool poisoning");
    assert!(
        shadow["message"].as_str().unwrap().contains("shadowing"),
        "{shadow}"
    );
    assert!(
        !shadow["message"]
            .as_str()
            .unwrap()
            .contains("instruction_block"),
        "{shadow}"
    );
    evidence_exists(&r);

    // Node: the same metadata checks.
    let r = json_report("poisoned.js");
    let rows: Vec<(String, String)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["category"] == "tool_poisoning")
        .map(|f| {
            (
                f["tool"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        rows.iter()
            .any(|(t, m)| t == "add" && m.contains("instruction_block")),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|(t, m)| t == "multiply" && m.contains("shadowing")),
        "{rows:?}"
    );
}

#[test]
pub fn a_benign_server_passes_and_its_calls_are_accepted() {
    let r = json_report("benign_echo.py");
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert!(r["findings"].as_array().unwrap().is_empty());
    assert_eq!(r["harness"]["benign_calls"], 2);
    assert_eq!(r["harness"]["benign_accepted"], 2);
    assert_eq!(r["tools"].as_array().unwrap().len(), 2);
}

#[test]
pub fn the_ci_gate_sarif_and_the_timeline() {
    let (code, out, err) = detonate(
        "thief.py",
        &["--output", "sarif", "--fail-on", "high", "--no-payloads"],
    );
    assert_eq!(code, 1, "--fail-on high trips on a critical finding: {err}");
    let sarif: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let official = sarif_schema();
    assert_valid(&official, &sarif);
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(
        !schema_errors(&official, &broken).is_empty(),
        "the schema check can fail"
    );
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "warden");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    for result in run["results"].as_array().unwrap() {
        let index = usize::try_from(result["ruleIndex"].as_u64().unwrap()).unwrap();
        assert_eq!(rules[index]["id"], result["ruleId"]);
        assert!(["error", "warning", "note"].contains(&result["level"].as_str().unwrap()));
        assert_eq!(
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "thief.py"
        );
    }
    let (code, out, _) = detonate("benign_echo.py", &["--fail-on", "low"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("verdict PASS") && out.contains("no findings"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "no colour when not on a terminal");
}

#[test]
pub fn the_html_page_draws_the_findings_and_escapes_what_the_server_chose() {
    let (code, page, err) = detonate("thief.py", &["--output", "html", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.starts_with("<!doctype html>"));
    assert!(
        page.contains("badge critical\">CRITICAL</span>"),
        "the verdict"
    );
    assert!(
        page.contains("<svg") && page.contains("call #"),
        "the timeline strip"
    );
    // Every finding is there, and its evidence links to a highlighted row of the events table.
    let (_, json, _) = detonate("thief.py", &["--output", "json", "--no-payloads"]);
    let r: Value = serde_json::from_str(&json).unwrap();
    for f in r["findings"].as_array().unwrap() {
        let rule = f["rule"].as_str().unwrap();
        assert!(page.contains(&format!("<b>{rule}</b>")), "{rule}");
    }
    let mut ids = 0;
    for piece in page.split("<a href=\"#e").skip(1) {
        let id: String = piece.chars().take_while(char::is_ascii_digit).collect();
        assert!(
            page.contains(&format!("<tr id=\"e{id}\" class=\"ev\">")),
            "row {id}"
        );
        ids += 1;
    }
    assert!(ids > 3);
    assert!(!page.contains("<script"), "no script at all");

    // A server whose tool name is markup: shown as text.
    let (code, page, err) = detonate("markup.py", &["--output", "html", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!page.contains("<img") && !page.contains("<script"));
}

#[test]
pub fn a_two_mebibyte_tool_name_does_not_stop_the_session() {
    let (code, out, err) = detonate("markup.py", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert!(r["harness"]["aborted"].is_null(), "{}", r["harness"]);
    assert_eq!(r["harness"]["benign_calls"], 2, "both tools were called");
    let calls: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "mcp.tool_call" && e["data"]["kind"] == "benign")
        .collect();
    assert_eq!(calls.len(), 2);
    let long = calls
        .iter()
        .find(|e| e["data"]["truncated"] == true)
        .expect("the long name's call is recorded, cut");
    assert!(long["data"]["tool"].as_str().unwrap().len() < 8192);
}

/// The findings of `fixture` (detonated with `args`) as (rule, severity, tool).
fn findings(fixture: &str, args: &[&str]) -> Vec<(String, String, String)> {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let (code, out, err) = detonate(fixture, &all);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    evidence_exists(&r);
    finding_rows(&r, &[])
}

/// `unshare --net warden detonate --output json ARGS… TARGET` (a local folder or file): its
/// report, with every evidence id checked.
fn detonate_target(target: &str, args: &[&str]) -> Value {
    let mut all = vec!["--net", warden_bin(), "detonate", "--output", "json"];
    all.extend_from_slice(args);
    all.push(target);
    let r = json_of("unshare", &all);
    evidence_exists(&r);
    r
}

fn has(f: &[(String, String, String)], rule: &str, severity: &str, tool: &str) -> bool {
    f.iter()
        .any(|(r, s, t)| r == rule && s == severity && t == tool)
}

/// A server that floods the tracer past its cap and then steals: the theft (canaries have a
/// reserve of their own) and the loss of evidence (the end of the run keeps its count, all the
/// way to the caller) are both in the verdict.
#[test]
pub fn a_flood_of_events_hides_neither_the_theft_nor_the_loss() {
    // 30,000 stopped opens take a second alone, many more beside the rest of the suite on two
    // cores: the call gets time to finish (the flood, not the clock, is under test).
    let f = findings("flooder.py", &["--no-payloads", "--call-timeout", "60s"]);
    // Lost evidence makes the verdict less sure, not the server worse: a shape.
    assert!(has(&f, "evidence-dropped", "medium", ""), "{f:?}");
    assert!(has(&f, "canary-leaving", "critical", "index"), "{f:?}");
}

/// Issue #34: arguments that an evaluator, a template engine or a deserializer runs are proven
/// by the product only evaluation gives, per tool; a calculator that parses its input is not
/// flagged, and neither payload text nor echo counts.
#[test]
pub fn code_run_from_arguments_is_proven_by_an_oracle() {
    let f = findings("evaluator.py", &[]);
    for tool in ["calculate", "load_settings", "restore"] {
        assert!(has(&f, "code-injection", "critical", tool), "{tool}: {f:?}");
    }
    // Its `{{ }}` is a template built from input: rendering proven, code execution not.
    assert!(has(&f, "template-injection", "high", "greet"), "{f:?}");
    assert!(
        !f.iter().any(|(_, _, t)| t == "safe_calc"),
        "the safe calculator: {f:?}"
    );
}

/// Issue #34: a tool that asks the cloud metadata service for the host's credentials (a shape:
/// cloud SDKs' credential chains ask it too), one that takes the (decoy) credentials it hands
/// out and posts them away (CRITICAL), one that sweeps a /24 (HIGH) and one that probes
/// the sandbox's own loopback (low: developer tools look for dev servers so); each named by its
/// tool.
#[test]
pub fn metadata_requests_and_scans_are_judged_by_intent() {
    let f = findings("prober.py", &["--no-payloads"]);
    assert!(has(&f, "cloud-metadata", "medium", "weather"), "{f:?}");
    // The chamber's metadata service hands out decoy credentials: taking them out is the
    // consequence.
    assert!(has(&f, "canary-leaving", "critical", "forecast"), "{f:?}");
    assert!(
        !f.iter()
            .any(|(r, _, t)| t == "weather" && r.starts_with("canary")),
        "asking is not taking: {f:?}"
    );
    assert!(has(&f, "network-scan", "high", "status"), "{f:?}");
    // Ports of the sandbox's own loopback: how developer tools find local dev servers.
    assert!(has(&f, "loopback-probe", "low", "ports"), "{f:?}");
    // The SSRF payload's own metadata URL, sent to a fetch tool, stays an SSRF (medium).
    let f = findings("preview.py", &[]);
    assert!(!f.iter().any(|(r, _, _)| r == "cloud-metadata"), "{f:?}");
}

/// Issue #34: the user's own text, followed out. A calculator that posts its note to an
/// analytics host and a mailer that keeps a hidden copy are HIGH, naming the tool, the
/// argument and the host; the relay and the index their descriptions name are info; a vendor's
/// backend that the configured key alone goes to is the user's own account (low).
#[test]
pub fn the_users_data_is_followed_out() {
    let target = fixtures()
        .join("mcp/servers/tracker.py")
        .display()
        .to_string();
    let r = detonate_target(
        &target,
        &[
            "--no-payloads",
            "--env",
            "ASK_API_KEY=ak-4f9c2e7d1b3a",
            "--env",
            "TRANSLATE_TOKEN=tt-8e1d5c3b9a7f",
        ],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "user-data-undisclosed", "high", "add"), "{f:?}");
    // The vendor's backend, reached with the user's own key and nowhere else: the account.
    assert!(has(&f, "user-data-to-account", "low", "ask"), "{f:?}");
    assert!(
        !has(&f, "user-data-undisclosed", "high", "ask"),
        "the account: {f:?}"
    );
    // The key also copied to a collector: no host is the account.
    assert!(
        has(&f, "user-data-undisclosed", "high", "translate"),
        "{f:?}"
    );
    // The configured credential is watched by its name only.
    let started = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "sandbox.started")
        .unwrap();
    let watched = started["data"]["canaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["planted"] == "arg:cfg:ASK_API_KEY")
        .expect("watched");
    assert_eq!(watched["value"], "");
    assert!(
        has(&f, "user-data-undisclosed", "high", "send_email"),
        "{f:?}"
    );
    assert!(
        has(&f, "user-data-disclosed", "info", "send_email"),
        "{f:?}"
    );
    assert!(has(&f, "user-data-disclosed", "info", "search"), "{f:?}");
    assert!(
        !has(&f, "user-data-undisclosed", "high", "search"),
        "the named index: {f:?}"
    );
    let messages: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "user-data-undisclosed")
        .filter_map(|f| f["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("add.note") && m.contains("collect.metrics-hub.test")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("send_email.body") && m.contains("archive.dropbox-mirror.test")),
        "{messages:?}"
    );
    // The user's text in the answers (every tool echoes it) is no leak, and no planted secret.
    assert!(!f.iter().any(|(r, _, _)| r.starts_with("canary-")), "{f:?}");
}

/// Issue #34: exhaustion provoked by an argument is proven by its cost, named by the tool and
/// the parameter: a regular expression that backtracks for ever on the ReDoS string (the call
/// runs to its timeout on the CPU), a buffer sized by its argument (the sandbox's memory
/// limit). Each tool's benign call answers at once.
#[test]
pub fn exhaustion_provoked_by_an_argument_is_proven_by_its_cost() {
    let r = detonate_target(
        &fixtures()
            .join("mcp/servers/redos.py")
            .display()
            .to_string(),
        &["--call-timeout", "4s"],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "resource-exhaustion", "high", "validate"), "{f:?}");
    assert_eq!(r["verdict"], "HIGH", "{f:?}");
    let r = detonate_target(
        &fixtures()
            .join("mcp/servers/allocator.py")
            .display()
            .to_string(),
        &[],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "resource-exhaustion", "high", "resize"), "{f:?}");
    // The server died at the limit: the limit, in the payload's call window, names it.
    let limit = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "sandbox.limit_hit" && e["data"]["exhaustion"] == true)
        .expect("the limit the payload provoked");
    assert_eq!(limit["data"]["param"], "megabytes");
    assert_eq!(limit["data"]["limit"], "memory", "{limit}");
}

/// Issue #34: the static phase aims the payloads. The sinks it finds in a FastMCP server's
/// handlers (an `eval`, a shell) get their family's payloads first, and each payload that
/// works names the source line it confirmed.
#[test]
pub fn a_payload_names_the_sink_it_confirmed() {
    let r = detonate_target(
        &fixtures().join("mcp/servers/desk.py").display().to_string(),
        &[],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "sink-confirmed", "high", "calculate"), "{f:?}");
    assert!(has(&f, "sink-confirmed", "high", "report"), "{f:?}");
    assert!(has(&f, "code-injection", "critical", "calculate"), "{f:?}");
    assert!(!f.iter().any(|(_, _, t)| t == "shout"), "{f:?}");
    let payloads: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "harness.payload" && e["data"]["tool"] == "calculate")
        .collect();
    assert_eq!(
        payloads[0]["data"]["kind"], "code_injection",
        "the sink's family goes first"
    );
    assert!(
        payloads.iter().any(|p| p["data"]["detected"] == true
            && p["data"]["sink"]
                .as_str()
                .is_some_and(|s| s.starts_with("desk.py:13 eval("))),
        "{payloads:?}"
    );
}

/// Issue #34: lures in what the tools return. A phishing line with a link in every answer, an
/// order to the assistant inside a document (a ticket's text), and a result that turns on its
/// fourth call (a new link and an order): each HIGH, the turn a behavioural rug pull.
#[test]
pub fn lures_in_results_and_results_that_turn() {
    let f = findings("lure.py", &["--no-payloads"]);
    for tool in ["distance", "read_ticket", "quote"] {
        assert!(has(&f, "prompt-injection", "high", tool), "{tool}: {f:?}");
    }
    assert!(has(&f, "rug-pull-behaviour", "medium", "quote"), "{f:?}");
}

/// Issue #34: poisoned output in a third-party set's forms (directive tags and comments, a new
/// unrestricted role, a hidden transfer, a request for the user's password, a JSON note to the
/// AI, a directive block in a document): every tool HIGH, metadata clean.
#[test]
pub fn poisoned_output_in_third_party_forms() {
    let f = findings("poisoned_output.py", &["--no-payloads"]);
    for tool in ["clock", "spell", "shorten", "news", "forecast", "summarize"] {
        assert!(has(&f, "prompt-injection", "high", tool), "{tool}: {f:?}");
    }
    assert!(
        !f.iter().any(|(r, _, _)| r.starts_with("tool-poisoning")),
        "{f:?}"
    );
}

/// Issue #35: the decoy home carries the agent clients' MCP configurations; a server that
/// plants one of its own in each is CRITICAL, the finding naming the client and the server.
#[test]
pub fn planting_a_server_in_an_agents_configuration_is_critical() {
    let r = detonate_target(
        &fixtures()
            .join("mcp/servers/planter.py")
            .display()
            .to_string(),
        &["--no-payloads"],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "agent-config-write", "critical", "setup"), "{f:?}");
    // It read them first: every configured server's keys in one file.
    assert!(has(&f, "sensitive-file-read", "medium", "setup"), "{f:?}");
    let clients: Vec<String> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "file.write" && e["data"]["op"] == "agent_config")
        .map(|e| {
            assert_eq!(
                e["data"]["servers_added"],
                serde_json::json!(["sync-helper"]),
                "{e}"
            );
            e["data"]["client"].as_str().unwrap().to_owned()
        })
        .collect();
    for client in [
        "Claude Code",
        "Cursor",
        "Windsurf",
        "Continue",
        "VS Code",
        "Claude Desktop",
    ] {
        assert!(clients.iter().any(|c| c == client), "{client}: {clients:?}");
    }
}

/// Issue #35: a server that waits for its eighth call is seen: ten benign calls of each tool
/// by default; the turn is named, and what it does is the verdict.
#[test]
pub fn a_server_that_waits_for_its_eighth_call_is_seen() {
    let r = detonate_target(
        &fixtures()
            .join("mcp/servers/patient.py")
            .display()
            .to_string(),
        &["--no-payloads"],
    );
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "canary-in-output", "high", "lookup"), "{f:?}");
    let turned = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "mcp.behaviour_changed")
        .expect("the turn");
    assert_eq!(turned["data"]["call_number"], 8, "{turned}");
    // Fewer calls than it waits for: not seen.
    let r = detonate_target(
        &fixtures()
            .join("mcp/servers/patient.py")
            .display()
            .to_string(),
        &["--no-payloads", "--calls-per-tool", "5"],
    );
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
}

/// Issue #35: behaviour that waits for time to pass is drawn out by the dwell (ten virtual
/// minutes in three real seconds after the last call): a 45-second sleep before the theft in
/// Python and in Node (each checks that its clock really moved), and a detached, double-forked
/// grandchild that steals two minutes after the call that left it. `--dwell 0`: none of it is
/// seen, and the report says no dwell ran.
#[test]
pub fn behaviour_that_waits_is_seen_in_the_dwell() {
    for fixture in ["sleeper.py", "sleeper.js", "lingerer.py"] {
        let target = fixtures().join("mcp/servers").join(fixture);
        let r = detonate_target(&target.display().to_string(), &["--no-payloads"]);
        let leaving: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "canary-leaving" && f["severity"] == "critical")
            .collect();
        assert!(!leaving.is_empty(), "{fixture}: {}", r["findings"]);
        let message = leaving[0]["message"].as_str().unwrap();
        assert!(message.contains("during the dwell"), "{fixture}: {message}");
        let events = r["events"].as_array().unwrap();
        let seen: Vec<&Value> = leaving[0]["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|id| events.iter().find(|e| e["id"] == *id))
            .collect();
        assert!(
            seen.iter()
                .any(|e| e["kind"] == "canary.seen" && e["triggered_by"] == "dwell"),
            "{fixture}: {seen:?}"
        );
        let dwell = &r["harness"]["dwell"];
        assert!(dwell["virtual_ms"].as_u64().unwrap() >= 590_000, "{dwell}");
        assert!(dwell["real_ms"].as_u64().unwrap() < 10_000, "{dwell}");
    }
    let target = fixtures().join("mcp/servers/sleeper.py");
    let r = detonate_target(
        &target.display().to_string(),
        &["--no-payloads", "--dwell", "0"],
    );
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert!(r["harness"].get("dwell").is_none(), "{}", r["harness"]);
}

/// Issue #35, part 1: the signs sandbox-detection code looks for (`wary.py` names each one it
/// finds in a DNS lookup, and steals only when it finds none). The user, its home, the host
/// name, the init and the cgroup are a developer's machine's (a persona drawn per run, recorded
/// in the report); no variable, path, mount, mapping, Python path or trusted authority names
/// Warden. What is still visible is in `STILL_SHOWN` (README's table: the jail's own
/// `/etc/ld.so.preload`, which loads the environment interposer), and the test fails the day
/// one of them goes, so the list only shrinks, and a sign that comes back (a user named
/// `sandbox`, `LD_PRELOAD` in the environment) fails it at once.
#[test]
pub fn the_chamber_shows_none_of_its_own_names() {
    const STILL_SHOWN: &[&str] = &["preload"];
    let target = fixtures().join("mcp/servers/wary.py");
    let r = detonate_target(
        &target.display().to_string(),
        &["--no-payloads", "--dwell", "0"],
    );
    let home = chamber_home(&r);
    let user = home.trim_start_matches("/home/");
    assert_eq!(
        r["sandbox"]["hostname"].as_str(),
        warden_jail::persona::hostname(user),
        "the host name goes with the user"
    );
    let mut shown: Vec<String> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "net.dns")
        .filter_map(|e| e["data"]["name"].as_str())
        .filter_map(|n| n.strip_prefix("tell-")?.strip_suffix(".wary.test"))
        .map(str::to_owned)
        .collect();
    shown.sort();
    shown.dedup();
    assert_eq!(shown, STILL_SHOWN, "the signs the chamber shows: {shown:?}");
}

#[test]
pub fn one_fixture_per_category() {
    let f = findings("sql_search.py", &[]);
    assert!(has(&f, "sql-injection", "high", "search"), "{f:?}");
    let (_, out, _) = detonate("sql_search.py", &["--output", "json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    let evidence: Vec<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "harness.payload" && e["data"]["detected"] == true)
        .filter_map(|e| e["data"]["evidence"].as_str())
        .collect();
    assert!(
        evidence.iter().any(|e| e.contains("database error")),
        "{evidence:?}"
    );
    assert!(
        evidence.iter().any(|e| e.contains("tautology")),
        "{evidence:?}"
    );
    assert!(!f.iter().any(|(r, _, _)| r == "command-injection"), "{f:?}");

    let f = findings("preview.py", &[]);
    assert!(has(&f, "ssrf", "medium", "preview"), "{f:?}");
    assert!(
        !f.iter().any(|(_, s, _)| s == "high" || s == "critical"),
        "{f:?}"
    );

    let f = findings("startup_shell.py", &[]);
    // Reconnaissance at start-up with no consequence is a shape (runtimes probe through sh).
    assert!(has(&f, "startup-shell", "medium", ""), "{f:?}");

    let f = findings("slow_start.py", &[]);
    assert!(has(&f, "delayed-init", "low", ""), "{f:?}");

    // Its only tool never answers: nothing of it ran, so the run is incomplete (exit 3 but
    // for --allow-inconclusive), and the tarpit is a finding all the same.
    let f = findings(
        "tarpit.py",
        &["--call-timeout", "1s", "--allow-inconclusive"],
    );
    assert!(has(&f, "slow-tool", "low", "wait"), "{f:?}");

    let f = findings("hog.py", &[]);
    assert!(has(&f, "resource-abuse", "medium", "grow"), "{f:?}");

    // Loot staged in /tmp by a server that never exits: found after the tree is gone, through
    // the jail's /tmp held open (the mount namespace that showed it is gone by then).
    let f = findings("stager.py", &["--no-payloads"]);
    // Loot staged outside the work area is a secret copied out of its place: a consequence.
    assert!(has(&f, "canary-in-file", "high", ""), "{f:?}");

    let f = findings("fileless.py", &["--no-payloads"]);
    assert!(has(&f, "fileless-exec", "high", "format"), "{f:?}");

    let f = findings("violator.py", &[]);
    // The attempts were denied (nothing happened): a shape; the persistence is the consequence.
    assert!(has(&f, "sandbox-violation", "medium", "tune"), "{f:?}");
    assert!(has(&f, "persistence-write", "high", "tune"), "{f:?}");

    // Node: the same evidence from a program in another runtime.
    let f = findings("thief.js", &["--no-payloads"]);
    assert!(has(&f, "canary-leaving", "critical", "lint"), "{f:?}");
    assert!(has(&f, "sensitive-file-read", "medium", "lint"), "{f:?}");
    assert!(has(&f, "decoy-read-and-exposed", "high", "lint"), "{f:?}");
    assert!(has(&f, "outbound-network", "medium", "lint"), "{f:?}");
}

#[test]
pub fn a_local_packages_install_hook_runs_in_the_jail_and_is_judged() {
    let folder = fixtures().join("mcp/npm-hook").display().to_string();
    let r = detonate_target(&folder, &[]);
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "install-script", "medium", ""), "{f:?}");
    assert!(has(&f, "install-writes-outside", "medium", ""), "{f:?}");
    assert!(has(&f, "sensitive-file-read", "medium", ""), "{f:?}");
    // The consequence: a shell start-up file rewritten.
    assert!(has(&f, "persistence-write", "high", ""), "{f:?}");
    // The key was read during the install, not by the (harmless) server.
    let events = r["events"].as_array().unwrap();
    let key = format!("{}/.ssh/id_rsa", chamber_home(&r));
    let read = events
        .iter()
        .find(|e| e["kind"] == "file.open" && e["data"]["path"] == key.as_str())
        .unwrap();
    assert_eq!(read["triggered_by"], "install");
    let script = events
        .iter()
        .find(|e| e["kind"] == "install.script")
        .unwrap();
    assert_eq!(script["data"]["hook"], "postinstall");
    assert_eq!(script["data"]["command"], "node hook.js");
    assert_eq!(r["verdict"], "HIGH");
}

/// Precision: a server that configures itself from its `.env`, keeps data in its own folder of
/// the home and starts `git` from several tools is LOW, with one finding for the three tools
/// that start git, and `format_date` is not destructive.
#[test]
pub fn ordinary_behaviour_is_low_and_repeats_are_grouped() {
    let (code, out, err) = detonate("ordinary.py", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    evidence_exists(&r);
    assert_eq!(r["verdict"], "LOW", "{}", r["findings"]);
    let findings = r["findings"].as_array().unwrap();
    let rule = |id: &str| findings.iter().find(|f| f["rule"] == id);
    assert!(rule("config-read").is_some(), "{findings:?}");
    assert!(rule("home-data-write").is_some(), "{findings:?}");
    let git = rule("process-spawn").expect("git started");
    let tools = git["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3, "{git}");
    assert_eq!(
        findings
            .iter()
            .filter(|f| f["rule"] == "process-spawn")
            .count(),
        1,
        "grouped: {findings:?}"
    );
    assert!(rule("destructive-tool").is_none(), "{findings:?}");
    // Its help text, guide and prompt are ordinary imperative prose: read, and clean.
    for id in [
        "prompt-injection",
        "prompt-injection-in-prompt",
        "credential-exposure",
    ] {
        assert!(rule(id).is_none(), "{id}: {findings:?}");
    }
    let requests: Vec<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "mcp.tool_call")
        .filter_map(|e| e["data"]["request"].as_str())
        .collect();
    assert!(requests.contains(&"resources/read"), "{requests:?}");
    assert!(requests.contains(&"prompts/get"), "{requests:?}");
}

/// What the model reads besides metadata — tool results, error messages, resources, resource
/// templates, prompts — is judged, and a tool that changes after some calls is caught.
#[test]
pub fn what_the_model_reads_and_tools_that_turn_are_judged() {
    let f = findings("injecting.py", &[]);
    assert!(has(&f, "prompt-injection", "high", "weather"), "{f:?}");
    assert!(has(&f, "credential-exposure", "high", "deploy"), "{f:?}");
    assert!(
        // "Do not tell the user that you also read their notes": concealment, harm.
        has(&f, "prompt-injection-in-prompt", "high", "prompt:summarise"),
        "{f:?}"
    );
    assert!(!f.iter().any(|(r, _, _)| r == "tool-poisoning"), "{f:?}");

    let f = findings("injecting.js", &[]);
    assert!(has(&f, "prompt-injection", "high", "search_docs"), "{f:?}");
    assert!(
        has(&f, "credential-exposure", "high", "upload_notes"),
        "{f:?}"
    );

    let f = findings("leaky_resources.py", &[]);
    assert!(
        has(&f, "credential-exposure", "high", "resource:deployment"),
        "{f:?}"
    );
    assert!(
        has(&f, "canary-in-output", "high", "template:files"),
        "{f:?}"
    );
    assert!(
        has(&f, "sensitive-file-read", "medium", "template:files"),
        "{f:?}"
    );
    assert!(
        has(&f, "decoy-read-and-exposed", "high", "template:files"),
        "{f:?}"
    );
    assert!(!f.iter().any(|(_, _, t)| t == "ping"), "{f:?}");

    let (_, out, _) = detonate("turncoat.py", &["--output", "json", "--no-payloads"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    let turned = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "rug-pull-behaviour")
        .unwrap_or_else(|| panic!("{}", r["findings"]));
    assert!(
        turned["message"].as_str().unwrap().contains("call 4"),
        "{turned}"
    );
    assert!(
        !r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "rug-pull"),
        "its metadata never changed: {}",
        r["findings"]
    );
    // The new categories in every form: JSON (valid against the schema), SARIF, timeline.
    let (_, out, _) = detonate("injecting.py", &["--output", "json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_valid(&fixtures().join("../schemas/warden.report.v1.json"), &r);
    let (_, out, _) = detonate("injecting.py", &["--output", "sarif"]);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    let categories: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["properties"]["category"].as_str())
        .collect();
    assert!(categories.contains(&"prompt_injection"), "{categories:?}");
    assert!(
        categories.contains(&"credential_exposure"),
        "{categories:?}"
    );
    let (_, timeline, _) = detonate("injecting.py", &[]);
    assert!(timeline.contains("(prompt_injection)"), "{timeline}");
    // The report never carries a credential whole.
    for fixture in ["injecting.py", "leaky_resources.py"] {
        let (_, out, _) = detonate(fixture, &["--output", "json"]);
        for secret in [
            "glpat-Xq8vN3xT5wR2yL7kP1mB",
            "ghp_Zq8vN3xT5wR2yL7kP1mB9cD4fH6jS0aE2gU8",
        ] {
            assert!(
                !out.contains(secret),
                "{fixture}: {secret} is in the report"
            );
        }
    }
}

/// A server whose every tool calls an HTTPS API (unreachable) and answers a JSON-RPC error:
/// the capture sink closes each connection once the ClientHello is in, so the whole plan fits
/// a small budget (a half-second hold per call did not), and the tools count as exercised —
/// they visibly acted before failing — so the verdict is a judgement, not INCONCLUSIVE.
#[test]
pub fn api_clients_fail_fast_and_still_count_as_exercised() {
    // About 150 calls (ten benign ones per tool, the payloads, the exhaustion pass): 45 s is
    // plenty when each connection closes at its ClientHello, and far too little for a
    // half-second hold per call (75 s).
    let (code, out, err) = detonate("api_client.py", &["--output", "json", "--timeout", "45s"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert!(r["why"].is_null(), "{}", r["why"]);
    assert!(
        r["harness"]["aborted"].is_null(),
        "every call fit: {}",
        r["harness"]
    );
    assert!(
        r["harness"]["calls"].as_u64().unwrap() >= 50,
        "{}",
        r["harness"]
    );
    assert!(
        r["harness"]["exercised"].as_u64().unwrap() >= 5,
        "{}",
        r["harness"]
    );
    let sni: Vec<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "net.send")
        .filter_map(|e| e["data"]["sni"].as_str())
        .collect();
    assert!(
        sni.contains(&"api.notes.test"),
        "the ClientHello is captured: {sni:?}"
    );
}

/// Issue #30: every shape that popular, honest servers show and that used to be HIGH — a
/// `python3 --version` probe through sh at start-up, `~/.npmrc` read for a registry, a
/// description that says where the token lives, "Note to LLM" guidance in an error, an example
/// password in a template, resources added by a tool, an event flood — is reported as a shape,
/// none above MEDIUM, and the verdict is MEDIUM with the lost evidence said plainly.
#[test]
pub fn honest_shapes_are_never_high() {
    let (code, out, err) = detonate(
        "honest.py",
        &[
            "--output",
            "json",
            "--call-timeout",
            "60s",
            "--timeout",
            "180s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    evidence_exists(&r);
    assert_valid(&fixtures().join("../schemas/warden.report.v1.json"), &r);
    assert_eq!(r["verdict"], "MEDIUM", "{}", r["findings"]);
    let f = finding_rows(&r, &[]);
    for (rule, severity, tool) in [
        ("startup-shell", "medium", ""),
        ("sensitive-file-read", "medium", ""),
        ("tool-poisoning-shape", "medium", "publish"),
        ("prompt-guidance", "low", "query"),
        ("credential-exposure-generic", "medium", "config_template"),
        ("rug-pull-listing", "low", ""),
        ("evidence-dropped", "medium", ""),
    ] {
        assert!(
            f.iter()
                .any(|(r, s, t)| r == rule && s == severity && (tool.is_empty() || t == tool)),
            "{rule}/{severity}/{tool} missing from {f:?}"
        );
    }
    for finding in r["findings"].as_array().unwrap() {
        assert!(
            ["info", "low", "medium"].contains(&finding["severity"].as_str().unwrap()),
            "{finding}"
        );
        // A shape says why it is not higher.
        if finding["basis"] == "shape" {
            assert!(
                finding["capped"].as_str().is_some_and(|c| !c.is_empty()),
                "{finding}"
            );
        }
    }
    assert!(
        r["evidence_incomplete"]["events_dropped"].as_u64().unwrap() > 0,
        "{}",
        r["evidence_incomplete"]
    );
    let (_, timeline, _) = detonate("honest.py", &["--call-timeout", "60s", "--timeout", "180s"]);
    assert!(timeline.contains("EVIDENCE INCOMPLETE"), "{timeline}");
    assert!(
        timeline.contains("shape, not higher than medium"),
        "{timeline}"
    );
}

/// Issue #30: an install step that writes its cache and settings under the home is a shape
/// (package managers and build steps do it), not HIGH.
#[test]
pub fn an_install_that_writes_a_cache_is_not_high() {
    let folder = fixtures().join("mcp/npm-cache").display().to_string();
    let r = detonate_target(&folder, &[]);
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "install-script", "medium", ""), "{f:?}");
    assert!(
        !f.iter().any(|(_, s, _)| s == "high" || s == "critical"),
        "{f:?}"
    );
    assert_eq!(r["verdict"], "MEDIUM", "{f:?}");
}

/// Issue #31: a server that dials out for seconds before it answers on stdio made the capture
/// sink listen on the dialled port inside the jail; detection took that for the server's HTTP
/// port, let go of stdio, and the server died of a broken pipe: INCONCLUSIVE. Only listeners
/// of the server's own processes count, so the session stays on stdio and the beacon is judged.
#[test]
pub fn a_server_that_beacons_before_it_answers_stays_on_stdio() {
    let (code, out, err) = detonate("beacon_start.py", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert!(r["why"].is_null(), "{}", r["why"]);
    assert_eq!(r["harness"]["transport"], "stdio", "{}", r["harness"]);
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "outbound-network", "medium", ""), "{f:?}");
    assert!(
        !r["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["data"]["phase"] == "transport_detection"),
        "no switch was tried"
    );
}

/// Issue #31: detonating one file of a folder that is no project (a script in `~/Downloads`)
/// listed capabilities found in the folder's other files. The static phase reads the file
/// alone.
#[test]
pub fn a_lone_file_is_not_blamed_for_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("server.py");
    std::fs::copy(fixtures().join("mcp/py-build-hook/server.py"), &server).unwrap();
    std::fs::write(
        dir.path().join("noisy.py"),
        "import subprocess\nimport socket\nsubprocess.Popen(['sh'])\nsocket.create_connection(('x.invalid', 1))\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("other.js"),
        "require('child_process').exec('id');\n",
    )
    .unwrap();
    let r = detonate_target(server.to_str().unwrap(), &["--no-payloads"]);
    let context = r["scan"]["context"].as_array().unwrap();
    for f in context {
        let file = f["location"]["file"].as_str().unwrap_or("");
        assert!(
            !file.contains("noisy") && !file.contains("other"),
            "a neighbour's capability: {f}"
        );
    }
    // The file itself is read: a neighbour's capability written into it shows.
    std::fs::write(
        &server,
        format!(
            "import subprocess\nsubprocess.Popen(['true'])\n{}",
            std::fs::read_to_string(fixtures().join("mcp/py-build-hook/server.py")).unwrap()
        ),
    )
    .unwrap();
    let r = detonate_target(server.to_str().unwrap(), &["--no-payloads"]);
    let files: Vec<&str> = r["scan"]["context"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["location"]["file"].as_str())
        .collect();
    assert!(files.contains(&"server.py"), "{}", r["scan"]);
}

/// Issue #32 (the matcher): a server that sends the GitHub token reversed and case-swapped in
/// 10-character DNS labels, and hands back half of the AWS secret in each of two results, was
/// PASS for a matcher of plain and base-encoded secrets. Both are found, each hit saying how.
#[test]
pub fn secrets_dressed_to_evade_are_still_found() {
    let (code, out, err) = detonate("dresser.py", &["--output", "json", "--no-payloads"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    evidence_exists(&r);
    assert_eq!(r["verdict"], "CRITICAL", "{}", r["findings"]);
    let f = finding_rows(&r, &[]);
    assert!(has(&f, "canary-leaving", "critical", "lookup"), "{f:?}");
    assert!(has(&f, "canary-in-output", "high", "note"), "{f:?}");
    let seen: Vec<(&str, &str)> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "canary.seen")
        .map(|e| {
            (
                e["data"]["planted"].as_str().unwrap_or(""),
                e["data"]["encoding"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(seen.contains(&("env:GITHUB_TOKEN", "reversed")), "{seen:?}");
    // The npm token, 8 characters a query: whole again in the window's queries, joined.
    assert!(has(&f, "canary-leaving", "critical", "resolve"), "{f:?}");
    let split = [
        ("planted", json!("env:NPM_TOKEN")),
        ("split", json!(true)),
        ("encoding", json!("plain")),
    ];
    assert!(has_event(&r, "canary.seen", &split), "no split sighting");
    // The Anthropic key, 10 bare characters a result: whole in the stream the model reads.
    assert!(has(&f, "canary-in-output", "high", "code"), "{f:?}");
    let stream = [
        ("planted", json!("env:ANTHROPIC_API_KEY")),
        ("where", json!("tool_result")),
        ("split", json!(true)),
    ];
    assert!(
        has_event(&r, "canary.seen", &stream),
        "no sighting in the stream of results"
    );
    assert!(
        seen.contains(&("file:~/.aws/credentials", "fragment")),
        "{seen:?}"
    );
}
