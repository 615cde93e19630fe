//! The harness: an MCP client (rmcp) on the jailed server's own pipes, behind rmcp's
//! length-capped line reader, every request under a timeout, one call at a time, each in its
//! own attribution window. It records its own protocol events (`mcp.*`, `harness.payload`)
//! into the tracer's sequence, so they share ids and times with what the kernel saw.
//!
//! The session: initialize; list tools, prompts and resources (metadata checks); call every
//! tool with benign arguments, repeat that call (`repeat`: behaviour that changes after some
//! calls), then adversarial payloads; read resources, templates and prompts (`reading`);
//! in full mode let a model drive the server (`agent`); list everything again (rug pulls).
//! Every text the model would read goes through the content and credential checks.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use sha2::Digest;
use warden_events::{Event, EventKind};
use warden_jail::{Jail, Policy, TraceLink};

use crate::payloads::{self, Payload};
use crate::{args, metadata};

mod agent;
pub mod aim;
pub mod dwell;
pub mod http;
mod judge;
pub mod listeners;
mod reading;
pub mod remote;
pub mod repeat;
pub mod sse;

/// The MCP client the harness drives the server with.
type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// Tools examined per server, at most.
const MAX_TOOLS: usize = 500;
/// Longest line accepted from the server.
const MAX_LINE: usize = 4 << 20;
/// Characters of a tool's output kept for detection.
const MAX_OUTPUT: usize = 1 << 20;

/// What the harness learned, besides the events.
#[derive(Debug, Default)]
pub struct Session {
    /// The transport the harness found on its own: a stdio start that did not answer, but
    /// listened on a port that did (`{kind, port, path, detected: true}`).
    pub detected_transport: Option<Value>,
    /// The tools as first listed.
    pub tools: Vec<Value>,
    /// Window name → tool name.
    pub windows: HashMap<String, String>,
    /// Tool calls made, and how many the server accepted (not an error result).
    pub calls: u32,
    /// Calls whose result was not an error.
    pub accepted: u32,
    /// Benign calls made, and accepted.
    pub benign: (u32, u32),
    /// Calls started (names windows whose event the cap dropped).
    pub call_seq: u64,
    /// Each tool's benign result (for comparing result shapes).
    pub benign_outputs: HashMap<String, String>,
    /// What the never-true SQL control returned, per tool and parameter (`tool\0param`).
    pub sql_controls: HashMap<String, String>,
    /// Benign calls whose arguments the server's validation took (they may still have failed
    /// at their work, e.g. a file that does not exist).
    pub benign_valid: u32,
    /// Why the session ended early, if it did.
    pub aborted: Option<String>,
    /// The server's stderr (the start of it).
    pub stderr: String,
    /// Whether the server answered `initialize`.
    pub initialized: bool,
    /// Whether it declared the `tools` capability.
    pub declares_tools: bool,
    /// How many tools `tools/list` gave (`None`: it failed or was never asked).
    pub listed: Option<usize>,
    /// Tool calls the server answered with a result (an error result too): its tools ran.
    pub exercised: u32,
    /// Tool calls that timed out.
    pub timeouts: u32,
    /// How the server's sandbox ended.
    pub end: ServerEnd,
    /// Full mode's transcript and tallies (the report's `llm`).
    pub llm: Option<Value>,
    /// Tools whose metadata carries hidden or manipulative instructions (full mode gives the
    /// model a task that makes them fire).
    pub poisoned: Vec<String>,
    /// A call burned the CPU to its timeout and no call has been answered since: the server
    /// may still be spinning on it, so a later call's burn is not its own.
    pub spinning: bool,
    /// The server's `instructions` from `initialize`, as given.
    pub instructions: Option<String>,
    /// The server's name from `initialize`.
    pub server_name: Option<String>,
    /// The end of what the model has read so far (the tool results in order), so a secret
    /// handed out in pieces over several results is whole again; and the most direct form of
    /// each canary found in it.
    pub read_tail: String,
    /// See `read_tail`.
    pub read_reported: warden_trace::Reported,
    /// The dwell after the calls: its real and virtual length and rate, or why it was
    /// skipped (`None`: none was asked for).
    pub dwell: Option<Value>,
}

/// Characters of what the model read kept for the join of the next result.
const READ_TAIL: usize = 512;

/// How the server's sandbox ended, as far as the harness saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerEnd {
    /// Still running when the session was over (the harness ended it).
    #[default]
    Running,
    /// The server exited on its own, with this code or signal.
    Exited {
        /// Its exit code.
        code: Option<i32>,
        /// The signal that killed it.
        signal: Option<i32>,
    },
    /// The sandbox could not be set up around it.
    SandboxFailed(String),
    /// The program could not be found or executed in the sandbox.
    NotStarted(String),
}

impl ServerEnd {
    /// What a jail error says about the start.
    pub fn of_error(e: &warden_jail::JailError) -> ServerEnd {
        use warden_jail::JailError;
        let text = e.explain();
        match e {
            JailError::NotFound(_) | JailError::NotExecutable { .. } => ServerEnd::NotStarted(text),
            _ => ServerEnd::SandboxFailed(text),
        }
    }
}

/// Settings of one session.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Time for one request.
    pub call_timeout: Duration,
    /// Time for the whole session.
    pub budget: Duration,
    /// Whether to send adversarial payloads.
    pub adversarial: bool,
    /// Identical benign calls of each tool, the first included (a behavioural rug pull that
    /// waits for N calls is seen below this).
    pub calls_per_tool: u32,
    /// Progress lines on stderr.
    pub progress: bool,
    /// Full mode: the model that plays the agent.
    pub llm: Option<crate::llm::Settings>,
    /// The server speaks Streamable HTTP on this port inside the jail (stdio when `None`).
    pub http: Option<http::HttpTarget>,
    /// Probe mode: the server is remote; what runs in the jail is only a placeholder that
    /// carries the event recorder.
    pub remote: Option<remote::Remote>,
    /// The dangerous sinks the static phase found, by tool: their payloads go first.
    pub sinks: Vec<warden_scan::sinks::Sink>,
    /// Virtual length of the dwell after the calls (zero: none; see [`dwell`]).
    pub dwell: Duration,
}

/// Hex SHA-256 of `text`.
pub fn sha256(text: &str) -> String {
    let d = sha2::Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The planted secrets the harness looks for in what the model reads: every canary but the
/// argument canary (the user's own text, which a tool may rightly give back).
pub(crate) fn secrets_of(planted: Vec<warden_trace::Canary>) -> warden_trace::Canaries {
    warden_trace::Canaries::new(
        planted
            .into_iter()
            .filter(|c| !warden_trace::is_argument(&c.planted))
            .collect(),
    )
}

fn nonce() -> String {
    warden_trace::canary::random_string(b"abcdefghijklmnopqrstuvwxyz0123456789", 12)
}

struct Ctx<'a> {
    link: &'a TraceLink,
    settings: &'a Settings,
    deadline: Instant,
    session: Session,
    canaries: warden_trace::Canaries,
    /// The argument canary: put in the user's text the harness gives tools.
    marker: Option<String>,
    /// The kind of the calls being made when they are not the harness's own benign ones
    /// (`repeat`, `llm`): they are not counted as benign calls.
    kind: Option<&'static str>,
    /// Set once `initialize` is answered (read by the stdio start's port watcher).
    answered: Arc<AtomicBool>,
}

