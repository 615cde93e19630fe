//! The detonation chamber: start an untrusted MCP server inside the jail with decoys and
//! tracing on, exercise it through a real MCP client, and judge it by what it does.
//!
//! [`target`] works out the start command and the source folder; [`harness`] drives the
//! session (initialize, lists, every tool with benign and adversarial arguments, the lists
//! again), each call in its own attribution window; [`metadata`] reads the tools' own
//! descriptions; [`payloads`] builds and recognises attacks; `warden-rules` turns the events
//! into findings; [`report`] renders the verdict and [`html`] draws it as a page. The server
//! never runs outside the jail, and its whole tree is gone when [`detonate`] returns.

pub mod args;
pub mod fetch;
pub mod harness;
pub mod html;
pub mod metadata;
pub mod payloads;
pub mod report;
pub mod target;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use warden_events::EventKind;
use warden_jail::{Bind, Jail, Policy};

pub use report::Report;

/// What to detonate and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// A local file or folder, or `npm:`/`pypi:`/`github:`.
    pub target: Option<String>,
    /// The start command (program and arguments); with a registry or GitHub target, how to
    /// start the installed package (its programs are on `PATH`).
    pub command: Vec<String>,
    /// Extra environment for the server.
    pub env: Vec<(String, String)>,
    /// A host folder mounted read-write at `/workspace` (the server's working directory);
    /// default: an empty private one.
    pub workspace: Option<PathBuf>,
    /// Time for one request (default 10 s).
    pub call_timeout: Duration,
    /// Time for the whole session (default 120 s).
    pub budget: Duration,
    /// Time for the install phase (default 300 s).
    pub install_budget: Duration,
    /// Rule directories (override and extend the built-in rules).
    pub rules: Vec<PathBuf>,
    /// Send adversarial payloads.
    pub adversarial: bool,
    /// Progress on stderr.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target: None,
            command: Vec::new(),
            env: Vec::new(),
            workspace: None,
            call_timeout: Duration::from_secs(10),
            budget: Duration::from_secs(120),
            install_budget: Duration::from_secs(300),
            rules: Vec::new(),
            adversarial: true,
            progress: false,
        }
    }
}

