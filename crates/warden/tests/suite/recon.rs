//! `warden serve --profile recon`, end to end: real nmap, ffuf and arjun in the sandbox,
//! driven through the official MCP Python SDK, against a target in a network namespace the
//! test creates (`fixtures/recon/lab.sh`: a veth pair, TEST-NET-1 and a unique-local range,
//! nothing routed anywhere else), and the jail's direct-target network attacked from inside.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::common::{call_err as err, call_ok as ok, fixtures, names, sdk_python, the_binary};

/// The lab's addresses (see lab.sh).
const V4: &str = "192.0.2.2";
const V4_OTHER: &str = "192.0.2.3";
const V4_OWN: &str = "192.0.2.1";
const V6: &str = "fd00:77::2";

/// Run `sh -c script` in a fresh lab (`unshare --net --mount lab.sh`) with `env`.
fn in_lab(script: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--mount"])
        .arg(fixtures().join("recon/lab.sh"))
        .args(["sh", "-c", script])
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("unshare runs")
}

/// Serve the recon profile with `config` (TOML) in a lab and make `calls` through the SDK;
/// the client's report (tools, status, policy, each call's result or error, the audit).
fn serve(config: &str, calls: &Value, env: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("recon.toml");
    std::fs::write(&cfg, config).unwrap();
    let input = dir.path().join("calls.json");
    std::fs::write(&input, calls.to_string()).unwrap();
    let script = format!(
        "{} {} {} {} < {}",
        sdk_python().display(),
        fixtures().join("recon/client.py").display(),
        the_binary(),
        cfg.display(),
        input.display()
    );
    let out = in_lab(&script, env);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn config(targets: &[&str]) -> String {
    format!("[recon]\ntargets = {}\n", json!(targets))
}

fn port(result: &Value, n: u64) -> &Value {
    result["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["port"] == n)
        .unwrap_or_else(|| panic!("no port {n}: {result}"))
}

#[test]
pub fn the_recon_profile_lists_exactly_its_available_tools_with_closed_inputs() {
    let r = serve(&config(&[V4]), &json!([]), &[]);
    let names = names(&r["tools"]);
    // nuclei ships in no package here: absent, and the status says why.
    assert_eq!(names, ["nmap_scan", "ffuf_discover", "arjun_params"]);
    let status = &r["status"]["recon"]["tools"];
    assert_eq!(status["nuclei_scan"]["available"], false);
    assert!(
        status["nuclei_scan"]["why"]
            .as_str()
            .unwrap()
            .contains("nuclei")
    );
    assert_eq!(status["nmap_scan"]["version"], "7.93");
    assert_eq!(status["ffuf_discover"]["version"], "1.1.0");
    assert_eq!(status["arjun_params"]["version"], "2.2.7");
    assert_eq!(r["policy"]["recon"]["targets"], json!([V4]));
    for t in r["tools"].as_array().unwrap() {
        assert_no_free_form(t["name"].as_str().unwrap(), &t["input"]);
    }
}

/// Fails if any input property of `tool` could carry a flag, a command, a path or extra
/// arguments: the schema is closed, no property is named like one, and every string is an
/// enum or pattern-checked (only the target and the URL are patterns).
fn assert_no_free_form(tool: &str, schema: &Value) {
    assert_eq!(schema["additionalProperties"], false, "{tool}: open schema");
    let props = schema["properties"].as_object().unwrap();
    for (name, p) in props {
        let lower = name.to_ascii_lowercase();
        for banned in [
            "command",
            "args",
            "arg",
            "flags",
            "flag",
            "additional",
            "extra",
            "options",
            "path",
            "file",
            "script",
            "shell",
        ] {
            assert!(
                !lower.split('_').any(|w| w == banned) && !lower.starts_with("additional"),
                "{tool}.{name}: a free-form name"
            );
        }
        walk(tool, name, p);
    }
    fn walk(tool: &str, name: &str, p: &Value) {
        if p.get("enum").is_some() {
            return;
        }
        match p["type"].as_str() {
            Some("string") => {
                assert!(
                    p.get("pattern").is_some() && p.get("maxLength").is_some(),
                    "{tool}.{name}: an unconstrained string"
                );
                assert!(
                    ["target", "ports", "url"].contains(&name),
                    "{tool}.{name}: only the target, ports and URL are checked strings"
                );
            }
            Some("array") => {
                assert!(
                    p.get("maxItems").is_some(),
                    "{tool}.{name}: unbounded array"
                );
                walk(tool, name, &p["items"]);
            }
            Some("integer" | "number") => {
                assert!(
                    p.get("maximum").is_some(),
                    "{tool}.{name}: unbounded number"
                );
            }
            other => panic!("{tool}.{name}: unexpected type {other:?}"),
        }
    }
}

#[test]
pub fn nmap_reports_the_targets_open_and_closed_ports_with_services_over_ipv4_and_ipv6() {
    let calls = json!([
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "22,80,2222", "scan": "version" } },
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "1-1024,2222,8080" } },
        { "tool": "nmap_scan", "args": { "target": V6, "ports": "22,2222,8080" } },
    ]);
    let r = serve(&config(&[V4, "fd00:77::/64"]), &calls, &[]);
    let version = ok(&r, 0);
    assert_eq!(version["status"], "completed", "{version}");
    assert_eq!(port(version, 22)["state"], "closed");
    assert_eq!(port(version, 80)["state"], "closed");
    let ssh = port(version, 2222);
    assert_eq!(ssh["state"], "open");
    assert_eq!(ssh["service"], "ssh");
    assert_eq!(ssh["product"], "OpenSSH");
    assert_eq!(ssh["version"], "9.2p1 Debian 2+deb12u3");
    let argv: Vec<&str> = version["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &argv[1..],
        [
            "-Pn",
            "-n",
            "-sT",
            "-sV",
            "--version-light",
            "-p",
            "22,80,2222",
            "-oX",
            "-",
            V4
        ]
    );
    // Exactly the open ports are open; the 1,024 others closed, as scanning directly says.
    let wide = ok(&r, 1);
    let states: Vec<(u64, &str)> = wide["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["state"] != "closed")
        .map(|f| (f["port"].as_u64().unwrap(), f["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [(2222, "open"), (8080, "open")], "{wide}");
    // nmap reports the closed ones in bulk: the summary carries them.
    assert_eq!(
        wide["summary"]["collapsed"],
        json!([{ "address": V4, "state": "closed", "count": 1024, "ports": "1-1024" }])
    );
    let attempts = &wide["connections"]["attempts"][0];
    assert_eq!(attempts["address"], V4);
    assert_eq!(attempts["open"], "2222,8080");
    assert_eq!(attempts["closed"], "1-1024");
    let v6 = ok(&r, 2);
    assert_eq!(v6["target"], V6);
    assert!(v6["command"].as_array().unwrap().contains(&json!("-6")));
    assert_eq!(port(v6, 22)["state"], "closed");
    assert_eq!(port(v6, 2222)["state"], "open");
    assert_eq!(port(v6, 8080)["state"], "open");
    // Every connection is in the call's audit entry: attempts by state, relays with bytes.
    let audit = &r["audit"][0];
    assert_eq!(audit["tool"], "nmap_scan");
    let conns = &audit["outcome"]["connections"];
    assert_eq!(conns["attempts"][0]["open"], "2222");
    let banner = conns["relayed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["port"] == 2222 && c["bytes_received"].as_u64() > Some(0))
        .unwrap_or_else(|| panic!("the banner's relay: {conns}"));
    assert_eq!(banner["address"], V4);
}

#[test]
pub fn ffuf_finds_the_planted_paths_and_arjun_the_planted_parameters() {
    let url = format!("http://{V4}:8080");
    let calls = json!([
        { "tool": "ffuf_discover", "args": { "url": format!("{url}/FUZZ"), "wordlist": "warden-small" } },
        { "tool": "ffuf_discover", "args": { "url": format!("{url}/FUZZ"), "wordlist": "warden-small",
                                             "match_codes": [403], "rate": 50 } },
        { "tool": "arjun_params", "args": { "url": format!("{url}/search") } },
        { "tool": "arjun_params", "args": { "url": format!("{url}/search"), "method": "POST" } },
    ]);
    let r = serve(&config(&[V4]), &calls, &[]);
    let found = ok(&r, 0);
    assert_eq!(found["status"], "completed", "{found}");
    let mut inputs: Vec<&str> = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["input"].as_str().unwrap())
        .collect();
    inputs.sort_unstable();
    assert_eq!(inputs, ["admin", "api", "backup"], "{found}");
    assert_eq!(port_of(found, "admin")["status"], 200);
    // Matching only 403 finds nothing there, paced (threads and a per-thread delay).
    let forbidden = ok(&r, 1);
    let argv = forbidden["command"].to_string();
    assert!(
        argv.contains("\"-mc\",\"403\"") && argv.contains("\"-p\",\"0.200\""),
        "{argv}"
    );
    assert_eq!(forbidden["status"], "completed", "{forbidden}");
    assert_eq!(forbidden["findings"], json!([]));
    for (i, method) in [(2, "GET"), (3, "POST")] {
        let params = ok(&r, i);
        assert_eq!(params["status"], "completed", "{params}");
        let f = &params["findings"][0];
        assert_eq!(f["method"], method);
        assert!(
            f["params"].as_array().unwrap().contains(&json!("debug")),
            "{method}: {params}"
        );
    }
}

fn port_of<'a>(result: &'a Value, input: &str) -> &'a Value {
    result["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["input"] == input)
        .unwrap()
}

#[test]
pub fn targets_off_the_list_are_refused_by_the_tool_and_audited() {
    let calls = json!([
        { "tool": "nmap_scan", "args": { "target": V4_OTHER, "ports": "8080" } },
        { "tool": "nmap_scan", "args": { "target": V4_OWN, "ports": "8080" } },
        { "tool": "ffuf_discover", "args": { "url": "http://lab.test:8080/FUZZ", "wordlist": "warden-small" } },
        { "tool": "arjun_params", "args": { "url": "http://169.254.169.254/latest" } },
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "1-20000" } },
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "80", "flags": "--script=all" } },
        { "tool": "ffuf_discover", "args": { "url": "http://192.0.2.2:8080/", "wordlist": "warden-small" } },
    ]);
    // The list is the lab's /24: its own address (this side of the veth) is still refused.
    let r = serve(&config(&["192.0.2.0/24"]), &calls, &[]);
    let r_own = err(&r, 1);
    assert_eq!(r_own["kind"], "target_not_allowed", "{r_own}");
    assert_eq!(ok(&r, 0)["status"], "completed", "192.0.2.3 is on the /24");
    assert_eq!(err(&r, 2)["kind"], "target_not_allowed");
    assert!(
        err(&r, 2)["message"]
            .as_str()
            .unwrap()
            .contains("never resolved")
    );
    assert_eq!(err(&r, 3)["kind"], "target_not_allowed");
    assert_eq!(err(&r, 4)["kind"], "invalid_arguments");
    assert!(
        err(&r, 4)["message"]
            .as_str()
            .unwrap()
            .contains("at most 10000")
    );
    assert_eq!(err(&r, 5)["kind"], "invalid_arguments");
    assert_eq!(err(&r, 6)["kind"], "invalid_arguments");
    // Each refusal is in the audit log.
    let audited: Vec<&Value> = r["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"]["error"] == "target_not_allowed")
        .collect();
    assert_eq!(audited.len(), 3, "{}", r["audit"]);
    assert_eq!(audited[0]["arguments"]["target"], V4_OWN);
}

