//! Phase four: the session — the harness drives the running server (see [`crate::harness`]),
//! and its events join the install's in one numbered sequence, with file events inside the
//! server's own folder marked `in_workdir` for the rules.
//!
//! Guarantees: the server's whole tree is gone when this returns; a server that could not be
//! started is not started (its [`Session`] says why).

use anyhow::Result;
use serde_json::json;
use warden_events::{Event, EventKind};
use warden_jail::Jail;

use super::start::Start;
use crate::harness::{self, Session};
use crate::{Options, target};

/// What the session saw.
#[derive(Debug)]
pub struct Observed {
    /// What the harness learned.
    pub session: Session,
    /// Every event, the install's first.
    pub events: Vec<Event>,
}

/// Run the session (unless the start is blocked) and merge its events after `install`'s.
pub fn session(
    jail: &Jail,
    options: &Options,
    start: &Start,
    install: Vec<Event>,
    sinks: &[warden_scan::sinks::Sink],
) -> Result<Observed> {
    let (mut session, events) = match &start.blocked {
        Some(why) => {
            super::progress(options, &why.reason);
            let session = Session {
                aborted: Some(why.reason.clone()),
                ..Session::default()
            };
            (session, Vec::new())
        }
        None => {
            let settings = harness::Settings {
                call_timeout: options.call_timeout,
                budget: options.budget,
                adversarial: options.adversarial,
                calls_per_tool: options.calls_per_tool,
                progress: options.progress,
                llm: options.llm.clone(),
                http: options.http.clone(),
                remote: options.remote.clone(),
                sinks: sinks.to_vec(),
                dwell: options.dwell,
            };
            harness::run(jail, &start.policy, &start.resolved.argv, &settings)?
        }
    };
    let mut events = merge(install, events, &mut session);
    // The server's own folder is its working area: say so on file events there, for the rules;
    // files of the runtime installations bound for its program are the runtime's; and what
    // the package manager itself did while installing is not the package's doing.
    if let Some(src) = &start.resolved.source {
        let file = |k: EventKind| {
            matches!(
                k,
                EventKind::FileOpen
                    | EventKind::FileWrite
                    | EventKind::FileDelete
                    | EventKind::FileRename
            )
        };
        mark(&mut events, &target::mount_point(src), "in_workdir", &file);
    }
    for dir in &start.runtime {
        mark(&mut events, dir, "in_runtime", &|k| {
            k == EventKind::FileOpen
        });
    }
    mark_installer(&mut events);
    Ok(Observed { session, events })
}

/// Mark `by_installer` on the install window's events done by the package manager's own
/// processes: a process whose last exec (as the kernel saw it) is `npm` run by `node` from a
/// system path, or `pip` from the venv Warden made. Lifecycle scripts and builds run in child
/// processes of their own and stay the package's; a process that forked without exec is not
/// known, so not marked.
fn mark_installer(events: &mut [Event]) {
    let mut installer: std::collections::HashMap<i32, bool> = std::collections::HashMap::new();
    let is_package_manager = |d: &serde_json::Value| {
        let path = d["path"].as_str().unwrap_or("");
        let arg = |i: usize| d["argv"][i].as_str().unwrap_or("");
        let base = |p: &str| p.rsplit('/').next().unwrap_or("").to_owned();
        let system = |p: &str| p.starts_with("/usr/") || p.starts_with("/bin/");
        let npm = base(path) == "node"
            && system(path)
            && system(arg(1))
            && matches!(base(arg(1)).as_str(), "npm" | "npm-cli.js");
        let pip = ["/workspace/venv", crate::fetch::project::BUILD_VENV]
            .iter()
            .any(|venv| {
                path.strip_prefix(venv)
                    .and_then(|p| p.strip_prefix("/bin/"))
                    .is_some_and(|p| p.starts_with("pip"))
            });
        npm || pip
    };
    for e in events.iter_mut() {
        if e.triggered_by.as_deref() != Some("install") {
            continue;
        }
        let Some(pid) = e.pid else { continue };
        if e.kind == EventKind::ProcessSpawn {
            installer.insert(pid, is_package_manager(&e.data));
            continue;
        }
        if installer.get(&pid).copied().unwrap_or(false) {
            e.data["by_installer"] = json!(true);
        }
    }
}