/// Detonate the target with `jail`; the rules come from `options.rules` over the built-in set.
pub fn detonate(jail: &Jail, options: &Options) -> Result<(Report, Vec<warden_rules::Compiled>)> {
    let begun = Instant::now();
    let rules = warden_rules::ruleset(&options.rules).map_err(|e| anyhow::anyhow!("{e}"))?;
    let fetched = match &options.target {
        Some(t) => fetch::fetch(t)?,
        None => None,
    };
    let mut policy = Policy {
        trace: true,
        decoys: true,
        ..Policy::default()
    };
    // The session's own budget ends it; the jail's wall time is only the backstop.
    policy.limits.wall_time_ms = u64::try_from(options.budget.as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(30_000);
    let mut installed = None;
    // Why the server cannot be started after an install that ran (the report still says what
    // the install did).
    let mut unstartable = None;
    let resolved = match &fetched {
        Some(f) => {
            policy.workspace = Some(f.workspace.path().to_path_buf());
            if let Some(cmd) = &f.install {
                if options.progress {
                    eprintln!("warden detonate: installing in the sandbox");
                }
                let mut p = install_policy(&policy, options);
                p.egress.clone_from(&f.egress);
                let done = harness::install(jail, &p, cmd, &f.hooks, options.install_budget)?;
                if done.exit_code != Some(0) && f.entry.needs_venv() {
                    unstartable = Some(format!(
                        "the install failed in the sandbox (exit {:?}): {}",
                        done.exit_code,
                        last_lines(&done.stderr, 6)
                    ));
                }
                installed = Some(done);
            }
            // The package's programs are on the server's PATH.
            let path = policy.env.get("PATH").cloned().unwrap_or_default();
            policy.env.insert(
                "PATH".into(),
                format!("/workspace/venv/bin:/workspace/node_modules/.bin:{path}"),
            );
            if options.command.is_empty() {
                let argv = match (&unstartable, f.entry.argv(f.workspace.path())) {
                    (None, Ok(argv)) => argv,
                    (Some(_), _) => Vec::new(),
                    (None, Err(e)) if installed.is_some() => {
                        unstartable = Some(format!("{e:#}"));
                        Vec::new()
                    }
                    (None, Err(e)) => return Err(e),
                };
                target::Resolved {
                    display: options.target.clone().unwrap_or_default(),
                    argv,
                    source: None,
                    location: f.location.clone(),
                }
            } else {
                // The package is installed; the operator says how to start it.
                let r = target::resolve(None, &options.command)?;
                target::Resolved {
                    display: options.target.clone().unwrap_or_default(),
                    location: f.location.clone().or(r.location),
                    ..r
                }
            }
        }
        None => {
            let r = target::resolve(options.target.as_deref(), &options.command)?;
            // A local package's own install lifecycle runs too, as npm or pip would run it.
            if let Some(src) = &r.source {
                let inside = target::mount_point(src);
                let plan = fetch::project::plan(src, &inside, fetch::project::Mode::Local);
                if let Some(cmd) = &plan.command {
                    if options.progress {
                        eprintln!("warden detonate: running its install lifecycle in the sandbox");
                    }
                    let mut p = install_policy(&policy, options);
                    p.egress = plan.egress;
                    p.binds.push(Bind {
                        source: src.clone(),
                        target: Some(inside),
                        writable: false,
                    });
                    installed = Some(harness::install(
                        jail,
                        &p,
                        cmd,
                        &plan.hooks,
                        options.install_budget,
                    )?);
                }
            }
            r
        }
    };
    let (install_events, install_exit) = match installed {
        Some(i) => (i.events, i.exit_code),
        None => (Vec::new(), None),
    };
    if let Some(src) = &resolved.source {
        policy.binds.push(Bind {
            source: src.clone(),
            target: Some(target::mount_point(src)),
            writable: false,
        });
    }
    if fetched.is_none() {
        policy.workspace = options.workspace.clone();
    }
    for (k, v) in &options.env {
        policy.env.insert(k.clone(), v.clone());
    }
    let settings = harness::Settings {
        call_timeout: options.call_timeout,
        budget: options.budget,
        adversarial: options.adversarial,
        progress: options.progress,
    };
    let (mut session, session_events) = match &unstartable {
        None => harness::run(jail, &policy, &resolved.argv, &settings).context("detonation")?,
        Some(why) => {
            if options.progress {
                eprintln!("warden detonate: {why}");
            }
            not_started(why)
        }
    };
    let mut events = merge(install_events, session_events, &mut session);
    // The server's own folder is its working area: say so on file events there, for the rules.
    if let Some(src) = &resolved.source {
        let area = target::mount_point(src);
        let file = |k: EventKind| {
            matches!(
                k,
                EventKind::FileWrite | EventKind::FileDelete | EventKind::FileRename
            )
        };
        for e in events.iter_mut().filter(|e| file(e.kind)) {
            let inside = ["path", "to"].iter().any(|k| {
                e.data[*k].as_str().is_some_and(|p| {
                    target::absolute(std::path::Path::new(p)).is_ok_and(|p| p.starts_with(&area))
                })
            });
            if inside {
                e.data["in_workdir"] = json!(true);
            }
        }
    }
    let windows = session.windows.clone();
    let tool_of = move |w: Option<&str>| w.and_then(|w| windows.get(w).cloned());
    let findings = warden_rules::evaluate(&rules, &events, &tool_of);
    let score = report::score(&findings);
    let tools = session
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t["name"],
                "description_sha256": harness::sha256(t["description"].as_str().unwrap_or("")),
                "annotations": t.get("annotations"),
                "input_schema": t.get("inputSchema"),
            })
        })
        .collect();
    let report = Report {
        schema: "warden.report/v1",
        target: resolved.display.clone(),
        mode: "detonate",
        verdict: warden_events::Verdict::from_score(score),
        score,
        duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
        findings,
        tools,
        harness: json!({
            "calls": session.calls,
            "accepted": session.accepted,
            "benign_calls": session.benign.0,
            "benign_accepted": session.benign.1,
            "benign_valid": session.benign_valid,
            "aborted": session.aborted,
            "server_stderr": session.stderr.chars().take(4000).collect::<String>(),
            "argv": resolved.argv,
            "install_exit_code": install_exit,
        }),
        events,
        sandbox: serde_json::to_value(&policy).unwrap_or_default(),
        warden_version: env!("CARGO_PKG_VERSION"),
        location: resolved.location.clone(),
    };
    Ok((report, rules))
}

