//! `warden detonate` against real public MCP servers installed from PyPI and npm by
//! `fixtures/real/install.sh` (run by `.ci/run`): each detonates end to end, most benign calls
//! pass the server's own validation, and nothing is reported beyond what the server really does.
//! Every run is wrapped in `unshare --net`.

use serde_json::Value;

use super::common::*;

fn servers() -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(
        std::env::var("WARDEN_REAL_SERVERS").unwrap_or_else(|_| "/opt/warden-real-servers".into()),
    );
    assert!(
        dir.join("py/bin/mcp-server-time").exists(),
        "the real servers are missing: run fixtures/real/install.sh"
    );
    dir
}

fn detonate(command: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--net",
        warden_bin(),
        "detonate",
        "--output",
        "json",
        "--call-timeout",
        "3s",
        "--mcp-command",
        command,
    ];
    args.extend_from_slice(extra);
    let r = json_of("unshare", &args);
    assert!(r["harness"]["aborted"].is_null(), "{}", r["harness"]);
    r
}

/// (rule, severity, tool) of every finding above `low`.
fn serious(r: &Value) -> Vec<(String, String, String)> {
    finding_rows(r, &["medium", "high", "critical"])
}

/// The share of benign calls whose arguments the server's own validation accepted.
fn accepted_share(r: &Value) -> f64 {
    let h = &r["harness"];
    h["benign_valid"].as_f64().unwrap() / h["benign_calls"].as_f64().unwrap().max(1.0)
}

#[test]
pub fn mcp_server_time_passes() {
    let r = detonate(
        &servers()
            .join("py/bin/mcp-server-time")
            .display()
            .to_string(),
        &[],
    );
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert_eq!(r["tools"].as_array().unwrap().len(), 2);
    assert_eq!(accepted_share(&r), 1.0, "{}", r["harness"]);
}

#[test]
pub fn mcp_server_git_is_judged_by_its_destructive_tools_only() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("a.txt"), "hello\n").unwrap();
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-qm",
        "init",
    ]);
    let command = format!(
        "{} --repository /workspace",
        servers().join("py/bin/mcp-server-git").display()
    );
    let r = detonate(&command, &["--workspace", repo.path().to_str().unwrap()]);
    assert_eq!(
        serious(&r),
        vec![(
            "destructive-tool".into(),
            "medium".into(),
            "git_reset".into()
        )],
        "{}",
        r["findings"]
    );
    assert!(accepted_share(&r) >= 0.5, "{}", r["harness"]);
    // Its calls really ran git, inside the jail, attributed to the calls.
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "process-spawn")
    );
}

#[test]
pub fn mcp_server_fetch_is_an_ssrf_surface_of_medium_severity() {
    let r = detonate(
        &servers()
            .join("py/bin/mcp-server-fetch")
            .display()
            .to_string(),
        &[],
    );
    assert_eq!(
        serious(&r),
        vec![("ssrf".into(), "medium".into(), "fetch".into())],
        "{}",
        r["findings"]
    );
}

#[test]
pub fn server_everything_leaks_its_environment_and_fetches_urls() {
    let bin = servers().join("node/node_modules/.bin/mcp-server-everything");
    let r = detonate(&bin.display().to_string(), &[]);
    let s = serious(&r);
    // The environment tool really returns the environment (with the canaries in it).
    assert!(
        s.contains(&("canary-in-output".into(), "high".into(), "get-env".into())),
        "{s:?}"
    );
    assert!(
        s.iter()
            .all(|(rule, sev, _)| sev != "critical" && rule != "sandbox-violation"),
        "{s:?}"
    );
    assert!(accepted_share(&r) >= 0.5, "{}", r["harness"]);
}

#[test]
pub fn server_filesystem_and_memory_raise_only_their_destructive_tools() {
    let node = servers().join("node/node_modules/.bin");
    for command in [
        format!(
            "{} /workspace",
            node.join("mcp-server-filesystem").display()
        ),
        node.join("mcp-server-memory").display().to_string(),
    ] {
        let r = detonate(&command, &[]);
        let s = serious(&r);
        assert!(
            !s.is_empty(),
            "{command}: the destructive tools are a correct finding"
        );
        assert!(
            s.iter()
                .all(|(rule, sev, _)| rule == "destructive-tool" && sev == "medium"),
            "{command}: {s:?}"
        );
        assert!(accepted_share(&r) >= 0.5, "{command}: {}", r["harness"]);
    }
}

