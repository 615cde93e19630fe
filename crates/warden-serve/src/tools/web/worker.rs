//! The web worker: `warden` started inside a call's sandbox ([`WORKER_ARG`]) to fetch a page,
//! read it and (for `web_browse`) drive the browser, so that the HTTP client, the
//! decompressors, the HTML parser and the browser all handle untrusted bytes inside the jail,
//! never in the server.
//!
//! The job arrives as JSON on stdin and the answer leaves as one JSON document on stdout. The
//! worker checks that it is the server's own build (an upgrade in place of a running server
//! gives a clear error, not a misread job) and that every URL it follows is on the allowlist;
//! the sandbox's network enforces that list again on every connection.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The hidden first argument that makes `warden` a web worker.
pub const WORKER_ARG: &str = "__warden-web";
/// Largest job a worker reads.
const MAX_JOB: u64 = 1 << 20;

/// What a worker is asked to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The server's build ([`warden_jail::BUILD`]).
    pub build: String,
    /// The allowlist (`[web] allow`).
    pub allow: Vec<String>,
    /// The first URL (already checked by the server).
    pub url: String,
    /// Bytes of body read, at most (decompressed).
    pub max_bytes: u64,
    /// Time for the whole job, ms.
    pub timeout_ms: u64,
    /// The `Accept` header.
    pub accept: Option<String>,
    /// What to make of the page.
    pub op: Op,
}

/// What to make of the page.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// The response as it is.
    Fetch,
    /// The page's title, content (of the selected elements) and links.
    Scrape {
        /// A CSS selector (checked by the server).
        selector: Option<String>,
        /// `text`, `markdown` or `html`.
        format: super::page::Format,
        /// Characters of content returned, at most.
        max_chars: usize,
    },
    /// The page loaded by the browser, scripts run.
    Browse(super::browse::BrowseJob),
}

/// A worker's failure, as the server reports it.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum Failure {
    /// A URL (first, redirect or navigation) is off the allowlist.
    #[error("{0}")]
    NotAllowed(String),
    /// The fetch itself failed (name, connection, TLS, protocol, timeout).
    #[error("{0}")]
    Fetch(String),
    /// The browser failed or is missing.
    #[error("{0}")]
    Browser(String),
    /// The job is malformed or of another build.
    #[error("{0}")]
    Job(String),
}

/// The worker's answer: the tool's result (before the server adds what the sandbox saw), or
/// why there is none.
pub type Answer = Result<Value, Failure>;

/// Run as a worker: read the job, do it, print the answer. Returns the exit code.
pub fn worker_main() -> i32 {
    let answer = read_job().and_then(|job| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Job(format!("runtime: {e}")))?;
        rt.block_on(run(job))
    });
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &answer).is_ok() && out.flush().is_ok();
    i32::from(!written)
}

fn read_job() -> Result<Job, Failure> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(MAX_JOB)
        .read_to_end(&mut buf)
        .map_err(|e| Failure::Job(format!("reading the job: {e}")))?;
    let job: Job =
        serde_json::from_slice(&buf).map_err(|e| Failure::Job(format!("bad job: {e}")))?;
    if job.build != warden_jail::BUILD {
        return Err(Failure::Job(
            "the warden binary was replaced since the server started; restart `warden serve`"
                .into(),
        ));
    }
    Ok(job)
}

async fn run(job: Job) -> Answer {
    let deadline = std::time::Duration::from_millis(job.timeout_ms);
    let work = async {
        match &job.op {
            Op::Fetch => super::fetch::fetch(&job).await.map(|f| f.to_json()),
            Op::Scrape {
                selector,
                format,
                max_chars,
            } => {
                let f = super::fetch::fetch(&job).await?;
                Ok(super::page::scrape(
                    &f,
                    selector.as_deref(),
                    *format,
                    *max_chars,
                    &job.allow,
                ))
            }
            Op::Browse(b) => super::browse::browse(&job, b).await,
        }
    };
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Fetch(format!(
                "the page took longer than {} ms",
                job.timeout_ms
            )))
        })
}
