//! The tools: their names (part of the interface), input and output schemas, annotations, errors
//! and dispatch.
//!
//! Every input schema is closed (`additionalProperties: false`) and bounded (string lengths,
//! array sizes, numeric ranges), and every call is validated against it before it runs
//! (`server.rs`); the tool functions then parse the already-valid arguments into typed structs.
//! Tool failures are results with `isError` and a structured `{error: {kind, message}}`, never a
//! crash of the server.

mod csv_check;
mod exec;
mod files;
mod info;
pub mod recon;
mod snapshot;
mod validate;
pub mod validate_worker;
pub mod web;

pub use validate::schema_names;

use serde_json::{Value, json};
use thiserror::Error;

use crate::config::Profile;
use crate::state::CallContext;

/// The tools of the built-in `code` profile: everything but the recon toolset, in listing
/// order.
pub const CODE_TOOLS: &[&str] = &[
    "run_command",
    "run_python",
    "file_read",
    "file_write",
    "file_list",
    "file_info",
    "file_delete",
    "file_move",
    "snapshot_create",
    "snapshot_list",
    "snapshot_restore",
    "snapshot_delete",
    "snapshot_diff",
    "validate_json",
    "validate_csv",
    "sandbox_metrics",
    "env_get",
];

/// The recon toolset (the built-in `recon` profile): each listed only when its program is
/// installed, and only with `[recon] targets` configured.
pub const RECON_TOOLS: &[&str] = &["nmap_scan", "ffuf_discover", "arjun_params", "nuclei_scan"];

/// The web tools (the built-in `web` profile, and part of `code`): the page tools listed only
/// with `[web] allow` configured, `web_browse` only with a browser, `web_search` only with a
/// backend.
pub const WEB_TOOLS: &[&str] = &["web_fetch", "web_scrape", "web_browse", "web_search"];

/// Every tool the server knows, in listing order.
pub fn all_tools() -> impl Iterator<Item = &'static str> {
    CODE_TOOLS
        .iter()
        .chain(RECON_TOOLS)
        .chain(WEB_TOOLS)
        .copied()
}

/// An argument that the schema admits but the tool refuses (`path` is its JSON pointer).
pub(crate) fn invalid(path: &str, message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments(vec![ArgError {
        instance_path: path.into(),
        schema_path: String::new(),
        message: message.into(),
    }])
}

/// Largest string argument for code and command lines.
pub const MAX_CODE_BYTES: u64 = 1 << 20;
/// Largest `stdin` argument.
pub const MAX_STDIN_BYTES: u64 = 1 << 20;
/// Longest path argument.
pub const MAX_PATH_BYTES: u64 = 4096;

/// What a tool needs to describe itself.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The name.
    pub name: &'static str,
    /// A short human title.
    pub title: &'static str,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input: Value,
    /// JSON Schema of `structuredContent`.
    pub output: Value,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
    /// `openWorldHint`.
    pub open_world: bool,
}

/// Annotation hints of a workspace-local tool (`openWorldHint` is always false for them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hints {
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
}

impl Spec {
    /// A tool that only touches the session's workspace.
    pub(crate) fn local(
        name: &'static str,
        title: &'static str,
        description: String,
        input: Value,
        output: Value,
        h: Hints,
    ) -> Spec {
        Spec {
            name,
            title,
            description,
            input,
            output,
            read_only: h.read_only,
            destructive: h.destructive,
            idempotent: h.idempotent,
            open_world: false,
        }
    }
}

/// One schema violation in a call's arguments.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArgError {
    /// JSON pointer into the arguments.
    pub instance_path: String,
    /// JSON pointer into the schema.
    pub schema_path: String,
    /// What is wrong.
    pub message: String,
}

/// Why a tool call failed.
#[derive(Debug, Error)]
pub enum ToolError {
    /// The arguments do not match the tool's schema.
    #[error("invalid arguments: {}", .0.iter().map(|e| format!("{} {}", if e.instance_path.is_empty() { "(root)" } else { &e.instance_path }, e.message)).collect::<Vec<_>>().join("; "))]
    InvalidArguments(Vec<ArgError>),
    /// The profile does not allow this.
    #[error("not allowed by the server's profile: {0}")]
    NotAllowed(String),
    /// A path was refused or not found.
    #[error("{0}")]
    Path(#[from] files::PathError),
    /// Something is larger than its limit.
    #[error("{what} is larger than the limit of {limit} bytes")]
    TooLarge {
        /// What.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// The sandbox could not run the command (with the cause, and the fixing setting when
    /// Warden knows it).
    #[error("sandbox: {}", .0.explain())]
    Sandbox(#[from] warden_jail::JailError),
    /// A named schema or other server-side resource is missing or broken.
    #[error("{0}")]
    Unavailable(String),
    /// A recon tool was aimed at an address or URL outside the configured targets.
    #[error("target not allowed: {0}")]
    TargetNotAllowed(String),
    /// A fetch or search failed (name, connection, TLS, HTTP, time), with what the sandbox saw.
    #[error("{0}")]
    Fetch(String),
    /// A web call's sandbox refused or failed, with what it saw on the network.
    #[error("{message}")]
    Web {
        /// The stable kind (`target_not_allowed`, `fetch_failed`, `browser_failed`…).
        kind: &'static str,
        /// What happened.
        message: String,
        /// The sandbox's network summary.
        network: Box<Value>,
    },
    /// The call was cancelled by the client.
    #[error("cancelled")]
    Cancelled,
    /// An internal failure (a bug or an I/O error on the server's side).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ToolError {
    /// A stable machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::NotAllowed(_) => "not_allowed",
            ToolError::Path(e) => e.kind(),
            ToolError::TooLarge { .. } => "too_large",
            ToolError::Sandbox(warden_jail::JailError::NotFound(_)) => "command_not_found",
            ToolError::Sandbox(_) => "sandbox_error",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::TargetNotAllowed(_) => "target_not_allowed",
            ToolError::Fetch(_) => "fetch_failed",
            ToolError::Web { kind, .. } => kind,
            ToolError::Cancelled => "cancelled",
            ToolError::Internal(_) => "internal",
        }
    }

    /// What a web call's sandbox saw on the network, when the error has it.
    pub fn network(&self) -> Option<&Value> {
        match self {
            ToolError::Web { network, .. } => Some(network),
            _ => None,
        }
    }

    /// The structured form returned to the client.
    pub fn to_json(&self) -> Value {
        let mut err = json!({ "kind": self.kind(), "message": self.to_string() });
        if let ToolError::InvalidArguments(list) = self {
            err["details"] = serde_json::to_value(list).unwrap_or_default();
        }
        if let Some(n) = self.network() {
            err["network"] = n.clone();
        }
        json!({ "error": err })
    }
}

/// Parse already-validated arguments into the tool's struct.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| {
        ToolError::InvalidArguments(vec![ArgError {
            instance_path: String::new(),
            schema_path: String::new(),
            message: e.to_string(),
        }])
    })
}