/// Set `key` on the events of the kinds `which` takes whose path (or rename target) lies in
/// `area`.
fn mark(
    events: &mut [Event],
    area: &std::path::Path,
    key: &str,
    which: &dyn Fn(EventKind) -> bool,
) {
    for e in events.iter_mut().filter(|e| which(e.kind)) {
        let inside = ["path", "to"].iter().any(|k| {
            e.data[*k].as_str().is_some_and(|p| {
                target::absolute(std::path::Path::new(p)).is_ok_and(|p| p.starts_with(area))
            })
        });
        if inside {
            e.data[key] = json!(true);
        }
    }
}

/// One sequence from the install phase's events and the session's: the session's ids (and the
/// tool-call windows named after them) move past the install's, its times after the install's
/// end.
fn merge(install: Vec<Event>, session: Vec<Event>, s: &mut Session) -> Vec<Event> {
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
    // The transcript's calls name their events.
    if let Some(tasks) = s.llm.as_mut().and_then(|l| l["tasks"].as_array_mut()) {
        for m in tasks
            .iter_mut()
            .flat_map(|t| t["messages"].as_array_mut().into_iter().flatten())
        {
            for c in m["calls"].as_array_mut().into_iter().flatten() {
                if let Some(id) = c["event"].as_u64() {
                    c["event"] = json!(id + offset);
                }
            }
        }
    }
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
        let ev = |id: u64, kind: EventKind, window: Option<&str>, data: serde_json::Value| Event {
            id,
            t_ms: id,
            kind,
            pid: None,
            triggered_by: window.map(str::to_owned),
            data,
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
        let mut s = Session::default();
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

    #[test]
    fn only_the_package_managers_own_doings_are_marked() {
        let ev = |id: u64, pid: i32, kind: EventKind, data: serde_json::Value| Event {
            id,
            t_ms: id,
            kind,
            pid: Some(pid),
            triggered_by: Some("install".into()),
            data,
        };
        let npmrc = json!({ "path": "/home/sandbox/.npmrc" });
        let mut events = vec![
            ev(
                1,
                5,
                EventKind::ProcessSpawn,
                json!({ "path": "/usr/bin/node", "argv": ["node", "/usr/bin/npm", "rebuild"] }),
            ),
            ev(2, 5, EventKind::FileOpen, npmrc.clone()),
            // A lifecycle script: its own process.
            ev(
                3,
                6,
                EventKind::ProcessSpawn,
                json!({ "path": "/usr/bin/sh", "argv": ["sh", "-c", "node hook.js"] }),
            ),
            ev(4, 6, EventKind::FileOpen, npmrc.clone()),
            // argv[0] is the program's to choose: "npm" there proves nothing.
            ev(
                5,
                7,
                EventKind::ProcessSpawn,
                json!({ "path": "/usr/bin/node", "argv": ["npm", "steal.js"] }),
            ),
            ev(6, 7, EventKind::FileOpen, npmrc.clone()),
            ev(
                7,
                8,
                EventKind::ProcessSpawn,
                json!({ "path": "/workspace/venv/bin/pip", "argv": ["pip", "install", "x"] }),
            ),
            ev(
                8,
                8,
                EventKind::FileWrite,
                json!({ "path": "/home/sandbox/.cache/pip/x" }),
            ),
        ];
        mark_installer(&mut events);
        let marked: Vec<u64> = events
            .iter()
            .filter(|e| e.data["by_installer"] == true)
            .map(|e| e.id)
            .collect();
        assert_eq!(marked, vec![2, 8]);
    }
}
