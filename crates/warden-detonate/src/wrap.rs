//! `warden wrap`: one MCP server run for a real client inside the chamber, for as long as the
//! client keeps it. The client's stdio is passed through line by line; the server runs as a
//! detonation's would (the decoy home and canaries of a persona, the tracer and the boundary
//! capture on, egress only to `--egress` names, its program and folder bound read-only, a
//! workspace only if the operator names one); each `tools/call` opens its own attribution
//! window; the same rules judge the events as they come, and a finding at the policy's
//! severity is acted on: `block` answers the call it came from with an error the client shows
//! (the server lives), `kill` answers it so and ends the server, `alert` only reports it. Every
//! tool call, finding and action goes to the audit log (JSON lines) and findings to stderr.
//!
//! Guarantees: the server never runs outside the jail and its whole tree ends when the client
//! goes (stdin closed) or the policy kills it; the bytes the client and the server exchange are
//! passed unchanged except a response replaced by `block`/`kill`; a finding is reported once
//! (per rule and tool). Limits: calls in flight at once share the window of the latest
//! (attribution is per call only when the client waits for each answer, as clients do); a
//! finding that appears only after its call was answered can no longer block that call (it is
//! logged, and `kill` still ends the server).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use warden_events::{EventKind, Finding, Severity};
use warden_jail::Jail;
use warden_jail::TraceLink;

use crate::Options;
use crate::phases::install::Install;
use crate::phases::source::Source;

/// What a finding at the policy's severity does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Answer the call it came from with an error; the server lives.
    Block,
    /// Answer it so and end the server.
    Kill,
    /// Report it only.
    Alert,
}

/// How to wrap.
#[derive(Debug, Clone)]
pub struct WrapOptions {
    /// The server's start command.
    pub command: Vec<String>,
    /// A host folder mounted read-write at `/workspace`.
    pub workspace: Option<PathBuf>,
    /// Host names the server may reach for real.
    pub egress: Vec<String>,
    /// Extra environment for the server.
    pub env: Vec<(String, String)>,
    /// Rule folders beside the built-in rules.
    pub rules: Vec<PathBuf>,
    /// The severity from which the action applies.
    pub at: Severity,
    /// The action.
    pub on: Action,
    /// The audit log (appended).
    pub log: PathBuf,
}

/// The JSON-RPC error code of a call Warden answered instead of the server.
pub const BLOCKED_CODE: i64 = -32001;

struct Log(Mutex<std::fs::File>);

impl Log {
    fn write(&self, mut entry: Value) {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        entry["time_ms"] = ms.into();
        if let Ok(mut f) = self.0.lock() {
            let _ = writeln!(f, "{entry}");
            let _ = f.flush();
        }
    }
}

/// What the live judge has seen.
#[derive(Default)]
struct Judge {
    /// Tool of each call window.
    windows: BTreeMap<String, String>,
    /// Findings already reported (rule and tool).
    reported: BTreeSet<(String, Option<String>)>,
}

/// The findings at or above `at` of everything the tracer has delivered up to now, and which
/// of them are new (each finding is logged once, per rule and tool).
fn judge(
    link: &TraceLink,
    state: &Mutex<Judge>,
    rules: &[warden_rules::Compiled],
    at: Severity,
    log: &Log,
) -> (Vec<Finding>, Vec<Finding>) {
    let events = link.events();
    let Ok(mut s) = state.lock() else {
        return (Vec::new(), Vec::new());
    };
    let windows = s.windows.clone();
    let tool_of = |w: Option<&str>| w.and_then(|w| windows.get(w).cloned());
    let mut acted = Vec::new();
    let mut standing = Vec::new();
    for f in warden_rules::evaluate(rules, &events, &tool_of) {
        if f.severity >= at {
            standing.push(f.clone());
        }
        if !s.reported.insert((f.rule.clone(), f.tool.clone())) {
            continue;
        }
        let evidence: Vec<&warden_events::Event> = events
            .iter()
            .filter(|e| f.evidence.contains(&e.id))
            .take(8)
            .collect();
        log.write(json!({
            "kind": "finding", "rule": f.rule, "severity": f.severity, "tool": f.tool,
            "message": f.message, "evidence": evidence,
        }));
        eprintln!(
            "warden wrap: {} {}{}: {}",
            serde_json::to_value(f.severity)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            f.rule,
            f.tool
                .as_deref()
                .map(|t| format!(" [{t}]"))
                .unwrap_or_default(),
            f.message
        );
        if f.severity >= at {
            acted.push(f);
        }
    }
    (acted, standing)
}

