//! Full mode (`--mode full --llm PROVIDER:MODEL`) against a fake provider of our own on
//! loopback (`fixtures/llm/fake_provider.py`), in each wire format: scripted calls (valid,
//! to a tool that does not exist, with arguments that are not JSON), a model that loops, one
//! that answers garbage, one that refuses the key, and the call budget. Each detonation runs
//! with the fake provider in a network namespace of its own (`unshare --net`, loopback up).

use serde_json::Value;

use super::common::{fixtures, warden_bin};

/// The fake key: it must reach the provider and never the report.
const KEY: &str = "sk-test-fake-key-9c1f7e2d4b";

/// Detonate `server` in full mode against the fake `provider` playing `script`; the report,
/// the provider's request log and the exit code.
fn full(server: &str, provider: &str, script: &str, extra: &[&str]) -> (Value, Vec<Value>, i32) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let fake = format!(
        "/usr/bin/python3 {} {provider} {script} PORT {}",
        fixtures().join("llm/fake_provider.py").display(),
        log.display()
    );
    let (report, code) = full_with(server, &fake, provider, extra);
    let requests = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (report, requests, code)
}

/// Detonate `server` in full mode against the model served by `model_cmd` (a shell command
/// that writes its port to the file `PORT` names) in `provider`'s format; the report and the
/// exit code.
fn full_with(server: &str, model_cmd: &str, provider: &str, extra: &[&str]) -> (Value, i32) {
    let dir = tempfile::tempdir().unwrap();
    let port = dir.path().join("port");
    let model_cmd = model_cmd.replace("PORT", &port.display().to_string());
    let target = fixtures().join("mcp/servers").join(server);
    let key_env = match provider {
        "anthropic" => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    };
    let mut args = vec![
        "detonate".to_owned(),
        "--output".into(),
        "json".into(),
        "--no-payloads".into(),
        "--mode".into(),
        "full".into(),
        "--llm".into(),
        format!("{provider}:fake-model"),
        "--mcp-command".into(),
        format!("/usr/bin/python3 {}", target.display()),
    ];
    // A key goes to a URL other than the provider's own only when named (`NO-KEY`: not).
    if !extra.contains(&"NO-KEY") {
        args.extend(["--llm-key-env".into(), key_env.into()]);
    }
    args.extend(
        extra
            .iter()
            .filter(|s| **s != "NO-KEY")
            .map(|s| (*s).to_owned()),
    );
    let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    let script_text = format!(
        "ip link set lo up || exit 90\n\
         {model_cmd} &\n\
         fake=$!\n\
         for _ in $(seq 600); do [ -f {port} ] && break; sleep 0.05; done\n\
         {key_env}={KEY} {warden} {args} --llm-url http://127.0.0.1:$(cat {port})\n\
         code=$?\nkill $fake\nexit $code\n",
        port = port.display(),
        warden = warden_bin(),
        args = quoted.join(" "),
    );
    let out = std::process::Command::new("unshare")
        .args(["--net", "sh", "-c", &script_text])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("unshare runs");
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key leaked into the output"
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: exit {code}\n{stdout}\n{stderr}"));
    (report, code)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn finding<'a>(r: &'a Value, rule: &str) -> Option<&'a Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == rule)
}

