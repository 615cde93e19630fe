//! `snapshot_create`, `snapshot_list`, `snapshot_restore`, `snapshot_delete`, `snapshot_diff`:
//! the session's workspace saved and restored exactly (see `crate::snapshots`). Snapshot
//! operations of a server run one at a time.

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Hints, Spec, ToolError, parse};
use crate::snapshots::{Manifest, SnapshotError};
use crate::state::CallContext;

fn id_prop() -> Value {
    json!({ "type": "string", "pattern": "^snap-[0-9a-f]{1,32}-[0-9]{1,9}$" })
}

fn summary_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "id": { "type": "string" }, "description": { "type": "string" },
                        "created_ms": { "type": "integer" }, "files": { "type": "integer" },
                        "total_bytes": { "type": "integer" },
                        "skipped": { "type": "array", "items": { "type": "string" },
                                     "description": "special files (FIFOs, sockets, devices) not snapshotted" },
                        "left_protected": { "type": "array", "items": { "type": "string" },
                                     "description": "restore in a lasting workspace: protected paths left as they are now" } },
        "required": ["id", "description", "created_ms", "files", "total_bytes"]
    })
}

pub(super) fn spec(name: &str) -> Option<Spec> {
    let obj = |props: Value, required: Value| json!({ "type": "object", "properties": props, "required": required, "additionalProperties": false });
    let s = |name, title, description: &str, input, output, ro, destructive, idempotent| {
        let hints = Hints {
            read_only: ro,
            destructive,
            idempotent,
        };
        Spec::local(name, title, description.to_owned(), input, output, hints)
    };
    Some(match name {
        "snapshot_create" => s(
            "snapshot_create",
            "Snapshot the workspace",
            "Save the whole workspace (files, directories, symlinks, modes, times); returns its id.",
            obj(
                json!({ "description": { "type": "string", "maxLength": 1000 } }),
                json!([]),
            ),
            summary_schema(),
            false,
            false,
            false,
        ),
        "snapshot_list" => s(
            "snapshot_list",
            "List snapshots",
            "The workspace's snapshots, oldest first, and the store's size.",
            obj(json!({}), json!([])),
            json!({ "type": "object",
                    "properties": { "snapshots": { "type": "array", "items": summary_schema() },
                                    "store_bytes": { "type": "integer" } },
                    "required": ["snapshots", "store_bytes"] }),
            true,
            false,
            true,
        ),
        "snapshot_restore" => s(
            "snapshot_restore",
            "Restore a snapshot",
            "Make the workspace exactly what it was: extra files removed, changed ones rewritten, missing ones recreated, modes and times restored. In a lasting workspace, protected paths (git hooks, agent and editor configuration, .env) are left as they are now and listed in left_protected.",
            obj(json!({ "id": id_prop() }), json!(["id"])),
            summary_schema(),
            false,
            true,
            true,
        ),
        "snapshot_delete" => s(
            "snapshot_delete",
            "Delete a snapshot",
            "Delete a snapshot (contents other snapshots share are kept).",
            obj(json!({ "id": id_prop() }), json!(["id"])),
            json!({ "type": "object", "properties": { "id": { "type": "string" }, "deleted": { "type": "boolean" } },
                    "required": ["id", "deleted"] }),
            false,
            true,
            true,
        ),
        "snapshot_diff" => s(
            "snapshot_diff",
            "Changes since a snapshot",
            "Paths added, removed and modified in the workspace since a snapshot.",
            obj(json!({ "id": id_prop() }), json!(["id"])),
            json!({ "type": "object",
                    "properties": { "id": { "type": "string" },
                                    "added": { "type": "array", "items": { "type": "string" } },
                                    "removed": { "type": "array", "items": { "type": "string" } },
                                    "modified": { "type": "array", "items": { "type": "string" } } },
                    "required": ["id", "added", "removed", "modified"] }),
            true,
            false,
            true,
        ),
        _ => return None,
    })
}

fn summary(m: &Manifest) -> Value {
    json!({
        "id": m.id,
        "description": m.description,
        "created_ms": m.created_ms,
        "files": m.entries.iter().filter(|e| e.kind == crate::snapshots::Kind::File).count(),
        "total_bytes": m.total_bytes,
        "skipped": m.skipped,
    })
}

impl From<SnapshotError> for ToolError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::NotFound(_) => ToolError::Unavailable(e.to_string()),
            SnapshotError::TooLarge { limit, .. } => ToolError::TooLarge {
                what: "the snapshot store",
                limit,
            },
            other => ToolError::Internal(other.to_string()),
        }
    }
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    description: String,
    #[serde(default)]
    id: String,
}

pub(super) async fn call(name: &str, args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: Args = parse(args)?;
    let store = cx.session.snapshots()?;
    let ws_path = cx.session.workspace()?;
    let _one_at_a_time = cx.shared().snapshot_lock.lock().await;
    let settings = &cx.shared().config.settings;
    let (lasting, allow) = (
        settings.lasting_workspaces(),
        settings.allow_protected.clone(),
    );
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || -> Result<Value, ToolError> {
        let ws = Dir::open_ambient_dir(&ws_path, ambient_authority())
            .map_err(|e| ToolError::Internal(format!("opening the workspace: {e}")))?;
        Ok(match name.as_str() {
            "snapshot_create" => summary(&store.create(&ws, &a.description)?),
            "snapshot_list" => json!({
                "snapshots": store.list().iter().map(summary).collect::<Vec<_>>(),
                "store_bytes": store.bytes(),
            }),
            "snapshot_restore" if lasting => {
                // Protected paths stay as they are now (the jail and the file tools keep them
                // read-only; a snapshot must not bring one back or take one away).
                let git_dir = ws.symlink_metadata(".git").is_ok_and(|m| m.is_dir());
                let protected = |p: &std::path::Path, whole: bool| {
                    warden_jail::protect::touches(p, whole, git_dir, &allow)
                };
                let (m, left) = store.restore_except(&ws, &a.id, &protected)?;
                let mut v = summary(&m);
                v["left_protected"] = json!(left);
                v
            }
            "snapshot_restore" => summary(&store.restore(&ws, &a.id)?),
            "snapshot_delete" => {
                store.delete(&a.id)?;
                json!({ "id": a.id, "deleted": true })
            }
            "snapshot_diff" => {
                let d = store.diff(&ws, &a.id)?;
                json!({ "id": a.id, "added": d.added, "removed": d.removed, "modified": d.modified })
            }
            other => return Err(ToolError::Internal(format!("no snapshot tool {other}"))),
        })
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?
}
