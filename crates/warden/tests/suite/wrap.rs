//! `warden wrap` under the official MCP Python SDK's client (`fixtures/mcp/wrap_client.py`):
//! Python and Node servers, fixtures and real ones, work wrapped with no finding; a thief is
//! blocked at each theft under `block` (the server lives) and ended at its first under `kill`,
//! with the evidence in the audit log and nothing of it left running. Everything runs in a
//! network namespace of its own.

use std::process::{Command, Stdio};

use serde_json::Value;

use super::common::{fixtures, host_processes_with, real_servers, sdk_python, warden_bin};

/// The client's lines and the audit log's entries, for `wrap --on ON -- SERVER`, calling
/// `tool` with `args` twice.
fn wrapped(on: &str, tool: &str, args: &str, server: &[&str]) -> (Vec<String>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("wrap.jsonl");
    let out = Command::new("unshare")
        .arg("--net")
        .arg(sdk_python())
        .arg(fixtures().join("mcp/wrap_client.py"))
        .args([warden_bin(), log.to_str().unwrap(), on, tool, args, "--"])
        .args(server)
        .stdin(Stdio::null())
        .output()
        .expect("the SDK client runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<String> = stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('{') && !l.starts_with('}'))
        .map(str::to_owned)
        .collect();
    let entries = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, entries)
}

fn kinds<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["kind"] == kind).collect()
}

#[test]
pub fn wrapped_python_and_node_servers_work_for_the_sdk_client() {
    let echo = fixtures().join("mcp/servers/benign_echo.py");
    let time = real_servers().join("py/bin/mcp-server-time");
    let fs = real_servers().join("node/node_modules/.bin/mcp-server-filesystem");
    for (tool, args, server, expect) in [
        (
            "echo",
            r#"{"text":"hi"}"#,
            vec!["python3", echo.to_str().unwrap()],
            "call 1 ok hi",
        ),
        (
            "get_current_time",
            r#"{"timezone":"Europe/Oslo"}"#,
            vec![time.to_str().unwrap()],
            "call 1 ok {",
        ),
        (
            "list_allowed_directories",
            "{}",
            vec!["node", fs.to_str().unwrap(), "/workspace"],
            "call 1 ok Allowed directories:",
        ),
    ] {
        // `low=block`: any finding at all would answer the call with an error.
        let (lines, log) = wrapped("low=block", tool, args, &server);
        assert!(lines.iter().any(|l| l == expect), "{server:?}: {lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with("call 2 ok")),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l == "list ok"), "{lines:?}");
        assert_eq!(kinds(&log, "tool_call").len(), 2, "{log:?}");
        assert!(kinds(&log, "finding").is_empty(), "{server:?}: {log:?}");
        assert_eq!(kinds(&log, "wrap.started").len(), 1);
        assert_eq!(kinds(&log, "wrap.ended").len(), 1);
    }
}

#[test]
pub fn a_thief_is_blocked_at_each_theft_or_killed_at_its_first() {
    let thief = fixtures().join("mcp/servers/thief.py");
    let server = ["python3", thief.to_str().unwrap()];
    let city = r#"{"city":"Oslo"}"#;

    let (lines, log) = wrapped("high=block", "weather", city, &server);
    for n in [1, 2] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("call {n} ")))
            .unwrap_or_else(|| panic!("{lines:?}"));
        assert!(
            line.contains("error") && line.contains("blocked by Warden: canary-leaving"),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| l == "list ok"),
        "the server lives: {lines:?}"
    );
    let finding = kinds(&log, "finding")
        .into_iter()
        .find(|f| f["rule"] == "canary-leaving")
        .expect("the theft is in the log");
    assert!(
        !finding["evidence"].as_array().unwrap().is_empty(),
        "{finding}"
    );
    assert_eq!(kinds(&log, "action")[0]["action"], "block");

    let (lines, log) = wrapped("high=kill", "weather", city, &server);
    assert!(
        lines[1].starts_with("call 1 error") && lines[1].contains("canary-leaving"),
        "{lines:?}"
    );
    assert!(
        lines[2..]
            .iter()
            .all(|l| l.contains("error") || l.starts_with("session ended")),
        "nothing answers after the kill: {lines:?}"
    );
    let actions = kinds(&log, "action");
    assert_eq!(
        (actions.len(), &actions[0]["action"]),
        (1, &Value::from("kill"))
    );
    assert_eq!(kinds(&log, "wrap.ended")[0]["exit_code"], 137);
    assert!(
        host_processes_with(thief.to_str().unwrap()).is_empty(),
        "the thief is gone"
    );
}

#[test]
pub fn an_answer_that_hands_the_model_a_secret_is_blocked() {
    // `read_note("secrets")` returns the decoy AWS credentials: nothing leaves by the network,
    // the answer itself is the theft.
    let notes = fixtures().join("mcp/servers/notes.py");
    let (lines, log) = wrapped(
        "high=block",
        "read_note",
        r#"{"name":"secrets"}"#,
        &["python3", notes.to_str().unwrap()],
    );
    let first = lines.iter().find(|l| l.starts_with("call 1 ")).unwrap();
    assert!(
        first.contains("blocked by Warden: canary-in-output"),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("aws_secret_access_key")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l == "list ok"), "{lines:?}");
    assert!(
        kinds(&log, "finding")
            .iter()
            .any(|f| f["rule"] == "canary-in-output")
    );
}