/// Run the server for the client on this process's stdin and stdout; returns the exit status
/// to leave with (the server's, or 137 when the policy killed it).
pub fn wrap(jail: &Jail, o: &WrapOptions) -> Result<i32> {
    let rules = warden_rules::ruleset(&o.rules).map_err(|e| anyhow::anyhow!("{e}"))?;
    let options = Options {
        command: o.command.clone(),
        workspace: o.workspace.clone(),
        env: o.env.clone(),
        // As long as the client keeps it (the jail's wall limit is this and 30 s).
        budget: Duration::from_secs(30 * 24 * 3600),
        ..Options::default()
    };
    let resolved = crate::target::resolve(None, &o.command)?;
    let install = Install {
        events: Vec::new(),
        exit_code: None,
        ran: false,
        failure: None,
    };
    let mut start = crate::phases::start::start(&options, &Source::Local(resolved), &install)?;
    if let Some(why) = &start.blocked {
        bail!("the server cannot be started in the sandbox: {why:?}");
    }
    start.policy.egress.clone_from(&o.egress);
    start.policy.initial_window = Some("startup".into());
    if let Some(dir) = o.log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let log = Arc::new(Log(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&o.log)
            .with_context(|| format!("the audit log {}", o.log.display()))?,
    )));
    let mut run = jail
        .spawn(&start.policy, &start.resolved.argv)
        .context("starting the server in the sandbox")?;
    let link = Arc::new(run.trace.take().context("the tracer did not start")?);
    log.write(json!({
        "kind": "wrap.started", "command": o.command, "argv": start.resolved.argv,
        "user": start.policy.user, "hostname": start.policy.hostname,
    }));
    let killer = run.killer();
    let mut server_in = run.stdin.take().context("the server's stdin")?;
    let server_out = run.stdout.take().context("the server's stdout")?;
    if let Some(mut err) = run.stderr.take() {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::stderr());
        });
    }
    let state = Arc::new(Mutex::new(Judge::default()));
    // JSON-RPC id (as JSON text) of each tool call in flight, with the id of its own event
    // (what happened after it is what the call did).
    let pending: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let out = Arc::new(Mutex::new(std::io::stdout()));

    // The client's side: calls open their windows on their way in.
    let client = {
        let (link, state, pending, log) =
            (link.clone(), state.clone(), pending.clone(), log.clone());
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut lines = stdin.lock();
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if let Ok(msg) = serde_json::from_slice::<Value>(&line)
                    && msg["method"] == "tools/call"
                {
                    let tool = msg["params"]["name"].as_str().unwrap_or("").to_owned();
                    let data = json!({ "tool": tool, "arguments": msg["params"]["arguments"], "wrapped": true });
                    if let Ok((Some(id), _)) = link.record_then_window(
                        EventKind::McpToolCall,
                        data,
                        "tool_call:",
                        "tool_call:dropped",
                    ) {
                        if let Ok(mut s) = state.lock() {
                            s.windows.insert(format!("tool_call:{id}"), tool.clone());
                        }
                        if let Ok(mut p) = pending.lock() {
                            p.insert(msg["id"].to_string(), id);
                        }
                    }
                    log.write(json!({ "kind": "tool_call", "id": msg["id"], "tool": tool }));
                }
                if server_in
                    .write_all(&line)
                    .and_then(|()| server_in.flush())
                    .is_err()
                {
                    break;
                }
            }
            // The client is gone: the server's stdin closes with it.
        })
    };

    // Findings outside any answer (start-up, a detached child): judged every half second.
    let watcher = {
        let (link, state, log, killed, killer) = (
            link.clone(),
            state.clone(),
            log.clone(),
            killed.clone(),
            killer.clone(),
        );
        let rules = rules.clone();
        let (at, on) = (o.at, o.on);
        std::thread::spawn(move || {
            while !link.wait_closed(Duration::from_millis(500)) {
                let (acted, _) = judge(&link, &state, &rules, at, &log);
                if on == Action::Kill && !acted.is_empty() {
                    log.write(json!({ "kind": "action", "action": "kill", "rule": acted[0].rule }));
                    killed.store(true, std::sync::atomic::Ordering::SeqCst);
                    killer.kill();
                    return;
                }
            }
        })
    };

    // The server's side: an answer to a call is judged before it goes out.
    let mut reader = BufReader::new(server_out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let msg = serde_json::from_slice::<Value>(&line).ok();
        let answered = msg
            .as_ref()
            .filter(|m| m.get("method").is_none())
            .and_then(|m| pending.lock().ok()?.remove(&m["id"].to_string()));
        let mut forward = line.clone();
        if let Some(since) = answered {
            // Everything the call did is in once the window is closed (the tracer answers in
            // order). A finding at the policy's severity with evidence from this call acts on
            // it, however often the same finding was seen before.
            let _ = link.window(None);
            let (_, standing) = judge(&link, &state, &rules, o.at, &log);
            let during = standing
                .iter()
                .find(|f| f.evidence.iter().any(|id| *id > since));
            if let (Some(f), Some(m)) = (during, &msg)
                && o.on != Action::Alert
            {
                let action = if o.on == Action::Kill {
                    "kill"
                } else {
                    "block"
                };
                let reply = json!({
                    "jsonrpc": "2.0", "id": m["id"],
                    "error": { "code": BLOCKED_CODE, "message": format!(
                        "blocked by Warden: {} ({}): {}", f.rule,
                        serde_json::to_value(f.severity).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                        f.message) },
                });
                forward = format!("{reply}\n").into_bytes();
                log.write(
                    json!({ "kind": "action", "action": action, "rule": f.rule, "id": m["id"] }),
                );
                if o.on == Action::Kill {
                    killed.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        if let Ok(mut w) = out.lock()
            && w.write_all(&forward).and_then(|()| w.flush()).is_err()
        {
            break;
        }
        if killed.load(std::sync::atomic::Ordering::SeqCst) {
            killer.kill();
            break;
        }
    }
    killer.kill();
    let outcome = run.wait();
    let _ = link.wait_closed(Duration::from_secs(5));
    let _ = judge(&link, &state, &rules, o.at, &log);
    let _ = watcher.join();
    drop(client);
    let code = match &outcome {
        _ if killed.load(std::sync::atomic::Ordering::SeqCst) => 137,
        Ok(o) => o.exit_code.unwrap_or(0),
        Err(_) => 1,
    };
    log.write(json!({ "kind": "wrap.ended", "exit_code": code }));
    Ok(code)
}
