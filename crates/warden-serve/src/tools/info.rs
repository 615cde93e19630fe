//! `sandbox_metrics` and `env_get`: what the server and its sandbox look like from a client.
//! `env_get` reports the sandbox's own environment (the profile's), never the server's.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Spec, ToolError, parse};
use crate::state::CallContext;

pub(super) fn spec(name: &str) -> Option<Spec> {
    match name {
        "sandbox_metrics" => Some(Spec {
            name: "sandbox_metrics",
            title: "Sandbox metrics",
            description: "Calls, errors and p50/p95 duration per tool, limits hit, uptime, the \
                          sizes of this session's workspace and snapshot store, and the warm \
                          sandbox pool (waiting sandboxes, their processes and memory, hits)."
                .into(),
            input: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output: json!({
                "type": "object",
                "properties": {
                    "uptime_s": { "type": "integer" },
                    "tools": { "type": "object" },
                    "limits_hit": { "type": "object" },
                    "workspace_bytes": { "type": "integer" },
                    "snapshot_bytes": { "type": "integer" },
                    "profile": { "type": "string" },
                    "pool": { "type": "object" }
                },
                "required": ["uptime_s", "tools", "limits_hit", "workspace_bytes", "snapshot_bytes", "profile", "pool"]
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }),
        "env_get" => Some(Spec {
            name: "env_get",
            title: "Sandbox environment",
            description: "The environment variables commands see inside the sandbox (all, or \
                          the names asked for). The server's own environment is never shown."
                .into(),
            input: json!({
                "type": "object",
                "properties": { "names": { "type": "array", "maxItems": 256,
                                           "items": { "type": "string", "minLength": 1, "maxLength": 256 } } },
                "additionalProperties": false
            }),
            output: json!({
                "type": "object",
                "properties": { "env": { "type": "object", "additionalProperties": { "type": "string" } } },
                "required": ["env"]
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }),
        _ => None,
    }
}

/// Bytes used by files under `path`, walked beneath a descriptor of it without following
/// symlinks (sandboxed code may swap a directory for a link mid-walk), bounded in entries.
pub fn tree_bytes(path: &std::path::Path) -> u64 {
    use cap_fs_ext::DirExt;
    let Ok(root) = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority()) else {
        return 0;
    };
    let mut total = 0;
    let mut stack = vec![std::path::PathBuf::new()];
    let mut visited = 0usize;
    while let Some(rel) = stack.pop() {
        let dir = if rel.as_os_str().is_empty() {
            root.try_clone()
        } else {
            root.open_dir_nofollow(&rel)
        };
        let Ok(dir) = dir else { continue };
        for e in dir.entries().into_iter().flatten().flatten() {
            visited += 1;
            if visited > 100_000 {
                return total;
            }
            if let Ok(m) = e.metadata() {
                if m.is_dir() {
                    stack.push(rel.join(e.file_name()));
                } else {
                    total += m.len();
                }
            }
        }
    }
    total
}

pub(super) async fn sandbox_metrics(cx: &CallContext) -> Result<Value, ToolError> {
    let shared = cx.shared();
    let (tools, limits) = shared.metrics.snapshot();
    let ws = cx.session.existing_workspace();
    let store = ws.as_ref().and_then(|_| cx.session.snapshots().ok());
    let quota = match cx.session.workspace_and_quota() {
        Ok((_, crate::quota::Backing::Tmpfs)) => "tmpfs",
        Ok((_, crate::quota::Backing::Image)) => "disk_image",
        _ => "none",
    };
    let pool = shared.pool.clone();
    let (workspace_bytes, snapshot_bytes, pool) = tokio::task::spawn_blocking(move || {
        (
            ws.map_or(0, |w| tree_bytes(&w)),
            store.map_or(0, |s| s.bytes()),
            pool.report(),
        )
    })
    .await
    .unwrap_or((0, 0, Value::Null));
    Ok(json!({
        "uptime_s": shared.started.elapsed().as_secs(),
        "tools": tools,
        "limits_hit": limits,
        "workspace_bytes": workspace_bytes,
        "workspace_quota": { "backing": quota,
                             "max_bytes": (quota != "none")
                                 .then_some(shared.config.settings.workspace_max_bytes) },
        "snapshot_bytes": snapshot_bytes,
        "profile": shared.config.profile.name,
        "pool": pool,
    }))
}

#[derive(Deserialize)]
struct EnvArgs {
    names: Option<Vec<String>>,
}

pub(super) async fn env_get(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: EnvArgs = parse(args)?;
    let env = &cx.shared().config.profile.policy.env;
    let picked: serde_json::Map<String, Value> = env
        .iter()
        .filter(|(k, _)| a.names.as_ref().is_none_or(|n| n.iter().any(|x| x == *k)))
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    Ok(json!({ "env": picked }))
}
