//! Decoy identity on events, before the rules run: every open of a planted decoy file and
//! every sighting of one of its canaries carries the same `data.decoy` (`file:~/.aws/credentials`),
//! so a rule can join "this decoy was read" to "its secret left" (the `decoy-read-and-exposed`
//! chain). A canary planted in the environment has no file and gets no label.
//!
//! Guarantees: labels only ever name a decoy the chamber planted; an event is labelled from its
//! recorded path, so the label is only as good as that path (the tracer's name for the file:
//! a hard link made by the server is not labelled; DESIGN's decoys by inode are the next step).

use serde_json::json;
use warden_events::{Event, EventKind};

/// The decoy a `file:~/…` canary name belongs to (its `#part` suffix dropped).
fn decoy_of_planted(planted: &str) -> Option<String> {
    planted
        .starts_with("file:~/")
        .then(|| planted.split('#').next().unwrap_or(planted).to_owned())
}

/// Label the opens of decoy files and the sightings of their canaries in `events`.
pub fn label(events: &mut [Event]) {
    let files: Vec<String> = warden_jail::warden_trace::decoys::Decoys::generate()
        .files
        .iter()
        .map(|f| f.path.to_owned())
        .collect();
    let home = format!("{}/", warden_jail::persona::home());
    for e in events.iter_mut() {
        let decoy = match e.kind {
            EventKind::FileOpen => e.data["path"]
                .as_str()
                .and_then(|p| p.strip_prefix(&home))
                .filter(|rel| files.iter().any(|f| f == rel))
                .map(|rel| format!("file:~/{rel}")),
            EventKind::CanarySeen => e.data["planted"].as_str().and_then(decoy_of_planted),
            _ => None,
        };
        if let (Some(d), Some(data)) = (decoy, e.data.as_object_mut()) {
            data.insert("decoy".into(), json!(d));
        }
    }
}

/// What the tracer read of a written file (an agent client's configuration: `file.write` with
/// `op: agent_config`, recorded when the file is scanned, after its window may have closed)
/// belongs to the window of the last write to that path before it; and a planted secret found
/// in the decoy file it was planted in (the file rewritten in place) was not copied anywhere:
/// `in_own_file`.
pub fn attribute(events: &mut [Event]) {
    let home = format!("{}/", warden_jail::persona::home());
    let mut last: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for e in events.iter_mut() {
        let path = e.data["path"].as_str().map(str::to_owned);
        match (e.kind, path) {
            (EventKind::FileWrite, Some(p)) if e.data["op"] == "agent_config" => {
                if e.triggered_by.is_none()
                    && let Some(w) = last.get(&p)
                {
                    e.triggered_by = Some(w.clone());
                }
            }
            (EventKind::FileWrite | EventKind::FileRename, Some(p)) => {
                if let Some(w) = &e.triggered_by {
                    last.insert(p, w.clone());
                }
            }
            (EventKind::CanarySeen, Some(p)) if e.data["where"] == "file" => {
                let own = e.data["planted"]
                    .as_str()
                    .and_then(|pl| pl.strip_prefix("file:~/"))
                    .map(|rel| rel.split('#').next().unwrap_or(rel))
                    .is_some_and(|rel| p == format!("{home}{rel}"));
                if own && let Some(d) = e.data.as_object_mut() {
                    d.insert("in_own_file".into(), json!(true));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: u64, kind: EventKind, data: serde_json::Value) -> Event {
        Event {
            id,
            t_ms: 0,
            kind,
            pid: Some(3),
            triggered_by: None,
            data,
        }
    }

    #[test]
    fn opens_and_sightings_of_one_decoy_share_its_label() {
        let mut events = vec![
            event(
                1,
                EventKind::FileOpen,
                json!({ "path": "/home/sandbox/.aws/credentials" }),
            ),
            event(
                2,
                EventKind::CanarySeen,
                json!({ "planted": "file:~/.aws/credentials#id" }),
            ),
            event(
                3,
                EventKind::CanarySeen,
                json!({ "planted": "env:GITHUB_TOKEN" }),
            ),
            event(
                4,
                EventKind::FileOpen,
                json!({ "path": "/home/sandbox/notes.txt" }),
            ),
            event(
                5,
                EventKind::FileOpen,
                json!({ "path": "/workspace/.aws/credentials" }),
            ),
        ];
        label(&mut events);
        assert_eq!(events[0].data["decoy"], "file:~/.aws/credentials");
        assert_eq!(events[1].data["decoy"], "file:~/.aws/credentials");
        for e in &events[2..] {
            assert!(e.data.get("decoy").is_none(), "{e:?}");
        }
    }

    #[test]
    fn contents_join_their_write_and_a_decoy_rewritten_holds_its_own_secret() {
        let ev = crate::test_event;
        let cfg = "/home/sandbox/.cursor/mcp.json";
        let mut events = vec![
            ev(
                1,
                EventKind::FileWrite,
                Some("tool_call:9"),
                json!({ "path": cfg, "op": "open" }),
            ),
            ev(
                2,
                EventKind::FileWrite,
                None,
                json!({ "path": cfg, "op": "agent_config" }),
            ),
            ev(
                3,
                EventKind::CanarySeen,
                None,
                json!({ "where": "file", "path": cfg, "planted": "file:~/.cursor/mcp.json#db" }),
            ),
            ev(
                4,
                EventKind::CanarySeen,
                None,
                json!({ "where": "file", "path": "/tmp/x", "planted": "file:~/.cursor/mcp.json" }),
            ),
        ];
        attribute(&mut events);
        assert_eq!(events[1].triggered_by.as_deref(), Some("tool_call:9"));
        assert_eq!(events[2].data["in_own_file"], true);
        assert!(
            events[3].data.get("in_own_file").is_none(),
            "a copy elsewhere"
        );
    }
}
