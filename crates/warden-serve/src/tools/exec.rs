//! `run_command` and `run_python`: programs run inside the jail with the session's workspace.
//!
//! The jail is the boundary. The operator's program allowlist and `run_python`'s optional
//! static pre-check are extra layers in front of it, never instead of it. A cancelled call
//! kills its sandbox (the jail's lifeline), and so does a client that goes away.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};
use warden_jail::Outcome;
use warden_jail::warm::Command;

use super::{MAX_CODE_BYTES, MAX_STDIN_BYTES, Spec, ToolError, parse, run_output_schema};
use crate::config::Profile;
use crate::state::CallContext;

/// Runs the user's program, returns the value of a final expression (or of `_`) on stderr
/// behind a per-call marker, and applies the optional static pre-check first.
const PY_BOOTSTRAP: &str = r#"
import ast, json, os, sys
marker = os.environ.pop("WARDEN_RESULT_MARKER", "")
deny = set(json.loads(os.environ.pop("WARDEN_PY_DENY", "[]")))
# The program comes first on stdin (WARDEN_PY_LEN bytes, read unbuffered), the caller's own
# stdin after it: it never touches a disk another call could read.
size, buf = int(os.environ.pop("WARDEN_PY_LEN", "0")), bytearray()
while len(buf) < size:
    chunk = os.read(0, size - len(buf))
    if not chunk:
        break
    buf += chunk
src = bytes(buf).decode("utf-8")
sys.argv = ["main.py"] + sys.argv[1:]
tree = ast.parse(src, "main.py")
if deny:
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module.split(".")[0]]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        for n in names:
            if n in deny:
                found.append({"name": n, "line": node.lineno, "column": node.col_offset + 1})
    if found:
        sys.stderr.write("\n" + marker + json.dumps({"precheck": found}) + "\n")
        sys.exit(3)
last = None
if tree.body and isinstance(tree.body[-1], ast.Expr):
    last = ast.Expression(tree.body.pop().value)
scope = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
exec(compile(tree, "main.py", "exec"), scope)
value = eval(compile(last, "main.py", "eval"), scope) if last is not None else None
if value is None:
    value = scope.get("_")
try:
    payload = json.dumps({"result": value})
except (TypeError, ValueError):
    payload = json.dumps({"result_repr": repr(value)[:2000]})
sys.stdout.flush()
sys.stderr.write("\n" + marker + payload + "\n")
"#;

pub(super) fn spec(name: &str, profile: &Profile) -> Option<Spec> {
    let timeout = json!({
        "type": "number", "exclusiveMinimum": 0, "maximum": profile.max_timeout_s,
        "description": format!("Wall-clock limit in seconds (default {}).", profile.default_timeout_s)
    });
    let stdin = json!({ "type": "string", "maxLength": MAX_STDIN_BYTES,
                        "description": "Text fed to the program's standard input." });
    let allow = profile
        .allowed_programs
        .as_ref()
        .map(|p| format!(" Only these programs may be started: {}.", p.join(", ")))
        .unwrap_or_default();
    let limits = &profile.policy.limits;
    let env = format!(
        "It runs as an unprivileged user in an isolated sandbox: no network, /workspace \
         (the working directory, persistent for the session) and /tmp writable, everything else \
         read-only; memory {} MiB, {} processes, output {} KiB per stream.",
        limits.memory_bytes >> 20,
        limits.pids,
        limits.output_bytes >> 10
    );
    match name {
        "run_command" => Some(Spec {
            name: "run_command",
            title: "Run a command",
            description: format!(
                "Run a command line with /bin/sh (`command`) or a program with arguments and no \
                 shell (`argv`). {env}{allow}"
            ),
            input: json!({
                "type": "object",
                "properties": {
                    "command": { "type": "string", "minLength": 1, "maxLength": MAX_CODE_BYTES,
                                 "description": "A shell command line, run by /bin/sh -c." },
                    "argv": { "type": "array", "minItems": 1, "maxItems": 4096,
                              "items": { "type": "string", "maxLength": 131072 },
                              "description": "Program and arguments, run without a shell." },
                    "stdin": stdin,
                    "timeout_s": timeout
                },
                "oneOf": [ { "required": ["command"] }, { "required": ["argv"] } ],
                "additionalProperties": false
            }),
            output: run_output_schema(json!({})),
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        }),
        "run_python" => Some(Spec {
            name: "run_python",
            title: "Run Python",
            description: format!(
                "Run a Python 3 program. The value of a final expression (or of `_`) is returned \
                 as `result` when it is JSON-serialisable. {env}"
            ),
            input: json!({
                "type": "object",
                "properties": {
                    "code": { "type": "string", "minLength": 1, "maxLength": MAX_CODE_BYTES },
                    "args": { "type": "array", "maxItems": 1024,
                              "items": { "type": "string", "maxLength": 131072 } },
                    "stdin": stdin,
                    "timeout_s": timeout
                },
                "required": ["code"],
                "additionalProperties": false
            }),
            output: run_output_schema(json!({
                "result": { "description": "Value of the final expression or of `_`." },
                "result_repr": { "type": "string" }
            })),
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: false,
        }),
        _ => None,
    }
}