/// The install phase's policy: the session's, with the install's own time budget (the jail's
/// wall time a backstop 30 s past it).
fn install_policy(policy: &Policy, options: &Options) -> Policy {
    let mut p = policy.clone();
    p.limits.wall_time_ms = u64::try_from(options.install_budget.as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(30_000);
    p
}

/// The session of a server that could not be started: nothing but an inconclusive `install`
/// timing, which the rules turn into a high finding (never a silent pass).
fn not_started(why: &str) -> (harness::Session, Vec<warden_events::Event>) {
    let session = harness::Session {
        aborted: Some(why.to_owned()),
        ..harness::Session::default()
    };
    let event = warden_events::Event {
        id: 1,
        t_ms: 0,
        kind: EventKind::McpTiming,
        pid: None,
        triggered_by: None,
        data: json!({ "phase": "install", "inconclusive": true, "error": why }),
    };
    (session, vec![event])
}

/// The last `n` non-empty lines of `text`, joined with ` | `, with control and invisible
/// characters written out (the text is a package's).
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    report::clean(&lines[lines.len().saturating_sub(n)..].join(" | "))
}

/// One sequence from the install phase's events and the session's: the session's ids (and the
/// tool-call windows named after them) move past the install's, its times after the install's
/// end.
fn merge(
    install: Vec<warden_events::Event>,
    session: Vec<warden_events::Event>,
    s: &mut harness::Session,
) -> Vec<warden_events::Event> {
    let offset = install.iter().map(|e| e.id).max().unwrap_or(0);
    let t_offset = install.iter().map(|e| e.t_ms).max().unwrap_or(0);
    if offset == 0 {
        return session;
    }
    let rename = |w: &str| match w
        .strip_prefix("tool_call:")
        .and_then(|n| n.parse::<u64>().ok())
    {
        Some(n) => format!("tool_call:{}", n + offset),
        None => w.to_owned(),
    };
    s.windows = s
        .windows
        .iter()
        .map(|(w, tool)| (rename(w), tool.clone()))
        .collect();
    let mut all = install;
    all.extend(session.into_iter().map(|mut e| {
        e.id += offset;
        e.t_ms += t_offset;
        e.triggered_by = e.triggered_by.as_deref().map(rename);
        for key in ["call", "event"] {
            if let Some(id) = e.data.get(key).and_then(serde_json::Value::as_u64) {
                e.data[key] = json!(id + offset);
            }
        }
        // "event N …" in a payload's evidence text.
        if let Some(text) = e.data.get("evidence").and_then(serde_json::Value::as_str) {
            let shifted = shift_event_ids(text, offset);
            e.data["evidence"] = json!(shifted);
        }
        e
    }));
    all
}

/// `text` with every `event N` renumbered by `offset`.
fn shift_event_ids(text: &str, offset: u64) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("event ") {
        out.push_str(&rest[..i + 6]);
        rest = &rest[i + 6..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        match rest[..digits].parse::<u64>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_ids_and_windows_move_together() {
        let ev = |id: u64, kind: EventKind, window: Option<&str>, data: serde_json::Value| {
            warden_events::Event {
                id,
                t_ms: id,
                kind,
                pid: None,
                triggered_by: window.map(str::to_owned),
                data,
            }
        };
        let install = vec![
            ev(1, EventKind::InstallScript, Some("install"), json!({})),
            ev(2, EventKind::FileOpen, Some("install"), json!({})),
        ];
        let session = vec![
            ev(1, EventKind::McpToolCall, None, json!({"tool": "t"})),
            ev(
                2,
                EventKind::CanarySeen,
                Some("tool_call:1"),
                json!({"event": 3, "call": 1}),
            ),
            ev(
                3,
                EventKind::HarnessPayload,
                None,
                json!({"evidence": "event 2 opened x", "call": 1}),
            ),
        ];
        let mut s = harness::Session::default();
        s.windows.insert("tool_call:1".into(), "t".into());
        let all = merge(install, session, &mut s);
        let ids: Vec<u64> = all.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        assert_eq!(all[3].triggered_by.as_deref(), Some("tool_call:3"));
        assert_eq!(all[3].data["event"], 5);
        assert_eq!(all[4].data["evidence"], "event 4 opened x");
        assert_eq!(all[4].data["call"], 3);
        assert_eq!(s.windows.get("tool_call:3").map(String::as_str), Some("t"));
    }
}
