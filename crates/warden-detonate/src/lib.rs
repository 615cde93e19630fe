//! The detonation chamber: start an untrusted MCP server inside the jail with decoys and
//! tracing on, exercise it through a real MCP client, and judge it by what it does.
//!
//! [`target`] works out the start command and the source folder; [`harness`] drives the
//! session (initialize, lists, every tool with benign and adversarial arguments, the lists
//! again), each call in its own attribution window; [`metadata`] reads the tools' own
//! descriptions; [`content`] and [`secrets`] read what tools, resources and prompts hand the
//! model (orders to it, credentials); [`payloads`] builds and recognises attacks; [`llm`] is
//! full mode's model, which plays a user's agent; `warden-rules` turns the events into
//! findings; [`report`] renders the verdict and [`html`] draws it as a page. [`detonate`]
//! runs these as the pipeline of [`phases`]. The server never runs outside the jail, its whole
//! tree is gone when [`detonate`] returns, and a detonation that did not happen is reported as
//! `INCONCLUSIVE`, never as a pass.

pub mod args;
pub mod content;
pub mod exhaustion;
pub mod fetch;
pub mod harness;
pub mod html;
pub mod llm;
pub mod metadata;
pub mod payloads;
pub mod phases;
pub mod probe;
pub mod report;
pub mod secrets;
pub mod target;
pub mod wrap;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;
use warden_jail::Jail;

pub use phases::verdict::{Inconclusive, Stage};
pub use report::Report;

/// What to detonate and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// A local file or folder, or `npm:`/`pypi:`/`github:`.
    pub target: Option<String>,
    /// The start command (program and arguments); with a registry or GitHub target, how to
    /// start the installed package (its programs are on `PATH`).
    pub command: Vec<String>,
    /// Arguments appended to the start command worked out for a registry or GitHub target (how
    /// a client's `npx -y PACKAGE ARGS…` starts it); ignored with `command`.
    pub server_args: Vec<String>,
    /// Extra environment for the server.
    pub env: Vec<(String, String)>,
    /// A host folder mounted read-write at `/workspace` (the server's working directory);
    /// default: an empty private one.
    pub workspace: Option<PathBuf>,
    /// Time for one request (default 10 s).
    pub call_timeout: Duration,
    /// Benign calls of each tool, the first included (see [`harness::Settings`]).
    pub calls_per_tool: u32,
    /// Time for the whole session (default 120 s).
    pub budget: Duration,
    /// Virtual length of the dwell after the calls (default ten minutes, in a few real
    /// seconds; zero: none). See [`harness::dwell`].
    pub dwell: Duration,
    /// Time for the install phase (default 300 s).
    pub install_budget: Duration,
    /// Rule directories (override and extend the built-in rules).
    pub rules: Vec<PathBuf>,
    /// Send adversarial payloads.
    pub adversarial: bool,
    /// Where a container masks `/proc` and no fresh one can be made, use its own (weaker).
    pub allow_host_proc: bool,
    /// Progress on stderr.
    pub progress: bool,
    /// Full mode: a language model drives the server too.
    pub llm: Option<llm::Settings>,
    /// The server speaks Streamable HTTP on this port inside the jail (stdio when `None`).
    pub http: Option<harness::http::HttpTarget>,
    /// Probe mode: a remote server, reached at its URL, never run here.
    pub remote: Option<harness::remote::Remote>,
    /// Probe mode only: send adversarial payloads to the remote server too.
    pub allow_payloads_remote: bool,
    /// Where the static phase looks up known vulnerabilities (none by default: a detonation
    /// asks no third party about the package unless told to).
    pub osv: warden_scan::OsvSource,
    /// A browser to offer to a server that drives one (`auto`: the first one installed).
    pub browser: Option<PathBuf>,
    /// Write the session's traffic (every packet of the server's network namespace) to this
    /// pcapng file.
    pub pcap: Option<PathBuf>,
    /// Judge the network by the sink's first bytes only (no packet capture, no TLS opened).
    pub no_boundary: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target: None,
            command: Vec::new(),
            server_args: Vec::new(),
            env: Vec::new(),
            workspace: None,
            call_timeout: Duration::from_secs(10),
            calls_per_tool: harness::repeat::CALLS_PER_TOOL,
            budget: Duration::from_secs(120),
            dwell: harness::dwell::DEFAULT,
            install_budget: Duration::from_secs(300),
            rules: Vec::new(),
            adversarial: true,
            allow_host_proc: false,
            progress: false,
            llm: None,
            osv: warden_scan::OsvSource::None,
            http: None,
            remote: None,
            allow_payloads_remote: false,
            browser: None,
            pcap: None,
            no_boundary: false,
        }
    }
}