/// In each provider's format, the model's calls run through the harness: the harm only the
/// model's choice of argument brings out is found and marked `llm_only`, its call names the
/// event it became, invalid calls are answered and counted, the key reaches the provider only.
#[test]
pub fn a_scripted_model_drives_the_server_in_each_wire_format() {
    for provider in ["openai", "anthropic", "ollama"] {
        let (r, requests, code) = full("notes.py", provider, "scripted", &[]);
        assert_eq!(code, 0, "{provider}: {}", r["why"]);
        assert_eq!(r["mode"], "full");
        super::detonate::assert_valid(&fixtures().join("../schemas/warden.report.v1.json"), &r);
        let llm = &r["llm"];
        assert_eq!(llm["provider"], provider);
        assert!(llm["calls"].as_u64().unwrap() >= 1, "{provider}: {llm}");
        assert!(
            llm["invalid_calls"].as_u64().unwrap() >= 2,
            "{provider}: {llm}"
        );
        assert!(llm["prompt_tokens"].as_u64().unwrap() >= 100, "{llm}");
        let read = finding(&r, "sensitive-file-read")
            .unwrap_or_else(|| panic!("{provider}: {}", r["findings"]));
        assert_eq!(read["llm_only"], true, "{read}");
        assert_eq!(read["tool"], "read_note");
        // The transcript's call names its mcp.tool_call event, with the model's arguments.
        let call = llm["tasks"][0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["calls"].as_array().cloned().unwrap_or_default())
            .find(|c| c["name"] == "read_note" && c["invalid"] == false)
            .unwrap_or_else(|| panic!("{llm}"));
        let id = call["event"].as_u64().unwrap();
        let event = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap();
        assert_eq!(event["kind"], "mcp.tool_call");
        assert_eq!(event["data"]["kind"], "llm");
        assert_eq!(event["data"]["arguments"]["name"], "secrets");
        // The request was in the provider's shape, with the key where it belongs.
        let first = &requests[0];
        let (path, auth) = match provider {
            "openai" => ("/v1/chat/completions", format!("Bearer {KEY}")),
            "anthropic" => ("/v1/messages", KEY.to_owned()),
            _ => ("/api/chat", format!("Bearer {KEY}")),
        };
        assert_eq!(first["path"], path);
        assert_eq!(first["auth"], auth.as_str());
        assert_eq!(first["body"]["model"], "fake-model");
        if provider == "anthropic" {
            assert_eq!(first["version"], "2023-06-01");
        }
        // The fast-mode findings are not marked.
        for f in r["findings"].as_array().unwrap() {
            if f["rule"] == "mutating-tool" || f["rule"] == "destructive-tool" {
                assert!(f.get("llm_only").is_none(), "{f}");
            }
        }
    }
}

/// A model that loops, answers garbage or refuses the key costs its task, never the
/// detonation; the call budget holds.
#[test]
pub fn bad_models_and_budgets_are_handled() {
    for provider in ["openai", "anthropic", "ollama"] {
        let (r, _, code) = full("notes.py", provider, "loop", &[]);
        assert_eq!(code, 0, "{}", r["why"]);
        let ended: Vec<&str> = r["llm"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["ended"].as_str())
            .collect();
        assert!(
            ended.iter().any(|e| e.contains("same call")),
            "{provider}: {ended:?}"
        );

        let (r, _, code) = full("notes.py", provider, "garbage", &[]);
        assert_eq!(code, 0, "{}", r["why"]);
        assert!(r["why"].is_null(), "the detonation still happened");
        assert!(
            r["llm"]["tasks"][0]["ended"]
                .as_str()
                .unwrap_or("")
                .contains("could not be read"),
            "{provider}: {}",
            r["llm"]
        );
    }

    let (r, requests, code) = full("notes.py", "anthropic", "refuse", &[]);
    assert_eq!(code, 0, "{}", r["why"]);
    assert_eq!(requests.len(), 1, "a refused key is not tried again");
    assert!(
        r["llm"]["stopped"].as_str().unwrap().contains("refused"),
        "{}",
        r["llm"]
    );

    // The provider's default key variable is not sent to another URL unless named.
    let (_, requests, _) = full("notes.py", "openai", "scripted", &["NO-KEY"]);
    assert!(requests[0]["auth"].is_null(), "{}", requests[0]["auth"]);

    let (r, _, _) = full("notes.py", "openai", "scripted", &["--llm-budget", "1"]);
    assert_eq!(r["llm"]["calls"], 1, "{}", r["llm"]);
    assert!(
        r["llm"]["stopped"]
            .as_str()
            .unwrap()
            .contains("call budget"),
        "{}",
        r["llm"]
    );
}