/// `warden detonate ARGS` without an extra network namespace: fetching needs the registry.
/// Only benign calls are made (`--no-payloads`), and the servers make no connections of their
/// own (asserted), so nothing tries a non-loopback destination; the jail's own namespace holds
/// the server either way.
fn detonate_fetched(target: &str) -> Value {
    let r = json_of(
        warden_bin(),
        &["detonate", "--output", "json", "--no-payloads", target],
    );
    let events = r["events"].as_array().unwrap();
    assert!(
        !events.iter().any(|e| e["kind"] == "net.connect"
            && e["data"]["op"] == "connect"
            && e["data"]["family"] == "inet"),
        "no connection attempted"
    );
    // One sequence: ids strictly increasing, every tool-call window named after its call event.
    assert!(
        events
            .windows(2)
            .all(|w| w[0]["id"].as_u64() < w[1]["id"].as_u64())
    );
    for e in events {
        if let Some(call) = e["triggered_by"]
            .as_str()
            .and_then(|w| w.strip_prefix("tool_call:"))
        {
            let id: u64 = call.parse().unwrap();
            let origin = events
                .iter()
                .find(|x| x["id"] == id)
                .expect("the window's event");
            assert_eq!(origin["kind"], "mcp.tool_call");
        }
    }
    r
}

#[test]
pub fn registry_targets_are_fetched_then_installed_inside_the_jail() {
    let r = detonate_fetched("pypi:mcp-server-time@2026.10.19");
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert_eq!(r["harness"]["install_exit_code"], 0);
    assert_eq!(
        r["harness"]["argv"][0],
        "/workspace/venv/bin/mcp-server-time"
    );
    let events = r["events"].as_array().unwrap();
    // pip ran inside the jail, in the install window.
    assert!(events.iter().any(|e| {
        e["triggered_by"] == "install"
            && e["kind"] == "process.spawn"
            && e["data"]["argv"].to_string().contains("pip")
    }));
    assert!(events.iter().any(|e| e["triggered_by"] == "startup"));

    let r = detonate_fetched("npm:@modelcontextprotocol/server-memory@2026.8.31");
    assert_eq!(r["tools"].as_array().unwrap().len(), 9);
    assert!(
        serious(&r)
            .iter()
            .all(|(rule, sev, _)| rule == "destructive-tool" && sev == "medium"),
        "{}",
        r["findings"]
    );
}

#[test]
pub fn an_sdist_is_fetched_and_built_inside_the_jail_through_the_index_allowlist() {
    // docopt 0.6.2 exists only as an sdist: its setup.py must run, and only in the jail. The
    // package provides no server, so the command starts a benign fixture with it installed.
    let server = fixtures().join("mcp/servers/benign_echo.py");
    let command = format!("python3 {}", server.display());
    let r = json_of(
        warden_bin(),
        &[
            "detonate",
            "--output",
            "json",
            "--no-payloads",
            "pypi:docopt@0.6.2",
            "--mcp-command",
            &command,
        ],
    );
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert_eq!(r["harness"]["install_exit_code"], 0);
    let events = r["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["triggered_by"] == "install"
            && e["kind"] == "process.spawn"
            && e["data"]["argv"].to_string().contains("setup.py")),
        "the build ran setup.py in the install window"
    );
    let forwarded: Vec<&Value> = events
        .iter()
        .filter(|e| e["data"]["captured"] == "forwarded")
        .collect();
    for host in ["pypi.org", "files.pythonhosted.org"] {
        assert!(
            forwarded.iter().any(|e| e["data"]["host"] == host
                && e["data"]["bytes_received"].as_u64() > Some(0)
                && e["triggered_by"] == "install"),
            "{host} reached through the allowlist: {forwarded:?}"
        );
    }
    assert!(
        forwarded.iter().all(|e| e["triggered_by"] == "install"),
        "egress only while installing"
    );
}

#[test]
pub fn an_interrupted_detonation_leaves_no_folder_and_no_process_behind() {
    use nix::sys::signal::Signal;
    use std::io::BufRead;
    let server = fixtures().join("mcp/servers/benign_echo.py");
    let command = format!("python3 {}", server.display());
    // Interrupted while the host-side client fetches, then while the jail installs; then
    // killed outright (SIGKILL: no clean-up can run), which the next run sweeps up.
    type Reached = fn(&std::path::Path) -> bool;
    let moments: [(&str, Reached, Signal); 3] = [
        (
            "fetching",
            |p| p.join(".fetch/bin/pip").exists(),
            Signal::SIGTERM,
        ),
        (
            "installing",
            |p| p.join("venv/bin/python3").exists(),
            Signal::SIGTERM,
        ),
        (
            "killed",
            |p| p.join("venv/bin/python3").exists(),
            Signal::SIGKILL,
        ),
    ];
    let mut stale: Option<std::path::PathBuf> = None;
    for (moment, reached, signal) in moments {
        let mut child = std::process::Command::new(warden_bin())
            .args(["detonate", "--output", "json", "--no-payloads"])
            .args(["pypi:docopt@0.6.1", "--mcp-command", &command])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let folder = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.strip_prefix("warden detonate: fetching into ")
                    .map(std::path::PathBuf::from)
            })
            .expect("the folder is announced");
        if let Some(old) = stale.take() {
            assert!(
                !old.exists(),
                "the killed run's {} was swept",
                old.display()
            );
        }
        assert!(
            eventually(60, || reached(&folder)),
            "{moment}: never got there"
        );
        let pid = nix::unistd::Pid::from_raw(child.id().cast_signed());
        nix::sys::signal::kill(pid, signal).unwrap();
        let status = child.wait().unwrap();
        let name = folder.to_string_lossy().into_owned();
        assert!(
            eventually(10, || host_processes_with(&name).is_empty()
                && host_processes_with("docopt==0.6.1").is_empty()),
            "{moment}: processes left behind"
        );
        if signal == Signal::SIGKILL {
            assert!(folder.exists(), "nothing could clean up after SIGKILL");
            stale = Some(folder);
            continue;
        }
        assert_eq!(status.code(), Some(143), "{moment}");
        assert!(!folder.exists(), "{moment}: {} is left", folder.display());
    }
    // The next run with a package folder sweeps the killed one's.
    let old = stale.expect("the killed run's folder");
    let r = json_exiting(
        3,
        warden_bin(),
        &["detonate", "--output", "json", "pypi:docopt@9.9.9"],
        &[],
    );
    assert_eq!(r["verdict"], "INCONCLUSIVE");
    assert!(!old.exists(), "{} was swept", old.display());
}

