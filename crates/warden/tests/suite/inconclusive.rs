//! A verdict only from a detonation that happened: every way a run can stop short (a server
//! that crashes at start, dies after `initialize`, fails `tools/list`, lists no tools, dies at
//! its first call, a program that is not there, a real PyPI server that crashes on import) is
//! `INCONCLUSIVE` in every output, with exit status 3 whatever `--fail-on` says.

use serde_json::Value;

use super::common::*;
use super::detonate::{assert_valid, detonate, sarif_schema};

fn report_schema() -> std::path::PathBuf {
    fixtures().join("../schemas/warden.report.v1.json")
}

/// Detonate `broken.py MODE`: its JSON report, which must be INCONCLUSIVE with exit 3.
fn broken(mode: &str) -> Value {
    let (code, out, err) = detonate(&format!("broken.py {mode}"), &["--output", "json"]);
    assert_eq!(code, 3, "{mode}: {err}\n{out}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_valid(&report_schema(), &r);
    assert_eq!(r["verdict"], "INCONCLUSIVE", "{mode}");
    assert!(
        err.contains("INCONCLUSIVE"),
        "{mode}: said on stderr: {err}"
    );
    r
}

#[test]
pub fn a_server_that_never_ran_is_never_a_pass() {
    let r = broken("crash");
    assert_eq!(r["why"]["stage"], "start");
    assert!(
        r["why"]["reason"].as_str().unwrap().contains("exit code 1"),
        "{}",
        r["why"]
    );
    let tail = r["why"]["stderr_tail"].as_str().unwrap();
    assert!(tail.ends_with("no attribute 'Resource'"), "{tail}");
    let r = broken("after-initialize");
    assert_eq!(r["why"]["stage"], "tools_list");
    assert!(
        r["why"]["reason"].as_str().unwrap().contains("exit code 4"),
        "{}",
        r["why"]
    );
    assert_eq!(
        r["why"]["stderr_tail"],
        "fatal: lost my database connection"
    );
    let r = broken("list-error");
    assert_eq!(r["why"]["stage"], "tools_list");
    assert!(
        r["why"]["reason"]
            .as_str()
            .unwrap()
            .contains("registry not loaded")
    );
    let evidence = r["why"]["evidence"].as_array().unwrap();
    assert!(!evidence.is_empty());
    for id in evidence {
        let e = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| &e["id"] == id);
        assert_eq!(e.unwrap()["data"]["phase"], "tools_list");
    }
    let r = broken("no-tools");
    assert_eq!(r["why"]["stage"], "tools");
    assert_eq!(
        r["why"]["reason"],
        "the server declares tools but lists none: nothing was exercised"
    );
    // Review finding: a server that refuses every call with a JSON-RPC error ran no tool.
    let r = broken("refuse-calls");
    assert_eq!(r["why"]["stage"], "tools");
    assert!(
        r["why"]["reason"].as_str().unwrap().contains("refused"),
        "{}",
        r["why"]
    );
    let r = broken("crash-on-call");
    assert_eq!(r["why"]["stage"], "tools");
    assert!(
        r["why"]["reason"]
            .as_str()
            .unwrap()
            .contains("exit code 139"),
        "{}",
        r["why"]
    );
}

#[test]
pub fn inconclusive_shows_in_every_output_and_exits_3_whatever_fail_on_says() {
    let (code, out, _) = detonate("broken.py crash", &["--fail-on", "low"]);
    assert_eq!(code, 3);
    assert!(out.contains("verdict INCONCLUSIVE"), "{out}");
    assert!(out.contains("INCONCLUSIVE at start"), "{out}");
    assert!(out.contains("stderr| AttributeError"), "{out}");
    assert!(!out.contains("verdict PASS"), "{out}");
    let (code, out, _) = detonate("broken.py crash", &["--output", "sarif"]);
    assert_eq!(code, 3);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    assert_valid(&sarif_schema(), &sarif);
    let invocation = &sarif["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let note = &invocation["toolExecutionNotifications"][0];
    assert_eq!(note["level"], "error");
    assert!(
        note["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("INCONCLUSIVE (start)")
    );
    assert_eq!(sarif["runs"][0]["properties"]["verdict"], "INCONCLUSIVE");
    let (code, out, _) = detonate("broken.py crash", &["--output", "html"]);
    assert_eq!(code, 3);
    assert!(
        out.contains("<div class=\"banner\" role=\"alert\"><strong>INCONCLUSIVE at start"),
        "{out}"
    );
    assert!(
        out.contains("no attribute &#39;Resource&#39;"),
        "escaped stderr"
    );
    // --allow-inconclusive: exit 0, or 1 when a finding reaches --fail-on; the verdict stays.
    let (code, out, _) = detonate(
        "broken.py crash",
        &["--allow-inconclusive", "--output", "json"],
    );
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["verdict"],
        "INCONCLUSIVE"
    );
    // A run that happened has no `why`, and SARIF says it ran.
    let (code, out, _) = detonate("benign_echo.py", &["--output", "sarif"]);
    assert_eq!(code, 0);
    let sarif: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        true
    );
}

#[test]
pub fn a_program_that_is_not_there_is_inconclusive_with_a_hint() {
    let (code, out, err) = detonate_command("/nonexistent/pyenv/versions/3.11.7/bin/python3 -V");
    assert_eq!(code, 3, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["why"]["stage"], "start");
    assert!(
        r["why"]["reason"].as_str().unwrap().contains("not found"),
        "{}",
        r["why"]
    );
}

#[test]
pub fn a_real_pypi_server_that_crashes_on_import_is_inconclusive() {
    // mcp-server-sqlite 2025.4.25 decorates with `Server.list_resources`, which the current
    // `mcp` SDK no longer has: it dies at start with AttributeError.
    let r = json_exiting(
        3,
        warden_bin(),
        &[
            "detonate",
            "--output",
            "json",
            "pypi:mcp-server-sqlite@2025.4.25",
        ],
        &[],
    );
    assert_valid(&report_schema(), &r);
    assert_eq!(r["verdict"], "INCONCLUSIVE");
    assert_eq!(r["why"]["stage"], "start", "{}", r["why"]);
    let tail = r["why"]["stderr_tail"].as_str().unwrap();
    assert!(tail.contains("AttributeError"), "{tail}");
}

/// `unshare --net warden detonate --mcp-command COMMAND --output json`.
fn detonate_command(command: &str) -> (i32, String, String) {
    let out = std::process::Command::new("unshare")
        .args(["--net", warden_bin(), "detonate", "--output", "json"])
        .args(["--mcp-command", command])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Review finding: a server that steals at start-up and exits before `initialize` came out
/// INCONCLUSIVE, which let its verdict field read as "unknown". What was observed before it
/// stopped stands when it is HIGH or worse (here the key leaving: a consequence), with `why`
/// beside it; the gate trips on it.
#[test]
pub fn a_serious_finding_before_a_crash_stands_as_the_verdict() {
    let (code, out, err) = detonate("broken.py steal-and-exit", &["--output", "json"]);
    assert_eq!(code, 3, "stopped short, no --fail-on: {err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_valid(&report_schema(), &r);
    assert_eq!(r["verdict"], "CRITICAL", "{}", r["findings"]);
    assert_eq!(r["why"]["stage"], "start");
    let (code, _, _) = detonate("broken.py steal-and-exit", &["--fail-on", "high"]);
    assert_eq!(code, 1, "the gate trips on what was observed");
}