#[test]
pub fn with_the_tools_check_off_the_sandboxs_network_still_refuses_other_addresses() {
    // A debug build lets the test switch the tool's own check off: only the jail is left.
    let calls = json!([
        { "tool": "nmap_scan", "args": { "target": V4_OTHER, "ports": "22,2222,8080" } },
        { "tool": "ffuf_discover", "args": { "url": format!("http://{V4_OTHER}:8080/FUZZ"), "wordlist": "warden-small" } },
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "2222" } },
    ]);
    let env = [("WARDEN_TEST_UNCHECKED_RECON_TARGETS", "1")];
    let r = serve(&config(&[V4]), &calls, &env);
    let nmap = ok(&r, 0);
    assert_eq!(nmap["status"], "refused", "{nmap}");
    assert_eq!(
        nmap["connections"]["attempts"][0]["not_allowed"],
        "22,2222,8080"
    );
    assert_eq!(nmap["connections"]["relayed_total"], 0);
    // nmap sees no answer at all: filtered, never open.
    for f in nmap["findings"].as_array().unwrap() {
        assert_eq!(f["state"], "filtered", "{f}");
    }
    let ffuf = ok(&r, 1);
    assert_eq!(ffuf["status"], "refused", "{ffuf}");
    assert_eq!(ffuf["findings"], json!([]));
    assert_eq!(ok(&r, 2)["status"], "completed");
}