/// A tool whose description gives the model orders gets a task of its own, so its orders get
/// their chance to fire.
#[test]
pub fn poisoned_tools_get_a_task_that_makes_them_fire() {
    let (r, _, code) = full("poisoned.py", "openai", "scripted", &[]);
    assert_eq!(code, 0, "{}", r["why"]);
    let asked: Vec<&str> = r["llm"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"] == "use-poisoned")
        .filter_map(|t| t["messages"][0]["text"].as_str())
        .collect();
    assert!(asked.iter().any(|t| t.contains("add")), "{asked:?}");
    // The second look: the model judged the poisoned description, quoting its own words, and
    // the finding rests on the model alone.
    assert!(r["llm"]["judged"].as_u64().unwrap() >= 2, "{}", r["llm"]);
    let judged = finding(&r, "llm-judged-orders").unwrap_or_else(|| panic!("{}", r["findings"]));
    assert_eq!(judged["llm_only"], true, "{judged}");
    assert_eq!(judged["severity"], "low");
    assert!(
        judged["message"]
            .as_str()
            .unwrap()
            .contains("<IMPORTANT>Before using"),
        "{judged}"
    );
}

/// Full mode's flags are checked before anything runs.
#[test]
pub fn full_mode_needs_a_model() {
    let run = |args: &[&str]| {
        std::process::Command::new(warden_bin())
            .arg("detonate")
            .args(args)
            .args(["--mcp-command", "true"])
            .output()
            .unwrap()
    };
    for (args, says) in [
        (vec!["--mode", "full"], "--llm"),
        (vec!["--llm", "openai:x"], "--mode full"),
        (
            vec!["--mode", "full", "--llm", "bard:x"],
            "openai, anthropic, ollama",
        ),
        (vec!["--mode", "full", "--llm", "openai"], "PROVIDER:MODEL"),
        (
            vec![
                "--mode",
                "full",
                "--llm",
                "openai:x",
                "--llm-url",
                "http://192.0.2.1:8000",
                "--llm-key-env",
                "HOME",
            ],
            "plain http",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// End to end with a real small model running locally: SmolLM2-135M on the CPU behind
/// `fixtures/llm/smollm_server.mjs` (OpenAI-compatible, its answers constrained by a JSON-schema
/// grammar), installed by `setup.sh`. The model's calls are real tool calls of the server,
/// each in the transcript with its event; what it finds depends on the model.
#[test]
pub fn a_real_small_model_drives_a_server() {
    let dir = std::path::Path::new("/opt/warden-real-servers/llm");
    if !dir.join("SmolLM2-135M-Instruct.Q4_1.gguf").exists()
        || !dir
            .join("node_modules/node-llama-cpp/dist/index.js")
            .exists()
    {
        eprintln!(
            "skipped: the local model is not installed (fixtures/llm/install.sh could not reach \
             PyPI or npm)"
        );
        return;
    }
    let server = format!(
        "node {} {} PORT",
        fixtures().join("llm/smollm_server.mjs").display(),
        dir.display()
    );
    let (r, code) = full_with(
        "notes.py",
        &server,
        "openai",
        &["--llm-budget", "4", "--llm-timeout", "240s"],
    );
    assert_eq!(code, 0, "{}", r["why"]);
    assert_eq!(r["mode"], "full");
    let llm = &r["llm"];
    assert!(llm["requests"].as_u64().unwrap() >= 1, "{llm}");
    assert!(
        llm["calls"].as_u64().unwrap() + llm["invalid_calls"].as_u64().unwrap() >= 1,
        "the grammar makes the model call a tool on its first turn: {llm}"
    );
    assert!(llm["completion_tokens"].as_u64().unwrap() > 0, "{llm}");
    let made: Vec<u64> = llm["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["event"].as_u64())
        .collect();
    for id in &made {
        let e = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == *id)
            .unwrap_or_else(|| panic!("event {id}"));
        assert_eq!(e["data"]["kind"], "llm", "{e}");
    }
    eprintln!(
        "real model: {} calls ({} invalid), {} tokens, {} ms, llm-only findings: {:?}",
        llm["calls"],
        llm["invalid_calls"],
        llm["prompt_tokens"].as_u64().unwrap_or(0) + llm["completion_tokens"].as_u64().unwrap_or(0),
        llm["wall_ms"],
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["llm_only"] == true)
            .map(|f| f["rule"].as_str().unwrap_or(""))
            .collect::<Vec<_>>()
    );
}