#[test]
pub fn a_failed_install_still_gets_a_report_and_is_never_a_pass() {
    // No such version: the wheel download fails on the host, the in-jail install fails too;
    // what the install did is still reported, with the detonation inconclusive.
    let r = json_exiting(
        3,
        warden_bin(),
        &["detonate", "--output", "json", "pypi:docopt@9.9.9"],
        &[],
    );
    assert_eq!(r["verdict"], "INCONCLUSIVE", "{}", r["findings"]);
    assert_eq!(r["why"]["stage"], "install", "{}", r["why"]);
    let reason = r["why"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the install failed"), "{reason}");
    assert!(
        r["why"]["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("docopt==9.9.9"),
        "pip's own reason: {}",
        r["why"]
    );
    assert_eq!(r["harness"]["install_exit_code"], 1);
    let events = r["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["triggered_by"] == "install"));
    assert!(
        !events.iter().any(|e| e["triggered_by"] == "startup"),
        "no server was started"
    );
}

/// A server that drives a browser (`@playwright/mcp`, from npm), detonated with the system
/// Chromium (`--browser`): its tools are listed, the browser starts in the jail, and a
/// `browser_navigate` call's DNS lookup and connection are events of that very call (the
/// navigation reaches the capture sink; nothing leaves). The browser's own start-up checks are
/// not findings.
#[test]
pub fn a_browser_server_runs_with_the_system_chromium() {
    let bin = servers().join("node/node_modules/.bin/playwright-mcp");
    let r = detonate(&bin.display().to_string(), &["--browser"]);
    assert_ne!(r["verdict"], "INCONCLUSIVE", "{}", r["why"]);
    let tools = names(&r["tools"]);
    assert!(
        tools.contains(&"browser_navigate") && tools.len() >= 20,
        "{tools:?}"
    );
    assert_eq!(
        r["sandbox"]["env"]["PLAYWRIGHT_MCP_EXECUTABLE_PATH"],
        "/usr/lib/chromium/chromium-headless-shell"
    );
    let events = r["events"].as_array().unwrap();
    let navigations: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "mcp.tool_call" && e["data"]["tool"] == "browser_navigate")
        .map(|e| format!("tool_call:{}", e["id"]))
        .collect();
    let in_a_navigation = |kind: &str, key: &str, value: &str| {
        events.iter().any(|e| {
            e["kind"] == kind
                && e["data"][key] == value
                && navigations.iter().any(|w| e["triggered_by"] == w.as_str())
        })
    };
    assert!(
        in_a_navigation("net.dns", "name", "example.test"),
        "{navigations:?}"
    );
    assert!(in_a_navigation("net.connect", "host", "example.test"));
    let spawned = events.iter().any(|e| {
        e["kind"] == "process.spawn"
            && e["data"]["path"] == "/usr/lib/chromium/chromium-headless-shell"
    });
    assert!(spawned);
    // Chromium's network service checks on start whether IPv6 reaches the internet (a UDP
    // socket connected to Google's resolver, nothing sent): marked as the browser's own.
    let ipv6_check = events.iter().any(|e| {
        e["data"]["browser_probe"] == true && e["data"]["address"] == "2001:4860:4860::8888"
    });
    assert!(ipv6_check, "the browser's IPv6 check was not seen");
    let rows = serious(&r);
    // (browser_navigate_back says it changes state: walking into a page an earlier call
    // opened is no rug pull.)
    for rule in [
        "sandbox-violation",
        "evidence-dropped",
        "rug-pull-behaviour",
    ] {
        assert!(!rows.iter().any(|(r, ..)| r == rule), "{rule}: {rows:?}");
    }
    // The browser's own check is no finding.
    let findings = r["findings"].to_string();
    assert!(!findings.contains("2001:4860:4860::8888"), "{findings}");
}