#[test]
pub fn a_hostile_program_in_the_jail_reaches_the_targets_and_nothing_else() {
    let run = |targets: &str, allowed: &str| {
        let script = format!(
            "{} run --trace /dev/null --target {targets} --ro-bind {}:/run/fx -- \
             python3 /run/fx/hostile.py {allowed} {V4_OTHER} {V4_OWN}",
            the_binary(),
            fixtures().join("recon").display()
        );
        let out = in_lab(&script, &[]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let one = run(V4, V4);
    assert!(one.contains(&format!("allowed ok served-by {V4}")), "{one}");
    // Off the list, the host's own side, a metadata address: refused before any packet
    // (EACCES, not a refusal from the far end). Loopback is the jail's own.
    for line in [
        "other errno 13",
        "own errno 13",
        "metadata errno 13",
        "loopback-host errno 111",
    ] {
        assert!(one.contains(line), "{line}: {one}");
    }
    // Changing the address while the tracer reads it reaches nothing more (how often the
    // allowed address wins the race depends on the scheduler: only what is reached counts).
    let race = one
        .lines()
        .find_map(|l| l.strip_prefix("race reached "))
        .unwrap_or_else(|| panic!("{one}"));
    assert!(race == V4 || race == "-", "{one}");
    // A network entry covers its addresses but never the host's own.
    let net = run("192.0.2.0/24", V4_OTHER);
    assert!(
        net.contains(&format!("allowed ok served-by {V4_OTHER}")),
        "{net}"
    );
    assert!(net.contains("own errno 13"), "{net}");
}

#[test]
pub fn a_scan_that_outlives_its_time_is_timed_out_and_malformed_output_keeps_raw() {
    // A stand-in nmap whose report breaks off, installed in a prefix of its own.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let bin = dir.path().join("prefix/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("nmap");
    std::fs::copy(fixtures().join("recon/fake-nmap.sh"), &fake).unwrap();
    let calls = json!([
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "80" } },
    ]);
    let cfg = format!("{}nmap = {}\n", config(&[V4]), json!(fake));
    let r = serve(&cfg, &calls, &[]);
    let broken = ok(&r, 0);
    assert_eq!(broken["status"], "error", "{broken}");
    assert_eq!(broken["findings"], json!([]));
    assert!(
        broken["raw"].as_str().unwrap().contains("<nmaprun"),
        "{broken}"
    );
    assert_eq!(broken["raw_truncated"], false);
    // A version scan of the HTTP port waits on nmap's probes for seconds: 2 s is too short.
    let calls = json!([
        { "tool": "nmap_scan", "args": { "target": V4, "ports": "8080", "scan": "version", "timeout_s": 2 } },
    ]);
    let cfg = format!("{}raw_max_bytes = 1024\n", config(&[V4]));
    let r = serve(&cfg, &calls, &[]);
    let slow = ok(&r, 0);
    assert_eq!(slow["status"], "timed_out", "{slow}");
    assert!(slow["duration_ms"].as_u64().unwrap() < 10_000, "{slow}");
}

