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
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
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
/// The longest line either side may send; a longer one ends the session (the server is
/// killed): the host process holds each line whole.
pub const MAX_LINE: usize = 16 << 20;
/// How long the server may live on after the client closed its stdin.
pub const AFTER_CLIENT: Duration = Duration::from_secs(5);

/// A JSON-RPC id as clients compare it: a number whatever its spelling (`7`, `7.0`, `"7"`, as
/// the TypeScript SDK's `Number(id)` takes it), else the string.
fn id_key(id: &Value) -> Option<String> {
    let number = match id {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => return None,
    };
    match number {
        Some(n) if n.is_finite() => Some(format!("n:{n}")),
        _ => id.as_str().map(|s| format!("s:{s}")),
    }
}

/// Read one line (up to [`MAX_LINE`]); `None` at the end or past the limit.
fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> Option<()> {
    line.clear();
    match r.take(MAX_LINE as u64 + 1).read_until(b'\n', line) {
        Ok(0) | Err(_) => None,
        Ok(_) if line.len() > MAX_LINE => None,
        Ok(_) => Some(()),
    }
}

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

/// A severity's name as reports spell it (`high`).
fn severity_name(s: Severity) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// What the live judge has seen.
#[derive(Default)]
struct Judge {
    /// Tool of each call window.
    windows: BTreeMap<String, String>,
    /// Findings already reported (rule and tool).
    reported: BTreeSet<(String, Option<String>)>,
    /// The events so far (taken from the link as they come, not copied whole each time).
    events: Vec<warden_events::Event>,
    /// The findings at the policy's severity as of the last evaluation.
    standing: Vec<Finding>,
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
    let Ok(mut s) = state.lock() else {
        return (Vec::new(), Vec::new());
    };
    let last = s.events.last().map_or(0, |e| e.id);
    let new = link.events_after(last);
    // Only the client's own calls since the last look: nothing the server did can have
    // changed (the rules judge what the server does), so what stood still stands.
    let quiet = new.iter().all(|e| e.kind == EventKind::McpToolCall);
    s.events.extend(new);
    if quiet && !s.events.is_empty() {
        return (Vec::new(), s.standing.clone());
    }
    let events = std::mem::take(&mut s.events);
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
            severity_name(f.severity),
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
    s.events = events;
    s.standing.clone_from(&standing);
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
            .mode(0o600)
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
    // Each request in flight by its id ([`id_key`]); for a tool call, the id of its own event
    // (what happened after it is what the call did).
    let pending: Arc<Mutex<BTreeMap<String, Option<u64>>>> = Arc::default();
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
            while read_line(&mut lines, &mut line).is_some() {
                let msg = serde_json::from_slice::<Value>(&line).ok();
                // Every request the client makes is awaited: an answer to none is not let
                // through (a server cannot answer under an id the client never used).
                if let Some(m) = &msg
                    && m.get("method").is_some()
                    && let Some(key) = id_key(&m["id"])
                    && m["method"] != "tools/call"
                    && let Ok(mut p) = pending.lock()
                {
                    p.insert(key, None);
                }
                if let Some(msg) = msg
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
                        if let (Ok(mut p), Some(key)) = (pending.lock(), id_key(&msg["id"])) {
                            p.insert(key, Some(id));
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
    // The run's canaries come with its first events: wait for them (a run without decoys has
    // none, and then nothing is searched).
    let mut planted = link.canaries();
    for _ in 0..500 {
        if !planted.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        planted = link.canaries();
    }
    let secrets = crate::harness::secrets_of(planted);
    while read_line(&mut reader, &mut line).is_some() {
        let msg = serde_json::from_slice::<Value>(&line).ok();
        // What the model will read: a planted secret in it is a sighting, as in a detonation.
        let hits = secrets.find(&line);
        for hit in &hits {
            let _ = link.record(
                EventKind::CanarySeen,
                json!({ "planted": hit.planted, "encoding": hit.encoding, "where": "output", "to": "the client" }),
            );
        }
        let is_answer = match &msg {
            Some(Value::Object(m)) => !m.contains_key("method"),
            // A batch (no longer in MCP) or a line that is not JSON: not an answer to a call.
            _ => false,
        };
        if !hits.is_empty() && !is_answer && o.on != Action::Alert {
            // A notification or request of the server's own that carries a secret: not passed.
            log.write(json!({ "kind": "action", "action": "drop", "why": "a planted secret in a message of the server's own" }));
            continue;
        }
        let answered = if is_answer {
            let found = msg
                .as_ref()
                .and_then(|m| id_key(&m["id"]))
                .and_then(|k| pending.lock().ok()?.remove(&k));
            match found {
                Some(a) => Some(a),
                None => {
                    // An answer to no request the client made: dropped.
                    log.write(json!({ "kind": "dropped", "why": "an answer to no request in flight", "id": msg.as_ref().map(|m| m["id"].clone()) }));
                    continue;
                }
            }
        } else {
            None
        };
        let mut forward = line.clone();
        let since = match answered {
            Some(Some(since)) => Some(since),
            // An answer to another request that hands the model a secret is judged too.
            Some(None) if !hits.is_empty() => Some(0),
            _ => None,
        };
        if let Some(since) = since {
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
                        severity_name(f.severity),
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