#[derive(Deserialize)]
struct CommandArgs {
    command: Option<String>,
    argv: Option<Vec<String>>,
    stdin: Option<String>,
    timeout_s: Option<f64>,
}

#[derive(Deserialize)]
struct PythonArgs {
    code: String,
    #[serde(default)]
    args: Vec<String>,
    stdin: Option<String>,
    timeout_s: Option<f64>,
}

/// Where a call's sandbox comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sandbox {
    /// A prepared one when the pool has one for the policy, and one prepared for the next call.
    Pooled,
    /// A cold one, and none prepared: the policy is this call's alone.
    Once,
}

/// Run `cmd` in the jail under `policy` (see [`Sandbox`]), killing it if the call is
/// cancelled.
pub(super) async fn jailed(
    cx: &CallContext,
    policy: warden_jail::Policy,
    cmd: Command,
    from: Sandbox,
) -> Result<Outcome, ToolError> {
    let pool = cx.shared().pool.clone();
    // A session's own workspace (and so its sandboxes) goes with it; a shared one does not.
    let owner = (!cx.shared().config.settings.shared_workspace).then(|| cx.session.id.clone());
    // The replacement sandbox is prepared after the run (when `_refill` goes), not during it.
    let (started, _refill) = tokio::task::spawn_blocking(move || match from {
        Sandbox::Pooled => pool.start(&policy, &cmd, owner.as_deref()),
        Sandbox::Once => pool.start_once(&policy, &cmd),
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?;
    let mut running = started?;
    let killer = running.killer();
    let mut wait = tokio::task::spawn_blocking(move || running.wait());
    tokio::select! {
        done = &mut wait => done.map_err(|e| ToolError::Internal(e.to_string()))?.map_err(Into::into),
        () = cx.cancel.cancelled() => {
            killer.kill();
            let _ = wait.await;
            Err(ToolError::Cancelled)
        }
    }
}

/// A call's time limit in seconds: asked for, else the profile's default, never above its
/// maximum.
pub(super) fn timeout(cx: &CallContext, asked: Option<f64>) -> f64 {
    let p = &cx.shared().config.profile;
    asked.unwrap_or(p.default_timeout_s).min(p.max_timeout_s)
}

/// The session's policy for commands, and a command whose limits follow `timeout_s` (the
/// limits travel with the command, so every call of a session shares one prepared policy).
fn call(
    cx: &CallContext,
    timeout_s: Option<f64>,
    argv: Vec<String>,
    stdin: Option<String>,
) -> Result<(warden_jail::Policy, Command), ToolError> {
    let policy = cx.policy(cx.shared().config.profile.default_timeout_s)?;
    let timed = cx.policy(timeout(cx, timeout_s))?;
    let cmd = Command {
        argv,
        stdin: stdin.unwrap_or_default().into_bytes(),
        wall_time_ms: Some(timed.limits.wall_time_ms),
        cpu_time_ms: Some(timed.limits.cpu_time_ms),
        ..Command::default()
    };
    Ok((policy, cmd))
}

/// A run that left its workspace full hit the disk quota (when no other limit ended it).
fn disk_limit(cx: &CallContext, result: &mut Value) {
    if result["limit_hit"].is_null()
        && let Some(ws) = cx.session.existing_workspace()
        && crate::quota::full(&ws)
    {
        result["limit_hit"] = json!("disk");
    }
}

fn result_json(o: &Outcome, stdout: String, stderr: String) -> Value {
    json!({
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": o.exit_code,
        "signal": o.signal,
        "duration_ms": o.duration_ms,
        "stdout_truncated": o.stdout_truncated,
        "stderr_truncated": o.stderr_truncated,
        "limit_hit": o.limit_hit,
    })
}

pub(super) async fn run_command(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: CommandArgs = parse(args)?;
    let allowed = &cx.shared().config.profile.allowed_programs;
    let argv = match (a.command, a.argv) {
        (Some(line), None) => {
            if let Some(list) = allowed
                && !list.iter().any(|p| p == "sh")
            {
                return Err(ToolError::NotAllowed(
                    "shell command lines (`command`); use `argv` with an allowed program".into(),
                ));
            }
            vec!["/bin/sh".to_owned(), "-c".to_owned(), line]
        }
        (None, Some(argv)) => {
            if let Some(list) = allowed {
                // A bare name, looked up in the jail's PATH (system directories only): a path
                // would let a copy in the workspace pose as an allowed program.
                let name = &argv[0];
                if name.contains('/') || !list.iter().any(|p| p == name) {
                    return Err(ToolError::NotAllowed(format!(
                        "program {name:?} (give an allowed name without a path)"
                    )));
                }
            }
            argv
        }
        _ => {
            return Err(ToolError::Internal(
                "schema admitted both or neither".into(),
            ));
        }
    };
    let (policy, cmd) = call(cx, a.timeout_s, argv, a.stdin)?;
    let o = jailed(cx, policy, cmd, Sandbox::Pooled).await?;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    let mut result = result_json(&o, out, err);
    disk_limit(cx, &mut result);
    Ok(result)
}

pub(super) async fn run_python(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: PythonArgs = parse(args)?;
    let shared = cx.shared();
    let marker = format!(
        "\u{1e}warden-result-{}-{}\u{1f}",
        cx.call_id,
        shared.started.elapsed().as_nanos()
    );
    let mut argv = vec![
        "python3".to_owned(),
        "-c".to_owned(),
        PY_BOOTSTRAP.to_owned(),
    ];
    argv.extend(a.args);
    let (mut policy, mut cmd) = call(cx, a.timeout_s, argv, a.stdin)?;
    let deny = serde_json::to_string(&shared.config.profile.python_denylist).unwrap_or_default();
    policy.env.insert("WARDEN_PY_DENY".into(), deny);
    policy
        .env
        .insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    cmd.env
        .insert("WARDEN_RESULT_MARKER".into(), marker.clone());
    cmd.env
        .insert("WARDEN_PY_LEN".into(), a.code.len().to_string());
    let mut stdin = a.code.into_bytes();
    stdin.append(&mut cmd.stdin);
    cmd.stdin = stdin;
    let started = Instant::now();
    let o = jailed(cx, policy, cmd, Sandbox::Pooled).await?;
    tracing::debug!(ms = started.elapsed().as_millis(), "run_python");
    let mut stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let mut extra = serde_json::Map::new();
    if let Some(at) = stderr.rfind(&marker) {
        let payload = stderr[at + marker.len()..].trim().to_owned();
        // `at` is a char boundary (the marker starts with an ASCII byte); drop the newline the
        // bootstrap put before it, if that is what precedes it.
        let cut = if stderr[..at].ends_with('\n') {
            at - 1
        } else {
            at
        };
        stderr.truncate(cut);
        if let Ok(Value::Object(v)) = serde_json::from_str::<Value>(&payload) {
            if let Some(found) = v.get("precheck") {
                let list: Vec<String> = found
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(50)
                    .map(|f| {
                        format!(
                            "{} at line {} column {}",
                            f["name"].as_str().unwrap_or("?"),
                            f["line"],
                            f["column"]
                        )
                    })
                    .collect();
                return Err(ToolError::NotAllowed(format!(
                    "the program uses {}",
                    list.join(", ")
                )));
            }
            // Only these come from the program; everything else is measured by the server.
            for key in ["result", "result_repr"] {
                if let Some(v) = v.get(key) {
                    extra.insert(key.to_owned(), v.clone());
                }
            }
        }
    }
    let mut out = result_json(&o, String::from_utf8_lossy(&o.stdout).into_owned(), stderr);
    disk_limit(cx, &mut out);
    if let Some(obj) = out.as_object_mut() {
        obj.extend(extra);
    }
    Ok(out)
}