/// Detonate the target with `jail`; the rules come from `options.rules` over the built-in set.
/// Errors are the operator's (a bad target, rules that do not load); everything that goes wrong
/// with the server or the sandbox is in the report.
pub fn detonate(jail: &Jail, options: &Options) -> Result<(Report, Vec<warden_rules::Compiled>)> {
    let begun = Instant::now();
    let rules = warden_rules::ruleset(&options.rules).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(remote) = &options.remote {
        let report = probe::probe(jail, options, remote, &rules)?;
        return Ok((report, rules));
    }
    let source = phases::source::source(options)?;
    let browser = phases::browser::offer(options)?;
    let mut install = phases::install::install(jail, options, &source, browser.as_ref())?;
    let scanned = phases::scan::scan(options, &source);
    let mut start = phases::start::start(options, &source, &install)?;
    if let Some(b) = &browser {
        b.equip(&mut start.policy);
    }
    let install_events = std::mem::take(&mut install.events);
    let sinks = scanned
        .as_ref()
        .map(|s| s.report.sinks.clone())
        .unwrap_or_default();
    let mut observed = phases::session::session(jail, options, &start, install_events, &sinks)?;
    if let Some(b) = &browser {
        b.annotate(&mut observed.events);
    }
    phases::decoys::label(&mut observed.events);
    phases::decoys::attribute(&mut observed.events);
    phases::audience::mark(&mut observed.events);
    phases::intent::mark(&mut observed.events);
    exhaustion::mark_limits(&mut observed.events);
    let shown = phases::userdata::Shown::new(
        &observed.session.tools,
        observed.session.server_name.as_deref(),
        observed.session.instructions.as_deref(),
        &configuration(options, &start.resolved),
    );
    phases::userdata::mark(&mut observed.events, &observed.session.windows, &shown);
    phases::explain::explain(&mut observed.events, &observed.session.windows);
    let inconclusive =
        phases::verdict::happened(start.blocked.as_ref(), &observed.session, &observed.events);
    let windows = observed.session.windows.clone();
    let tool_of = move |w: Option<&str>| w.and_then(|w| windows.get(w).cloned());
    let mut findings = phases::verdict::findings(&rules, &observed.events, &tool_of);
    phases::verdict::mark_llm_only(&mut findings, &observed.events);
    if let Some(s) = &scanned {
        findings.extend(s.findings());
        findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(&b.rule)));
    }
    let score = report::score(&findings);
    let session = &observed.session;
    let tools = tools_json(session);
    let report = Report {
        schema: "warden.report/v1",
        target: start.resolved.display.clone(),
        mode: if options.llm.is_some() {
            "full"
        } else {
            "fast"
        },
        verdict: phases::verdict::verdict(score, inconclusive.as_ref()),
        why: inconclusive,
        evidence_incomplete: report::evidence_incomplete(&observed.events),
        limits_unenforced: report::limits_unenforced(&observed.events),
        score,
        duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
        findings,
        tools,
        harness: harness_json(
            session,
            json!({
                "server_stderr": session.stderr.chars().take(4000).collect::<String>(),
                "argv": start.resolved.argv,
                "transport": session.detected_transport.clone().or_else(|| {
                    options.http.as_ref().map(harness::http::HttpTarget::describe)
                }).unwrap_or_else(|| json!("stdio")),
                "transport_given": options.http.as_ref().map_or_else(
                    || json!("stdio"),
                    harness::http::HttpTarget::describe,
                ),
                "install_exit_code": install.exit_code,
            }),
        ),
        events: observed.events,
        sandbox: serde_json::to_value(&start.policy).unwrap_or_default(),
        warden_version: env!("CARGO_PKG_VERSION"),
        llm: session.llm.clone(),
        scan: scanned.as_ref().map(phases::scan::Scanned::summary),
        location: start.resolved.location.clone(),
    };
    Ok((report, rules))
}

/// What the user configured the server with, as text: the target as given, its command line
/// and environment.
fn configuration(options: &Options, resolved: &target::Resolved) -> Vec<String> {
    let mut out = vec![resolved.display.clone(), resolved.argv.join(" ")];
    out.extend(options.command.iter().cloned());
    out.extend(options.env.iter().map(|(k, v)| format!("{k}={v}")));
    out
}

/// An event for the unit tests: process 3, at time 0, in `window`.
#[cfg(test)]
pub(crate) fn test_event(
    id: u64,
    kind: warden_events::EventKind,
    window: Option<&str>,
    data: serde_json::Value,
) -> warden_events::Event {
    warden_events::Event {
        id,
        t_ms: 0,
        kind,
        pid: Some(3),
        triggered_by: window.map(str::to_owned),
        data,
    }
}

/// The report's `tools`: each as listed, its description hashed (and kept, capped).
pub(crate) fn tools_json(session: &harness::Session) -> Vec<serde_json::Value> {
    session
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t["name"],
                "description_sha256": harness::sha256(t["description"].as_str().unwrap_or("")),
                "description": t["description"].as_str().map(|d| d.chars().take(4000).collect::<String>()),
                "annotations": t.get("annotations"),
                "input_schema": t.get("inputSchema"),
            })
        })
        .collect()
}

/// The report's `harness`: the session's tallies, and `extra` (what differs by mode).
pub(crate) fn harness_json(
    session: &harness::Session,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut h = json!({
        "calls": session.calls,
        "accepted": session.accepted,
        "exercised": session.exercised,
        "benign_calls": session.benign.0,
        "benign_accepted": session.benign.1,
        "benign_valid": session.benign_valid,
        "aborted": session.aborted,
    });
    if let Some(d) = &session.dwell {
        h["dwell"] = d.clone();
    }
    if let (Some(h), serde_json::Value::Object(extra)) = (h.as_object_mut(), extra) {
        h.extend(extra);
    }
    h
}
