//! `validate_json`'s work, in a child process that can be stopped.
//!
//! Compiling a schema and validating against it run on untrusted input whose cost cannot be
//! bounded up front (a backtracking `pattern` over thousands of strings, thousands of `allOf`
//! patterns). So neither runs in the server: each call starts `warden` as a worker
//! ([`WORKER_ARG`]), hands it the schema and the data on stdin and reads the answer on stdout.
//! The worker limits itself first (address space, CPU time, no core dumps) and uses the
//! `fancy-regex` engine with a backtracking budget per match.
//!
//! Guarantees: [`run`] returns only once the worker is gone — it is killed at the deadline,
//! when the call is cancelled or its client disconnects, and reaped before the call (and its
//! concurrency permit) ends; nothing of a call keeps a core busy after it.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::ToolError;

/// The hidden first argument that makes `warden` a validation worker.
pub const WORKER_ARG: &str = "__warden-validate-json";

/// Errors reported per call, at most.
pub const MAX_ERRORS: usize = 200;
/// Largest job a worker reads (schema and data together, as JSON).
const MAX_JOB: u64 = 64 << 20;
/// Largest answer read from a worker.
const MAX_ANSWER: u64 = 4 << 20;
/// Address space of a worker.
const WORKER_MEMORY: u64 = 2 << 30;
/// Backtracking steps one `pattern` match may take.
const BACKTRACK_LIMIT: usize = 100_000;

/// What a worker is given.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Job {
    /// The schema.
    pub schema: Value,
    /// The data.
    pub data: Value,
    /// CPU seconds the worker may use.
    pub cpu_s: u64,
}

/// What a worker answers.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Answer {
    /// The data was checked: the first errors, and how many there were.
    Checked {
        /// At most [`MAX_ERRORS`] errors.
        errors: Vec<Value>,
        /// All of them.
        count: usize,
    },
    /// The schema does not compile.
    InvalidSchema(String),
}

/// The worker's `main`: read a [`Job`] on stdin, answer on stdout. Returns the exit code.
pub fn worker_main() -> i32 {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_AS, WORKER_MEMORY, WORKER_MEMORY);
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    let mut input = Vec::new();
    if std::io::stdin()
        .take(MAX_JOB)
        .read_to_end(&mut input)
        .is_err()
    {
        return 2;
    }
    let Ok(job) = serde_json::from_slice::<Job>(&input) else {
        return 2;
    };
    drop(input);
    let _ = setrlimit(Resource::RLIMIT_CPU, job.cpu_s, job.cpu_s.saturating_add(1));
    let answer = check(&job.schema, &job.data);
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &answer).is_ok() && out.flush().is_ok();
    i32::from(!written)
}

/// Compile `schema` and validate `data` (in the worker).
fn check(schema: &Value, data: &Value) -> Answer {
    let patterns = jsonschema::PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_LIMIT);
    let validator = match jsonschema::options()
        .with_pattern_options(patterns)
        .build(schema)
    {
        Ok(v) => v,
        Err(e) => return Answer::InvalidSchema(e.to_string()),
    };
    let mut errors = Vec::new();
    let mut count = 0usize;
    for e in validator.iter_errors(data) {
        count += 1;
        if errors.len() < MAX_ERRORS {
            let mut message = e.to_string();
            if message.len() > 1000 {
                let mut cut = 1000;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
                message.push('…');
            }
            errors.push(json!({
                "instance_path": e.instance_path().to_string(),
                "schema_path": e.schema_path().to_string(),
                "message": message,
            }));
        }
    }
    Answer::Checked { errors, count }
}

/// Run `job` in a worker started from `exe`; stopped at `deadline` or on `cancel`, and gone
/// when this returns.
pub(super) async fn run(
    exe: &Path,
    job: &Job,
    deadline: Duration,
    cancel: &CancellationToken,
) -> Result<Answer, ToolError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        ToolError::Internal(format!("validation worker: {what}: {e}"))
    };
    let input = serde_json::to_vec(job).map_err(|e| failed("encoding the job", &e))?;
    let mut child = tokio::process::Command::new(exe)
        .arg(WORKER_ARG)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("starting", &e))?;
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let work = async {
        if let Some(mut s) = stdin.take() {
            // The worker reads all of its input before it writes anything.
            s.write_all(&input).await?;
            s.shutdown().await?;
        }
        let mut answer = Vec::new();
        if let Some(s) = stdout.as_mut() {
            s.take(MAX_ANSWER).read_to_end(&mut answer).await?;
        }
        Ok::<_, std::io::Error>(answer)
    };
    let outcome = tokio::select! {
        r = work => Some(r),
        () = tokio::time::sleep(deadline) => None,
        () = cancel.cancelled() => None,
    };
    let Some(read) = outcome else {
        // Stopped: killed and reaped before the call ends.
        let _ = child.start_kill();
        let _ = child.wait().await;
        return Err(if cancel.is_cancelled() {
            ToolError::Cancelled
        } else {
            ToolError::Unavailable(format!(
                "validation took longer than {:.0} s and was stopped",
                deadline.as_secs_f64()
            ))
        });
    };
    let status = child.wait().await.map_err(|e| failed("waiting", &e))?;
    let answer = read.map_err(|e| failed("talking to it", &e))?;
    serde_json::from_slice(&answer).map_err(|_| {
        if status.code().is_none() {
            ToolError::TooLarge {
                what: "the validation's memory or CPU use",
                limit: WORKER_MEMORY,
            }
        } else {
            failed("its answer", &"not readable")
        }
    })
}
