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
    let home = format!("{}/", warden_jail::DECOY_HOME);
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
}