#[test]
pub fn recon_needs_valid_targets_in_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let serve_with = |text: &str| {
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, text).unwrap();
        Command::new(the_binary())
            .args(["serve", "--profile", "recon", "--config"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for (text, says) in [
        ("", "no targets are configured"),
        (
            "[recon]\ntargets = ['lab.test']\n",
            "not an IP address or a CIDR",
        ),
        ("[recon]\ntargets = ['10.0.0.7/8']\n", "host bits set"),
        (
            "[recon]\ntargets = ['10.0.0.7']\nconnect_timeout_ms = 0\n",
            "connect_timeout_ms",
        ),
    ] {
        let out = serve_with(text);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(stderr.contains(says), "{text}: {stderr}");
    }
    assert!(Path::new(&fixtures().join("recon/lab.sh")).exists());
}

#[test]
pub fn port_states_through_the_jail_are_those_of_a_direct_scan_filtered_hosts_included() {
    // The same scans, directly and through `warden run --target` (which nmap_scan uses), of a
    // live host (open and closed ports) and a host that drops everything (filtered), v4 and v6.
    let scans = [
        ("192.0.2.0/24", format!("-p 1-1100,2222,8080 {V4}")),
        ("192.0.2.0/24", "-p 20-30,2222 192.0.2.9".to_owned()),
        ("fd00:77::/64", format!("-6 -p 20-30,2222,8080 {V6}")),
        ("fd00:77::/64", "-6 -p 20-25 fd00:77::9".to_owned()),
    ];
    let (parts, _) = direct_and_jailed(&scans, &[]);
    let filtered = states(&parts[3]);
    assert!(
        filtered.iter().all(|(_, s)| s == "filtered"),
        "{filtered:?}"
    );
    let live = states(&parts[1]);
    assert_eq!(
        live.iter().filter(|(_, s)| s == "open").count(),
        2,
        "{live:?}"
    );
}

#[test]
pub fn answers_that_come_late_are_passed_on_exactly_refusals_included() {
    // With the target's answers slowed (LAB_SLOW: a token bucket on its side), connects are
    // still in progress when they return: the jail parks them and answers each when the
    // target does, a refusal by a reset from the parking spot, an open port by reconnecting.
    let scans = [
        ("192.0.2.0/24", format!("-p 1-400,2222,8080 {V4}")),
        ("fd00:77::/64", format!("-6 -p 1-200,2222,8080 {V6}")),
    ];
    let (_, events) = direct_and_jailed(&scans, &[("LAB_SLOW", "1")]);
    let deferred = |state: &str| {
        events
            .iter()
            .filter(|e| e["data"]["deferred"] == true && e["data"]["target"] == state)
            .count()
    };
    // (The two open ports answer early or late as nmap's random order has it: the states
    // above are checked either way.)
    assert!(
        deferred("closed") > 50,
        "late refusals passed on: {}",
        deferred("closed")
    );
    assert_eq!(deferred("filtered"), 0);
}

#[test]
pub fn in_a_container_with_a_masked_proc_the_direct_target_network_is_the_same() {
    let masked = fixtures().join("containers/masked-proc.sh");
    let scans = [
        ("192.0.2.0/24", format!("-p 1-200,2222,8080 {V4}")),
        ("192.0.2.0/24", "-p 20-25 192.0.2.9".to_owned()),
    ];
    let (_, events) =
        direct_and_jailed_in(&scans, &[("LAB_SLOW", "1")], &masked.display().to_string());
    assert!(
        events.iter().any(|e| e["data"]["deferred"] == true),
        "parked connects"
    );
}

/// Run each of `scans` (the target list, nmap's arguments) directly and through `warden run
/// --target` in one lab (with `env`), assert the port states are the same, and return the
/// reports (direct, jailed, …) and the jailed runs' events.
fn direct_and_jailed(scans: &[(&str, String)], env: &[(&str, &str)]) -> (Vec<String>, Vec<Value>) {
    direct_and_jailed_in(scans, env, "")
}

/// [`direct_and_jailed`] with `warden` started through `wrapper` (a container's conditions).
fn direct_and_jailed_in(
    scans: &[(&str, String)],
    env: &[(&str, &str)],
    wrapper: &str,
) -> (Vec<String>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let mut script = String::new();
    for (i, (targets, scan)) in scans.iter().enumerate() {
        let nmap = format!("nmap -Pn -n -sT -oX - {scan}");
        let trace = dir.path().join(format!("{i}.jsonl"));
        script.push_str(&format!(
            "echo '=== direct'; {nmap}; echo '=== jail'; {wrapper} {} run --trace {} --target {targets} -- {nmap}; ",
            the_binary(),
            trace.display()
        ));
    }
    let out = in_lab(&script, env);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let parts: Vec<String> = text.split("=== ").skip(1).map(str::to_owned).collect();
    assert_eq!(parts.len(), 2 * scans.len(), "{text}");
    for (i, pair) in parts.chunks(2).enumerate() {
        let direct = states(&pair[0]);
        let jailed = states(&pair[1]);
        assert!(!direct.is_empty(), "{}", pair[0]);
        assert_eq!(jailed, direct, "scan {}: {}", i, scans[i].1);
    }
    let events = (0..scans.len())
        .flat_map(|i| super::common::read_events(&dir.path().join(format!("{i}.jsonl"))))
        .collect();
    (parts, events)
}

/// (port, state) of every port in an nmap XML report, in order.
fn states(xml: &str) -> Vec<(u32, String)> {
    let attr = |s: &str, name: &str| {
        let at = s.find(&format!("{name}=\""))? + name.len() + 2;
        Some(s[at..at + s[at..].find('"')?].to_owned())
    };
    xml.split("<port ")
        .skip(1)
        .filter_map(|p| {
            let port = attr(p, "portid")?.parse().ok()?;
            let state = attr(p.split("<state ").nth(1)?, "state")?;
            Some((port, state))
        })
        .collect()
}

#[test]
pub fn many_short_connections_to_a_target_leave_no_descriptor_behind() {
    // Regression: each relay's two sockets were kept until the run ended, so a program that
    // opened and closed connections in a loop ran the supervisor out of descriptors, after
    // which every port read as unreachable. With 256 descriptors, 400 connections need them
    // released as each one ends.
    let script = format!(
        "prlimit --nofile=256:256 {} run --nofile 200 --trace /dev/null --target {V4} -- python3 -c '{}'",
        the_binary(),
        "import socket\n\
         ok = 0\n\
         for i in range(400):\n\
         \x20   s = socket.create_connection((\"192.0.2.2\", 2222), 5)\n\
         \x20   ok += s.recv(64).startswith(b\"SSH-2.0\")\n\
         \x20   s.close()\n\
         print(\"banners\", ok)"
    );
    let out = in_lab(&script, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("banners 400"), "{stdout}");
}

#[test]
pub fn a_blocking_connect_to_a_silent_target_holds_only_itself() {
    // Regression: a blocking connect was answered by the tracer itself, which then waited the
    // whole connect time, and every other traced syscall of the jail (another thread's file
    // opens here) waited with it.
    let program = "import socket, threading, time\n\
                   opens = []\n\
                   def busy():\n\
                   \x20   n, end = 0, time.time() + 1.0\n\
                   \x20   while time.time() < end:\n\
                   \x20       open(\"/etc/hostname\").close(); n += 1\n\
                   \x20   opens.append(n)\n\
                   t = threading.Thread(target=busy); t.start()\n\
                   s = socket.socket()\n\
                   try:\n\
                   \x20   s.connect((\"192.0.2.9\", 80))\n\
                   except OSError as e:\n\
                   \x20   print(\"connect errno\", e.errno)\n\
                   t.join(); print(\"opens\", opens[0])";
    let script = format!(
        "{} run --trace /dev/null --target-connect-ms 1500 --target 192.0.2.0/24 -- python3 -c '{program}'",
        the_binary()
    );
    let out = in_lab(&script, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("connect errno 110"), "ETIMEDOUT: {stdout}");
    let opens: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("opens "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(opens > 50, "the other thread went on: {stdout}");
}

#[test]
pub fn a_held_connect_restarted_by_signals_leaves_one_answer() {
    // A held connect interrupted by signals (SA_RESTART: the kernel restarts it, each time as
    // a new notification) ends with one answer and one event: the notifications that are gone
    // are dropped (their slots freed, no reply, no event), the last one times out.
    // Another process sends the signals (250 at 100 Hz), so they stop on their own.
    let program = "import os, signal, socket, subprocess, sys\n\
                   signal.signal(signal.SIGALRM, lambda *a: None)\n\
                   signal.siginterrupt(signal.SIGALRM, False)\n\
                   kick = \"import os, sys, time\\nfor i in range(250):\\n    os.kill(int(sys.argv[1]), 14); time.sleep(0.01)\"\n\
                   subprocess.Popen([sys.executable, \"-c\", kick, str(os.getpid())])\n\
                   s = socket.socket()\n\
                   try:\n\
                   \x20   s.connect((\"192.0.2.9\", 80))\n\
                   except OSError as e:\n\
                   \x20   print(\"connect errno\", e.errno)";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let script = format!(
        "{} run --trace {} --target-connect-ms 1000 --target 192.0.2.0/24 -- python3 -c '{program}'",
        the_binary(),
        trace.display()
    );
    let out = in_lab(&script, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("connect errno 110"), "{stdout}");
    let connects = super::common::read_events(&trace)
        .into_iter()
        .filter(|e| e["kind"] == "net.connect" && e["data"]["address"] == "192.0.2.9")
        .count();
    assert!(connects <= 3, "{connects} events for one connect");
}