impl Ctx<'_> {
    /// Record an observation of the harness (without waiting: it is in the sequence before
    /// the next window switch, which is waited for).
    fn record(&self, kind: EventKind, data: Value) {
        let _ = self.link.note(kind, data);
    }

    fn progress(&self, line: &str) {
        if self.settings.progress {
            // Names are the server's: never terminal control.
            let line = crate::report::clean(&line.chars().take(120).collect::<String>());
            eprint!("\r\x1b[2Kwarden detonate: {line}");
        }
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// The install phase: run `argv` (package code: lifecycle scripts, the Python install) in the
/// jail with tracing and decoys, every event in the `install` window, `hooks` recorded as
/// `install.script` events; bounded by `limit`.
pub fn install(
    jail: &Jail,
    policy: &Policy,
    argv: &[String],
    hooks: &[Value],
    limit: Duration,
) -> Result<Installed> {
    let (mut running, link) = match start_traced(jail, policy, argv, "install") {
        Ok(started) => started,
        Err(end) => {
            return Ok(Installed {
                events: Vec::new(),
                exit_code: None,
                stderr: String::new(),
                sandbox_failure: Some(match end {
                    ServerEnd::SandboxFailed(why) | ServerEnd::NotStarted(why) => why,
                    _ => String::new(),
                }),
            });
        }
    };
    drop(running.stdin.take());
    // Its output is drained; only the end of stderr is kept, to explain a failed install.
    let drains: Vec<_> = [
        running
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        running
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|r| std::thread::spawn(move || tail(r, INSTALL_STDERR_TAIL)))
    .collect();
    for h in hooks {
        let _ = link.record(EventKind::InstallScript, h.clone());
    }
    let deadline = Instant::now() + limit;
    let mut sandbox_failure = None;
    let outcome = loop {
        match running.wait_timeout(Duration::from_millis(200)) {
            Ok(Some(o)) => break Some(o),
            Ok(None) if Instant::now() < deadline => {}
            Ok(None) => {
                running.kill();
                break running.wait().ok();
            }
            Err(e) => {
                sandbox_failure = Some(e.explain());
                break None;
            }
        }
    };
    let stderr = drains
        .into_iter()
        .map(|d| d.join().unwrap_or_default())
        .next_back()
        .unwrap_or_default();
    link.wait_closed(Duration::from_secs(10));
    Ok(Installed {
        events: link.events(),
        exit_code: outcome.and_then(|o| o.exit_code),
        stderr,
        sandbox_failure,
    })
}

/// Start `argv` in the jail with `window` open from its first exec; the run and its trace link.
fn start_traced(
    jail: &Jail,
    policy: &Policy,
    argv: &[String],
    window: &str,
) -> Result<(warden_jail::Running, warden_jail::TraceLink), ServerEnd> {
    let mut policy = policy.clone();
    policy.initial_window = Some(window.into());
    let mut running = jail
        .spawn(&policy, argv)
        .map_err(|e| ServerEnd::of_error(&e))?;
    let link = running.trace.take().ok_or_else(|| {
        ServerEnd::SandboxFailed("the jail gave no trace link (tracing is unavailable)".into())
    })?;
    Ok((running, link))
}

/// What the install phase did.
#[derive(Debug)]
pub struct Installed {
    /// Its events, all in the `install` window.
    pub events: Vec<Event>,
    /// Its exit code (`None` when it was killed).
    pub exit_code: Option<i32>,
    /// The end of its standard error.
    pub stderr: String,
    /// Why the sandbox could not be set up for it, when it could not.
    pub sandbox_failure: Option<String>,
}

/// Bytes of the install's stderr kept.
const INSTALL_STDERR_TAIL: usize = 4096;

/// Read `r` to its end, keeping the last `keep` bytes (as text).
fn tail(mut r: impl std::io::Read, keep: usize) -> String {
    let mut kept: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend(&buf[..n]);
                let extra = kept.len().saturating_sub(keep);
                kept.drain(..extra);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(kept.make_contiguous()).into_owned()
}

/// Run the whole session against `argv` under `policy`; returns what was learned and every
/// event, and kills the server's tree at the end whatever happened.
pub fn run(
    jail: &Jail,
    policy: &Policy,
    argv: &[String],
    settings: &Settings,
) -> Result<(Session, Vec<Event>)> {
    let begun = Instant::now();
    // rmcp's HTTP client (reqwest 0.13) is built without a crypto provider: ring, once.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut running, link) = match start_traced(jail, policy, argv, "startup") {
        Ok(started) => started,
        Err(end) => {
            let session = Session {
                aborted: Some("the server could not be started".into()),
                end,
                ..Session::default()
            };
            return Ok((session, Vec::new()));
        }
    };
    let stdin = running.stdin.take().context("no stdin")?;
    // The server's stdin stays open (this copy) until its end is known: a server that exits
    // when its input ends (most stdio servers) would otherwise seem to have exited on its own
    // once the session's transport let go of it, depending on how fast it did.
    let held_stdin = std::os::fd::AsFd::as_fd(&stdin)
        .try_clone_to_owned()
        .context("holding the server's stdin")?;
    let stdout = running.stdout.take().context("no stdout")?;
    let stderr = running.stderr.take().context("no stderr")?;
    // The server's stderr: the first 64 KiB kept, the rest drained so it never blocks.
    let err_thread = std::thread::spawn(move || {
        use std::io::Read;
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        let mut r = stderr;
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            if kept.len() < 64 << 10 {
                kept.extend_from_slice(&buf[..n.min((64 << 10) - kept.len())]);
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let mut ctx = Ctx {
        link: &link,
        settings,
        deadline: Instant::now() + settings.budget,
        session: Session::default(),
        canaries: secrets_of(link.canaries()),
        marker: None,
        kind: None,
        answered: Arc::new(AtomicBool::new(false)),
    };
    let result = match (&settings.remote, &settings.http) {
        (Some(remote), _) => {
            drop((stdin, stdout));
            remote.config().and_then(|config| {
                rt.block_on(async {
                    let transport =
                        rmcp::transport::StreamableHttpClientTransport::from_config(config);
                    session(&mut ctx, transport).await
                })
            })
        }
        (None, None) => {
            let stdio = rt.block_on(async {
                let stdin = tokio::process::ChildStdin::from_std(stdin)?;
                let stdout = tokio::process::ChildStdout::from_std(stdout)?;
                let transport =
                    AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_LINE);
                // A server that listens on a port and stays silent on stdout speaks HTTP:
                // stop waiting for its stdio answer (detect_http below takes over).
                let answered = Arc::clone(&ctx.answered);
                let supervisor = running.supervisor_pid();
                tokio::select! {
                    r = session(&mut ctx, transport) => r,
                    found = listens_silently(supervisor, answered) => {
                        let ports: Vec<String> = found.iter().map(|l| l.port.to_string()).collect();
                        Err(anyhow::anyhow!(
                            "no answer on stdio, and it listens on port {}",
                            ports.join(", ")
                        ))
                    }
                }
            });
            match stdio {
                Err(e) if !ctx.session.initialized => {
                    detect_http(&rt, &mut ctx, running.supervisor_pid()).unwrap_or(Err(e))
                }
                done => done,
            }
        }
        (None, Some(target)) => {
            // The server's stdout is only its log: drained so it never blocks. Its stdin
            // stays open for the session (some servers end on EOF).
            std::thread::spawn(move || std::io::copy(&mut { stdout }, &mut std::io::sink()));
            let result = http_session(&rt, &mut ctx, running.supervisor_pid(), target);
            drop(stdin);
            result
        }
    };
    if let Err(e) = result {
        ctx.session.aborted = Some(format!("{e:#}"));
    }
    let phase = |what: &str| tracing::debug!(ms = begun.elapsed().as_millis(), "{what}");
    phase("session over");
    let _ = link.window(None);
    // A session that ended early may have ended because the server did: give its exit a
    // moment to arrive before ending the tree ourselves.
    let wait = if ctx.session.aborted.is_some() {
        Duration::from_millis(1500)
    } else {
        Duration::ZERO
    };
    let end = match running.wait_timeout(wait) {
        Ok(Some(o)) => ServerEnd::Exited {
            code: o.exit_code,
            signal: o.signal,
        },
        Ok(None) => {
            running.kill();
            let _ = running.wait();
            ServerEnd::Running
        }
        Err(e) => ServerEnd::of_error(&e),
    };
    drop(held_stdin);
    phase("server gone");
    link.wait_closed(Duration::from_secs(10));
    phase("trace closed");
    let mut session = ctx.session;
    session.end = end;
    session.stderr = err_thread.join().unwrap_or_default();
    if settings.progress {
        eprintln!();
    }
    Ok((session, link.events()))
}

/// How long a listener of the server's must stay up, with stdio still unanswered, before the
/// harness stops waiting for stdio.
const SILENT_GRACE: Duration = Duration::from_secs(2);

/// Resolves once a process of the server's own tree listens on a TCP port in the jail (never
/// the capture sink, which listens there on the ports a server dials) and its stdio
/// `initialize` has stayed unanswered [`SILENT_GRACE`] after that (checked every 250 ms from
/// the first second); never while it answers. Returns the server's listeners.
async fn listens_silently(supervisor: u32, answered: Arc<AtomicBool>) -> Vec<listeners::Listener> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut since: Option<Instant> = None;
    loop {
        if answered.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        let found = http::init_of(supervisor)
            .map(listeners::of_server)
            .unwrap_or_default();
        match (found.is_empty(), since) {
            (true, _) => since = None,
            (false, None) => since = Some(Instant::now()),
            (false, Some(t)) if t.elapsed() >= SILENT_GRACE => return found,
            (false, Some(_)) => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A stdio start that never answered initialize while a process of its own listens on a TCP
/// port in the jail (a uvicorn or Express server started without saying so): the session
/// again over Streamable HTTP at `/mcp`, then legacy SSE at `/sse`, on each of the server's
/// ports in turn, each try recorded with why it was made. `None` when it listens on none.
fn detect_http(
    rt: &tokio::runtime::Runtime,
    ctx: &mut Ctx<'_>,
    supervisor: u32,
) -> Option<Result<()>> {
    let init = http::init_of(supervisor)?;
    let found = listeners::of_server(init);
    let mut last = None;
    for listener in &found {
        let port = listener.port;
        for (path, sse) in [("/mcp", false), ("/sse", true)] {
            if ctx.left().is_zero() {
                return last;
            }
            let kind = if sse { "sse" } else { "http" };
            ctx.progress(&format!(
                "no stdio answer, but port {port} listens: trying {kind}"
            ));
            let why = format!(
                "initialize unanswered on stdio while the server's own process {} ({}) listens on port {port}",
                crate::report::clean(&listener.program),
                listener.pid
            );
            ctx.record(
                EventKind::McpTiming,
                json!({ "phase": "transport_detection", "port": port, "transport": kind, "path": path, "why": why }),
            );
            ctx.session = Session::default();
            let target = http::HttpTarget {
                port,
                path: path.to_owned(),
                sse,
            };
            let result = http_session(rt, ctx, supervisor, &target);
            if ctx.session.initialized {
                ctx.session.detected_transport = Some(
                    json!({ "kind": kind, "port": port, "path": path, "detected": true, "why": why }),
                );
                return Some(result);
            }
            last = Some(result);
        }
    }
    last
}

/// The session over Streamable HTTP: the server's port in the jail reached through a
/// [`http::Forwarder`], once it listens (within the initialize budget).
fn http_session(
    rt: &tokio::runtime::Runtime,
    ctx: &mut Ctx<'_>,
    supervisor: u32,
    target: &http::HttpTarget,
) -> Result<()> {
    let started = Instant::now();
    let limit = (ctx.settings.call_timeout * 3).min(ctx.left());
    let deadline = started + limit;
    let mut init = None;
    while init.is_none() && Instant::now() < deadline {
        init = http::init_of(supervisor);
        if init.is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let forwarder = init
        .context("the jail's init could not be found")
        .and_then(|pid| {
            http::Forwarder::start(pid, target.port).context("forwarding into the jail")
        })?;
    ctx.progress(&format!("waiting for port {}", target.port));
    if !forwarder.wait_listening(deadline) {
        ctx.record(
            EventKind::McpTiming,
            json!({ "phase": "initialize", "ms": ms(started), "timed_out": true, "inconclusive": true, "transport": "http", "port": target.port }),
        );
        anyhow::bail!(
            "the server never listened on port {} (waited {} ms)",
            target.port,
            limit.as_millis()
        );
    }
    let uri = format!("http://{}{}", forwarder.addr(), target.path);
    // The transport starts its worker task when made: inside the runtime.
    let result = rt.block_on(async {
        if target.sse {
            session(ctx, sse::SseClient::connect(&uri)).await
        } else {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(uri);
            session(ctx, transport).await
        }
    });
    if ctx.session.initialized {
        surface(ctx, &forwarder, init.unwrap_or_default(), target);
    }
    drop(forwarder);
    result
}

/// Record what the server's HTTP surface shows (`mcp.http_surface`): where it listens, whether
/// a DNS-rebinding request is answered, and whether it answered without credentials while it
/// offers destructive tools.
fn surface(ctx: &Ctx<'_>, forwarder: &http::Forwarder, init: u32, target: &http::HttpTarget) {
    let listening = http::listening(init, target.port);
    // The rebinding probe is a Streamable HTTP POST; an SSE server's stream is a GET.
    let status = if target.sse {
        None
    } else {
        http::foreign_origin_status(forwarder.addr(), target.port, &target.path)
    };
    let destructive: Vec<String> = ctx
        .session
        .tools
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?;
            crate::metadata::destructive(name, t.get("annotations"))
                .filter(|d| !d.starts_with("mutates:"))
                .map(|_| name.to_owned())
        })
        .collect();
    ctx.record(
        EventKind::McpHttpSurface,
        json!({
            "port": target.port,
            "path": target.path,
            "transport": if target.sse { "sse" } else { "http" },
            "listening": listening,
            "wildcard": http::wildcard(&listening),
            "foreign_origin_status": status,
            "foreign_origin_accepted": status.is_some_and(|s| (200..300).contains(&s)),
            // The harness sent no credentials and the session went through.
            "authenticated": false,
            "destructive_tools": destructive,
            "unauthenticated_destructive": !destructive.is_empty(),
        }),
    );
}

async fn session<T, E, A>(ctx: &mut Ctx<'_>, transport: T) -> Result<()>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    // The policy opened `startup` before the server's first exec.
    ctx.progress("initializing");
    let started = Instant::now();
    let init_limit = (ctx.settings.call_timeout * 3).min(ctx.left());
    let client = match tokio::time::timeout(init_limit, ().serve(transport)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            ctx.record(
                EventKind::McpTiming,
                json!({ "phase": "initialize", "ms": ms(started), "failed": true, "inconclusive": true }),
            );
            anyhow::bail!("initialize failed: {e}");
        }
        Err(_) => {
            ctx.record(
                EventKind::McpTiming,
                json!({ "phase": "initialize", "ms": ms(started), "timed_out": true, "inconclusive": true }),
            );
            anyhow::bail!("initialize timed out after {} ms", init_limit.as_millis());
        }
    };
    let init_ms = ms(started);
    ctx.session.initialized = true;
    ctx.answered.store(true, Ordering::Relaxed);
    ctx.session.declares_tools = client
        .peer_info()
        .is_some_and(|i| i.capabilities.tools.is_some());
    // The canaries are the trace's first line, long since arrived.
    let planted = ctx.link.canaries();
    ctx.marker = planted
        .iter()
        .find(|c| c.planted == warden_trace::decoys::ARGUMENT)
        .map(|c| c.value.clone());
    ctx.canaries = secrets_of(planted);
    let info = client.peer_info();
    ctx.session.instructions = info.as_ref().and_then(|i| i.instructions.clone());
    ctx.session.server_name = info
        .as_ref()
        .and_then(|i| i.server_info.as_ref())
        .map(|s| s.name.clone());
    ctx.record(
        EventKind::McpInitialize,
        json!({
            "server": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
            "protocol_version": info.as_ref().map(|i| i.protocol_version.to_string()),
            "ms": init_ms,
        }),
    );
    ctx.record(
        EventKind::McpTiming,
        json!({ "phase": "initialize", "ms": init_ms }),
    );
    tracing::debug!(init_ms, "initialized");
    ctx.progress("listing tools");
    let started = Instant::now();
    let listed = tokio::time::timeout(
        ctx.settings.call_timeout.min(ctx.left()),
        client.list_all_tools(),
    )
    .await;
    let tools = match listed {
        Ok(Ok(t)) => t,
        other => {
            let why = match other {
                Err(_) => "timed out".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Ok(Ok(_)) => String::new(),
            };
            ctx.record(
                EventKind::McpTiming,
                json!({ "phase": "tools_list", "ms": ms(started), "failed": true, "inconclusive": true, "error": why }),
            );
            anyhow::bail!("tools/list: {why}");
        }
    };
    ctx.session.listed = Some(tools.len());
    ctx.record(
        EventKind::McpTiming,
        json!({ "phase": "tools_list", "ms": ms(started), "count": tools.len() }),
    );
    // At most MAX_TOOLS are examined (a listing of thousands is itself reported).
    if tools.len() > MAX_TOOLS {
        ctx.record(
            EventKind::McpToolList,
            json!({ "tool": "*", "poisoning": [format!("implausible_tool_count:{}", tools.len())] }),
        );
    }
    let tools: Vec<Value> = tools
        .iter()
        .take(MAX_TOOLS)
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    let own: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for t in &tools {
        let name = t["name"].as_str().unwrap_or("?");
        let (mut poisoning, shadowing) = metadata::markers(t, &own);
        if name
            .chars()
            .any(|c| c.is_control() || metadata::invisible(c))
        {
            poisoning.push("control_characters_in_name".into());
        }
        let destructive = metadata::destructive(name, t.get("annotations"));
        let harm = metadata::harm(&poisoning);
        let (poisoning, weak) = metadata::split_weak(poisoning);
        if !poisoning.is_empty() {
            ctx.session.poisoned.push(name.to_owned());
        }
        ctx.record(
            EventKind::McpToolList,
            json!({
                "tool": name,
                "description_sha256": sha256(t["description"].as_str().unwrap_or("")),
                "annotations": t.get("annotations"),
                "poisoning": (!poisoning.is_empty()).then_some(poisoning),
                "harm": (!harm.is_empty()).then_some(harm),
                "instructions": (!weak.is_empty()).then_some(weak),
                "shadowing": shadowing,
                "destructive": destructive,
                "long_description": metadata::long_text(t),
            }),
        );
    }
    // Prompts and resources: their metadata reaches the model too.
    let limit = ctx.settings.call_timeout.min(ctx.left());
    // Whether each listing answered (an empty one too: tools can add to it).
    let (prompts_first, prompts_listed) =
        match tokio::time::timeout(limit, client.list_all_prompts()).await {
            Ok(Ok(list)) => (check_listing(ctx, "prompt", as_values(&list), &own), true),
            _ => (Vec::new(), false),
        };
    let limit = ctx.settings.call_timeout.min(ctx.left());
    let (resources_first, resources_listed) =
        match tokio::time::timeout(limit, client.list_all_resources()).await {
            Ok(Ok(list)) => (check_listing(ctx, "resource", as_values(&list), &own), true),
            _ => (Vec::new(), false),
        };
    ctx.link.window(None)?;
    ctx.session.tools = tools.clone();

    let nonce = nonce();
    // The code-injection payloads go in a second pass, after every tool's benign call and
    // other payloads: they are many, and on a busy server the events they cause must not push
    // the earlier calls' evidence past the tracer's cap (measured on desktop-commander).
    let mut later: Vec<(String, Value, (String, Payload))> = Vec::new();
    // Exhaustion last of all: a limit it provokes ends the run.
    let mut exhaust: Vec<(String, Value, (String, Payload))> = Vec::new();
    let mut tarpits: Vec<String> = Vec::new();
    'tools: for t in &tools {
        let name = t["name"].as_str().unwrap_or("?").to_owned();
        let schema = t.get("inputSchema").cloned().unwrap_or(json!({}));
        let benign = args::benign_for_user(&schema, ctx.marker.as_deref());
        let mut plan: Vec<(Value, Option<(String, Payload)>)> =
            vec![(Value::Object(benign.clone()), None)];
        // Payloads aimed at a sink the static phase found go right after the benign call.
        let mut aimed: Vec<(Value, Option<(String, Payload)>)> = Vec::new();
        if ctx.settings.adversarial {
            for param in args::string_params(&schema) {
                for p in payloads::for_param(&nonce) {
                    let mut a = benign.clone();
                    a.insert(param.clone(), p.argument());
                    if aim::aimed(&ctx.settings.sinks, &name, &p) {
                        aimed.push((Value::Object(a), Some((param.clone(), p))));
                    } else if p.kind == payloads::Kind::CodeInjection {
                        later.push((name.clone(), Value::Object(a), (param.clone(), p)));
                    } else {
                        plan.push((Value::Object(a), Some((param.clone(), p))));
                    }
                }
            }
            for (param, p) in crate::exhaustion::plan(&schema, &benign) {
                let mut a = benign.clone();
                a.insert(param.clone(), p.argument());
                exhaust.push((name.clone(), Value::Object(a), (param, p)));
            }
        }
        plan.splice(1..1, aimed);
        for (i, (arguments, payload)) in plan.into_iter().enumerate() {
            if ctx.left().is_zero() {
                ctx.session.aborted = Some("the time budget ran out".into());
                break 'tools;
            }
            let outcome = call(
                ctx,
                &client,
                &name,
                arguments.clone(),
                payload.as_ref(),
                &nonce,
            )
            .await?;
            if outcome.timed_out {
                // A tarpit: its remaining calls are skipped.
                tarpits.push(name);
                continue 'tools;
            }
            // The benign call, again and again: does the tool change after some calls?
            if i == 0 {
                let stateful = repeat::says_it_changes_state(t.get("annotations"));
                let first = repeat::First {
                    tool: &name,
                    arguments: &arguments,
                    outcome: &outcome,
                    stateful,
                };
                repeat::repeat(ctx, &client, &first, &nonce).await?;
            }
        }
    }
    for (name, arguments, payload) in later {
        if tarpits.contains(&name) {
            continue;
        }
        if ctx.left().is_zero() {
            ctx.session.aborted = Some("the time budget ran out".into());
            break;
        }
        let outcome = call(ctx, &client, &name, arguments, Some(&payload), &nonce).await?;
        if outcome.timed_out {
            tarpits.push(name);
        }
    }
    tracing::debug!("calls done");
    // What else the model would read: resources, templates, prompts.
    reading::read_all(ctx, &client, &resources_first).await;
    // Full mode: a model drives the server like a user's agent.
    if let Some(settings) = ctx.settings.llm.clone() {
        // Its own time budget, on top of the session's (which the fixed phases cannot spend
        // of it).
        ctx.deadline = ctx.deadline.max(Instant::now() + settings.max_time);
        ctx.session.llm = Some(match crate::llm::Model::new(settings) {
            Ok(model) => agent::drive(ctx, &client, &tools, &model, &nonce).await,
            Err(e) => json!({ "stopped": e.to_string() }),
        });
    }
    // The same lists again: did anything change behind our back?
    ctx.progress("listing tools again");
    if let Ok(Ok(again)) = tokio::time::timeout(
        ctx.settings.call_timeout.min(ctx.left()),
        client.list_all_tools(),
    )
    .await
    {
        let again: Vec<Value> = again
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        for mut change in diff(&tools, &again) {
            // Harm the new metadata asks for that the approved one did not: the rug pull's
            // consequence (a listing that merely changed is a shape).
            let name = change["tool"].as_str().unwrap_or("");
            let find = |list: &[Value]| list.iter().find(|t| t["name"] == name).cloned();
            if let Some(new) = find(&again) {
                let new_harm = metadata::harm(&metadata::markers(&new, &own).0);
                let old_harm = find(&tools)
                    .map(|old| metadata::harm(&metadata::markers(&old, &own).0))
                    .unwrap_or_default();
                let added: Vec<String> = new_harm
                    .into_iter()
                    .filter(|h| !old_harm.contains(h))
                    .collect();
                if !added.is_empty() {
                    change["harm"] = json!(added);
                }
            }
            ctx.record(EventKind::McpMetadataChanged, change);
        }
    }
    // Prompts and resources too (keyed by name, reported as `prompt:`/`resource:`).
    let limit = ctx.settings.call_timeout.min(ctx.left());
    if prompts_listed
        && let Ok(Ok(again)) = tokio::time::timeout(limit, client.list_all_prompts()).await
    {
        record_changes(ctx, "prompt", &prompts_first, &as_values(&again));
    }
    let limit = ctx.settings.call_timeout.min(ctx.left());
    if resources_listed
        && let Ok(Ok(again)) = tokio::time::timeout(limit, client.list_all_resources()).await
    {
        record_changes(ctx, "resource", &resources_first, &as_values(&again));
    }
    tracing::debug!("lists done");
    // The dwell: the calls are over, time runs fast, and what waited for it shows. Before the
    // exhaustion payloads, which may end the server.
    dwell::dwell(ctx).await;
    // Exhaustion last of all, after every other check: a limit it provokes ends the run, and
    // that end is its evidence (the limit in the call's window), not a session cut short.
    for (name, arguments, payload) in exhaust {
        if tarpits.contains(&name) {
            continue;
        }
        if ctx.left().is_zero() {
            ctx.session.aborted = Some("the time budget ran out".into());
            break;
        }
        match call(ctx, &client, &name, arguments, Some(&payload), &nonce).await {
            Ok(outcome) if outcome.timed_out => tarpits.push(name),
            Ok(_) => {}
            // The run is over: the server died at a limit (or exited) on this payload.
            Err(_) => return Ok(()),
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), client.cancel()).await;
    tracing::debug!("client closed");
    Ok(())
}

fn as_values<T: serde::Serialize>(list: &[T]) -> Vec<Value> {
    list.iter()
        .filter_map(|x| serde_json::to_value(x).ok())
        .collect()
}

/// Record the poisoned entries of a prompt or resource listing; returns the listing.
fn check_listing(ctx: &Ctx<'_>, what: &str, list: Vec<Value>, own: &[&str]) -> Vec<Value> {
    for v in &list {
        let (poisoning, shadowing) = metadata::markers(v, own);
        let harm = metadata::harm(&poisoning);
        let (poisoning, _) = metadata::split_weak(poisoning);
        if !poisoning.is_empty() {
            let name = v["name"].as_str().unwrap_or("?");
            ctx.record(
                EventKind::McpToolList,
                json!({ "tool": format!("{what}:{name}"), "poisoning": poisoning, "harm": (!harm.is_empty()).then_some(harm), "shadowing": shadowing }),
            );
        }
    }
    list
}

/// `mcp.metadata_changed` for each difference between two listings of `what`s.
fn record_changes(ctx: &Ctx<'_>, what: &str, before: &[Value], after: &[Value]) {
    for mut change in diff(before, after) {
        let name = change["tool"].as_str().unwrap_or("?").to_owned();
        change["tool"] = json!(format!("{what}:{name}"));
        ctx.record(EventKind::McpMetadataChanged, change);
    }
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// An error message as the report keeps it: its start, credentials redacted.
pub(crate) fn kept(error: &str) -> String {
    crate::secrets::redacted(&error.chars().take(4096).collect::<String>())
}

/// How one tool call went.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The call's event id.
    pub id: Option<u64>,
    /// It timed out.
    pub timed_out: bool,
    /// The result as JSON text (empty when there was none), capped.
    pub output: String,
    /// An error result, a JSON-RPC error or a timeout.
    pub is_error: bool,
    /// How long it took.
    pub ms: u64,
    /// The events of its window.
    pub window_events: Vec<Event>,
}

/// Every string of a result (as JSON text) the model reads, one per line: texts, structured
/// content, names, URIs, and the strings of JSON inside a text (two levels) — not the base64
/// of an image or audio block or a blob, nor protocol words (`type`, `mimeType`, `role` when
/// they are short identifiers). Text that is not JSON is taken as it is.
pub(crate) fn text_of(output: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(output) else {
        return output.to_owned();
    };
    let mut out = String::new();
    let mut stack = vec![(v, 0u8)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Object(m) => {
                let media = m
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| matches!(t, "image" | "audio"));
                for (k, v) in m {
                    let word = v
                        .as_str()
                        .is_some_and(|s| s.len() <= 64 && !s.contains(char::is_whitespace));
                    let skip = k == "blob"
                        || (k == "data" && media)
                        || (matches!(k.as_str(), "type" | "mimeType" | "role") && word);
                    if !skip {
                        stack.push((v, depth));
                    }
                }
            }
            Value::Array(a) => stack.extend(a.into_iter().rev().map(|v| (v, depth))),
            Value::String(s) => {
                // JSON inside a text (a tool that returns a serialised object): its strings.
                let nested = (depth < 2 && s.trim_start().starts_with(['{', '[']))
                    .then(|| serde_json::from_str::<Value>(&s).ok())
                    .flatten();
                match nested {
                    Some(inner) => stack.push((inner, depth + 1)),
                    None => {
                        out.push_str(&s);
                        out.push('\n');
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Check text the model reads (a tool result, an error, a resource, a prompt) for orders to
/// the model, credentials and — outside tool results, whose canaries [`call`] looks for —
/// planted secrets; record an `mcp.content` event when anything is found. `sent` is an
/// argument of ours that the text may echo, and is not the server's doing.
/// Search `output` joined to the end of what the model read before it (the stream of results):
/// a secret handed out in pieces too short to be found alone is whole again. A find the result
/// showed on its own (`alone`) is not repeated; each canary is reported again only for a more
/// direct form, with `split: true`.
fn read_joined(
    ctx: &mut Ctx<'_>,
    tool: &str,
    id: Option<u64>,
    output: &str,
    alone: &[warden_trace::Hit],
) {
    let mut joined = std::mem::take(&mut ctx.session.read_tail);
    // What was found in the end of the stream before is not this result's doing.
    let before = ctx.canaries.find(joined.as_bytes());
    // The text the model reads, without the result's framing (which would sit between the
    // pieces), and without the line end after it.
    joined.push_str(text_of(output).trim_end_matches('\n'));
    for hit in ctx.canaries.find(joined.as_bytes()) {
        let rank = hit.encoding.rank();
        let shown = alone
            .iter()
            .chain(&before)
            .any(|a| a.planted == hit.planted && a.encoding.rank() <= rank);
        if shown || !ctx.session.read_reported.improves(&hit) {
            continue;
        }
        ctx.record(
            EventKind::CanarySeen,
            json!({ "planted": hit.planted, "encoding": hit.encoding, "where": "tool_result", "tool": tool, "call": id, "split": true }),
        );
    }
    let cut = joined
        .char_indices()
        .map(|(i, _)| i)
        .find(|i| joined.len() - i <= READ_TAIL)
        .unwrap_or(joined.len());
    ctx.session.read_tail = joined[cut..].to_owned();
}

fn inspect(
    ctx: &Ctx<'_>,
    source: &str,
    label: &str,
    call: Option<u64>,
    raw: &str,
    sent: Option<&str>,
) {
    if raw.is_empty() {
        return;
    }
    // Bounded like a result, whatever the source (an error message can be megabytes).
    let mut end = raw.len().min(MAX_OUTPUT);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    let raw = &raw[..end];
    if source != "tool_result" {
        for hit in ctx.canaries.find(raw.as_bytes()) {
            ctx.record(
                EventKind::CanarySeen,
                json!({ "planted": hit.planted, "encoding": hit.encoding, "where": source, "tool": label, "call": call }),
            );
        }
    }
    let mut text = text_of(raw);
    if let Some(sent) = sent.filter(|s| !s.is_empty()) {
        text = text.replace(sent, "");
    }
    let secrets: Vec<crate::secrets::Secret> = crate::secrets::find(&text)
        .into_iter()
        .filter(|s| ctx.canaries.find(s.value.as_bytes()).is_empty())
        .collect();
    // The report shows no credential whole, in any excerpt.
    text = crate::secrets::redact_all(&text, &secrets);
    let injection = crate::content::injection(&text);
    if injection.is_empty() && secrets.is_empty() {
        return;
    }
    let first = injection.first().map(|i| i.excerpt.clone()).or_else(|| {
        let s = secrets.first()?;
        let at = text.find(&s.redacted)?;
        Some(crate::content::excerpt(&text, at, at + s.redacted.len()))
    });
    ctx.record(
        EventKind::McpContent,
        json!({
            "source": source, "tool": label, "call": call,
            "injection": (!injection.is_empty()).then(|| injection.iter().map(|i| i.marker).collect::<Vec<_>>()),
            "harm": Some(crate::content::harm(injection.iter().map(|i| i.marker))).filter(|h| !h.is_empty()),
            "secrets": (!secrets.is_empty()).then(|| secrets.iter().map(|s| json!({ "rule": s.rule, "redacted": s.redacted })).collect::<Vec<_>>()),
            "secret_rules": (!secrets.is_empty()).then(|| secrets.iter().map(|s| s.rule.clone()).collect::<Vec<_>>()),
            // Only gitleaks' generic assignment rules (`"password": "…"` in a template, an
            // example config): a shape; a token of a known format is the exposure itself.
            "generic_only": !secrets.is_empty() && secrets.iter().all(|s| crate::secrets::generic(&s.rule)),
            "excerpt": first,
        }),
    );
}

/// The description of `tool` as listed (empty when unknown).
fn description_of(tools: &[Value], tool: &str) -> String {
    tools
        .iter()
        .find(|t| t["name"] == tool)
        .and_then(|t| t["description"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// The sandbox limits recorded outside any window after the event `id`: a server killed at a
/// limit ends its call before the sandbox has recorded it. Unless the call ended in an answer
/// or a timeout (`settled`), the sandbox gets a second to record it.
async fn limits_after(ctx: &Ctx<'_>, id: u64, settled: bool) -> Vec<Event> {
    let find = || -> Vec<Event> {
        ctx.link
            .events_after(id)
            .into_iter()
            .filter(|e| e.kind == EventKind::SandboxLimitHit && e.triggered_by.is_none())
            .collect()
    };
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        let found = find();
        if settled || !found.is_empty() || Instant::now() >= until {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One tool call in its own window.
async fn call(
    ctx: &mut Ctx<'_>,
    client: &Client,
    tool: &str,
    arguments: Value,
    payload: Option<&(String, Payload)>,
    nonce: &str,
) -> Result<Outcome> {
    let kind = match payload {
        Some((_, p)) => p.kind.name(),
        None => ctx.kind.unwrap_or("benign"),
    };
    ctx.progress(&format!("{tool} ({kind})"));
    // Arguments are kept in the event only up to 2 KiB (a schema default can be megabytes).
    let shown = arguments.to_string();
    let shown: Value = if shown.len() > 2048 {
        json!(crate::secrets::redacted(&format!(
            "{}…",
            shown.chars().take(2048).collect::<String>()
        )))
    } else if ctx.kind == Some("llm") {
        // A model's arguments may quote a credential it was shown.
        let r = crate::secrets::redacted(&shown);
        serde_json::from_str(&r).unwrap_or(json!(r))
    } else {
        arguments.clone()
    };
    ctx.session.call_seq += 1;
    let fallback = format!("tool_call:unrecorded-{}", ctx.session.call_seq);
    // The call event and its window, in one round trip.
    let (id, cpu_open) = ctx.link.record_then_window(
        EventKind::McpToolCall,
        json!({
            "tool": tool, "kind": kind, "arguments": shown, "param": payload.map(|(p, _)| p),
            "payload_bytes": payload.map(|(_, p)| p.value.len()),
        }),
        "tool_call:",
        &fallback,
    )?;
    let window = id.map_or(fallback, |id| format!("tool_call:{id}"));
    ctx.session.windows.insert(window.clone(), tool.to_owned());
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = arguments.as_object().cloned();
    let started = Instant::now();
    // An exhaustion payload gets half the call timeout: a spin shows in that time, and a
    // server with many list parameters would otherwise spend most of its budget waiting.
    let full = match payload {
        Some((_, p)) if p.kind == payloads::Kind::Exhaustion => ctx.settings.call_timeout / 2,
        _ => ctx.settings.call_timeout,
    };
    let limit = full.min(ctx.left());
    let result = tokio::time::timeout(limit, client.call_tool(params)).await;
    let elapsed = ms(started);
    // What the server's processes spent on the CPU in the call's window (both readings from
    // this call's own round trips).
    let cpu_close = ctx.link.window(None)?;
    let cpu_ms = cpu_close
        .zip(cpu_open)
        .map(|(close, open)| close.saturating_sub(open));
    ctx.session.calls += 1;
    // The tool ran: the server answered with a result (an error result too), or with a
    // JSON-RPC error after doing something in the call's window (below). A bare JSON-RPC error
    // (the call refused before any tool ran), a timeout or a closed pipe shows nothing of it.
    let answered = matches!(&result, Ok(Ok(_)));
    let refused = matches!(&result, Ok(Err(_)));
    ctx.session.exercised += u32::from(answered);
    ctx.session.timeouts += u32::from(result.is_err());
    let (output, is_error, timed_out, error) = match result {
        Ok(Ok(r)) => {
            let text = serde_json::to_string(&r).unwrap_or_default();
            (text, r.is_error.unwrap_or(false), false, None)
        }
        Ok(Err(e)) => (String::new(), true, false, Some(e.to_string())),
        Err(_) => (String::new(), true, true, None),
    };
    // Burned: ran to its timeout on the CPU, unless an earlier call left the server spinning.
    // Only a call that had its whole timeout: one cut short by the session's end proves no
    // spin (a slow call at the end of the budget).
    let whole = limit >= full;
    let burned =
        whole && !ctx.session.spinning && crate::exhaustion::burned(timed_out, elapsed, cpu_ms);
    ctx.session.spinning = burned || (ctx.session.spinning && !answered);
    // An error message is kept in the timing event: with its credentials redacted.
    let kept_error = error.as_deref().map(kept);

    let output: String = output.chars().take(MAX_OUTPUT).collect();
    if !is_error {
        ctx.session.accepted += 1;
    }
    // Refused by the server's own argument validation (not merely failed at its work, like a
    // file that does not exist).
    let invalid = timed_out || (is_error && (error.is_some() || validation_error(&output)));
    let benign = payload.is_none() && ctx.kind.is_none();
    if benign && !is_error {
        ctx.session
            .benign_outputs
            .insert(tool.to_owned(), output.clone());
    }
    if benign {
        ctx.session.benign.0 += 1;
        ctx.session.benign.1 += u32::from(!is_error);
        ctx.session.benign_valid += u32::from(!invalid);
    }
    ctx.record(
        EventKind::McpTiming,
        json!({
            "phase": "tool_call", "tool": tool, "call": id, "ms": elapsed, "is_error": is_error,
            "timed_out": timed_out, "timeout_ms": limit.as_millis(), "output_bytes": output.len(),
            "error": kept_error, "invalid_arguments": invalid, "cpu_ms": cpu_ms,
            "burned": burned.then_some(true), "payload": payload.map(|(_, p)| p.kind.name()),
        }),
    );
    // Secrets handed back to the client.
    let hits = ctx.canaries.find(output.as_bytes());
    for hit in &hits {
        ctx.record(
            EventKind::CanarySeen,
            json!({ "planted": hit.planted, "encoding": hit.encoding, "where": "tool_result", "tool": tool, "call": id }),
        );
    }
    read_joined(ctx, tool, id, &output, &hits);
    // What the model reads of it: the result, or the error message.
    let sent = payload.map(|(_, p)| p.value.as_str());
    match &error {
        Some(e) => inspect(ctx, "error", tool, id, e, sent),
        None if is_error => inspect(ctx, "error", tool, id, &output, sent),
        None => inspect(ctx, "tool_result", tool, id, &output, sent),
    }
    let window_events: Vec<Event> = ctx
        .link
        .events_after(id.unwrap_or(0))
        .into_iter()
        .filter(|e| e.triggered_by.as_deref() == Some(window.as_str()))
        .collect();
    // An error answer after the tool visibly acted (a client that failed against the
    // unreachable network, say): the tool ran, and what it did is evidence.
    if refused && window_events.iter().any(acted) {
        ctx.session.exercised += 1;
    }
    if let Some((param, p)) = payload {
        let in_window: Vec<&Event> = window_events.iter().collect();
        let key = format!("{tool}\0{param}");
        if p.value == payloads::SQL_CONTROL {
            ctx.session.sql_controls.insert(key.clone(), output.clone());
        }
        let benign = ctx.session.benign_outputs.get(tool).map(String::as_str);
        let control = ctx.session.sql_controls.get(&key).map(String::as_str);
        let evidence = if p.kind == payloads::Kind::Exhaustion {
            let mut seen = in_window;
            let limits = limits_after(ctx, id.unwrap_or(0), timed_out || answered).await;
            seen.extend(limits.iter());
            crate::exhaustion::judge(&seen, burned, elapsed, cpu_ms)
        } else {
            payloads::detect(
                p,
                nonce,
                &output,
                &in_window,
                !hits.is_empty(),
                benign,
                control,
            )
        };
        ctx.record(
            EventKind::HarnessPayload,
            json!({
                "tool": tool, "param": param, "kind": p.kind.name(), "payload": p.shown(), "call": id,
                "detected": evidence.is_some(), "evidence": evidence,
                "exhaustion": (p.kind == payloads::Kind::Exhaustion && evidence.is_some()).then_some(true),
                "small": (p.kind == payloads::Kind::Exhaustion).then(|| crate::exhaustion::small(p.value.len())),
                "sink": aim::sink_for(&ctx.settings.sinks, tool, p).map(aim::shown),
                "by_design": (payloads::by_design(p.kind, param)
                    || matches!(p.kind, payloads::Kind::CodeInjection | payloads::Kind::CommandInjection)
                        && payloads::runs_code(&description_of(&ctx.session.tools, tool)))
                .then_some(true),
                "family": payloads::family(p),
                // A path payload whose file reached the output the model reads (a read and an
                // exposure), not only an open of it.
                "exposed": (p.kind == payloads::Kind::PathTraversal
                    && evidence.as_deref().is_some_and(payloads::exposed))
                .then_some(true),
            }),
        );
    }
    Ok(Outcome {
        id,
        timed_out,
        output,
        is_error,
        ms: elapsed,
        window_events,
    })
}

/// Whether `e` is something a tool did (not a read of its own files).
fn acted(e: &Event) -> bool {
    matches!(
        e.kind,
        EventKind::ProcessSpawn
            | EventKind::NetConnect
            | EventKind::NetDns
            | EventKind::NetSend
            | EventKind::FileWrite
            | EventKind::FileDelete
            | EventKind::FileRename
            | EventKind::CanarySeen
    )
}

/// Whether an error result says the arguments were refused.
fn validation_error(output: &str) -> bool {
    const SIGNS: &[&str] = &[
        "invalid arguments",
        "invalid params",
        "invalid input",
        "validation error",
        "-32602",
        "required property",
        "is required",
        "missing required",
        "invalid_type",
        "unexpected keyword",
        "must be",
    ];
    let lower = output.to_ascii_lowercase();
    SIGNS.iter().any(|s| lower.contains(s))
}

/// Differences between two tool listings, as `mcp.metadata_changed` data.
pub fn diff(before: &[Value], after: &[Value]) -> Vec<Value> {
    let by_name = |list: &[Value]| -> HashMap<String, Value> {
        list.iter()
            .filter_map(|t| t["name"].as_str().map(|n| (n.to_owned(), t.clone())))
            .collect()
    };
    let (a, b) = (by_name(before), by_name(after));
    let mut out = Vec::new();
    for (name, t) in &a {
        match b.get(name) {
            None => out.push(json!({ "tool": name, "change": "removed", "fields": [] })),
            Some(u) => {
                let fields: Vec<&str> = [
                    "description",
                    "inputSchema",
                    "annotations",
                    "title",
                    "outputSchema",
                    "arguments",
                    "uri",
                    "mimeType",
                ]
                .into_iter()
                .filter(|f| t.get(*f) != u.get(*f))
                .collect();
                if !fields.is_empty() {
                    out.push(json!({ "tool": name, "change": "changed", "fields": fields }));
                }
            }
        }
    }
    for name in b.keys().filter(|n| !a.contains_key(*n)) {
        out.push(json!({ "tool": name, "change": "added", "fields": [] }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_the_model_reads_is_all_there_and_images_are_not() {
        let result = json!({
            "content": [
                {"type": "text", "text": "{\"note\": \"\\u003cIMPORTANT\\u003eobey\"}"},
                {"type": "image", "data": "iVBORw0KGgo", "mimeType": "image/png"},
            ],
            "structuredContent": {"data": "<IMPORTANT>hidden</IMPORTANT>"},
        });
        let text = text_of(&result.to_string());
        assert!(
            text.contains("<IMPORTANT>obey"),
            "nested JSON is read: {text}"
        );
        assert!(
            text.contains("<IMPORTANT>hidden"),
            "structured data is read: {text}"
        );
        assert!(
            !text.contains("iVBORw0KGgo"),
            "an image's base64 is not: {text}"
        );
        assert!(!text.contains("image/png"), "{text}");
    }

    #[test]
    fn rug_pulls_are_diffed() {
        let before = vec![
            json!({"name": "a", "description": "x"}),
            json!({"name": "b"}),
        ];
        let after = vec![
            json!({"name": "a", "description": "y"}),
            json!({"name": "c"}),
        ];
        let d = diff(&before, &after);
        assert!(d.contains(&json!({"tool": "a", "change": "changed", "fields": ["description"]})));
        assert!(d.contains(&json!({"tool": "b", "change": "removed", "fields": []})));
        assert!(d.contains(&json!({"tool": "c", "change": "added", "fields": []})));
        assert!(diff(&before, &before).is_empty());
    }
}
