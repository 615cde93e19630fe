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
                progress: options.progress,
            };
            harness::run(jail, &start.policy, &start.resolved.argv, &settings)?
        }
    };
    let mut events = merge(install, events, &mut session);
    // The server's own folder is its working area: say so on file events there, for the rules;
    // and files of the runtime installations bound for its program are the runtime's.
    if let Some(src) = &start.resolved.source {
        let changes = |k: EventKind| {
            matches!(
                k,
                EventKind::FileWrite | EventKind::FileDelete | EventKind::FileRename
            )
        };
        mark(
            &mut events,
            &target::mount_point(src),
            "in_workdir",
            &changes,
        );
    }
    for dir in &start.runtime {
        mark(&mut events, dir, "in_runtime", &|k| {
            k == EventKind::FileOpen
        });
    }
    Ok(Observed { session, events })
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
}