/// The spec of `name` under `profile` (schemas carry the profile's bounds).
pub fn spec(name: &str, profile: &Profile) -> Option<Spec> {
    match name {
        "run_command" | "run_python" => exec::spec(name, profile),
        "file_read" | "file_write" | "file_list" | "file_info" | "file_delete" | "file_move" => {
            files::spec(name, profile)
        }
        "snapshot_create" | "snapshot_list" | "snapshot_restore" | "snapshot_delete"
        | "snapshot_diff" => snapshot::spec(name),
        "validate_json" => Some(validate::spec()),
        "validate_csv" => Some(csv_check::spec(profile)),
        "sandbox_metrics" | "env_get" => info::spec(name),
        _ => None,
    }
}

/// Run tool `name` with validated `args`.
pub async fn call(name: &str, args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    match name {
        "run_command" => exec::run_command(args, cx).await,
        "run_python" => exec::run_python(args, cx).await,
        "file_read" | "file_write" | "file_list" | "file_info" | "file_delete" | "file_move" => {
            files::call(name, args, cx).await
        }
        "snapshot_create" | "snapshot_list" | "snapshot_restore" | "snapshot_delete"
        | "snapshot_diff" => snapshot::call(name, args, cx).await,
        "validate_json" => validate::validate_json(args, cx).await,
        "validate_csv" => csv_check::validate_csv(args, cx).await,
        "sandbox_metrics" => info::sandbox_metrics(cx).await,
        "env_get" => info::env_get(args, cx).await,
        "nmap_scan" | "ffuf_discover" | "arjun_params" | "nuclei_scan" => {
            recon::call(name, args, cx).await
        }
        "web_fetch" | "web_scrape" | "web_browse" | "web_search" => web::call(name, args, cx).await,
        other => Err(ToolError::Internal(format!("no dispatch for {other}"))),
    }
}

/// An event of `kind` with `data` (pid 2, no window), for the tools' own tests.
#[cfg(test)]
pub(crate) fn test_event(kind: warden_events::EventKind, data: Value) -> warden_events::Event {
    warden_events::Event {
        id: 1,
        t_ms: 0,
        kind,
        pid: Some(2),
        triggered_by: None,
        data,
    }
}

/// The sandbox every networked call (recon, web) starts from: the profile's limits with the
/// call's own wall time (asked, else the default, never above the maximum) and no more CPU
/// time than that, no workspace, traced. Each tool adds what its network may reach.
pub(crate) fn networked_policy(cx: &CallContext, asked: Option<f64>) -> warden_jail::Policy {
    let shared = cx.shared();
    let mut p = shared.config.profile.policy.clone();
    p.workspace = None;
    p.protect = false;
    p.allow_host_proc = shared.config.settings.allow_host_proc;
    p.trace = true;
    let ms = (exec::timeout(cx, asked) * 1000.0).clamp(1.0, 86_400_000.0);
    // In range: clamped to a day in milliseconds.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = ms as u64;
    p.limits.wall_time_ms = ms;
    p.limits.cpu_time_ms = p.limits.cpu_time_ms.min(ms.max(1000));
    p
}

/// The result shape shared by `run_command` and `run_python`.
pub(crate) fn run_output_schema(extra: Value) -> Value {
    let mut props = json!({
        "stdout": { "type": "string" },
        "stderr": { "type": "string" },
        "exit_code": { "type": ["integer", "null"] },
        "signal": { "type": ["integer", "null"] },
        "duration_ms": { "type": "integer", "minimum": 0 },
        "stdout_truncated": { "type": "boolean" },
        "stderr_truncated": { "type": "boolean" },
        "limit_hit": {
            "type": ["string", "null"],
            "enum": ["memory", "pids", "wall_time", "cpu_time", "output", "file_size", "disk", null]
        }
    });
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({
        "type": "object",
        "properties": props,
        "required": ["stdout", "stderr", "exit_code", "signal", "duration_ms",
                     "stdout_truncated", "stderr_truncated", "limit_hit"]
    })
}
