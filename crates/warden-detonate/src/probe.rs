//! Probe mode (`--mcp-url`): judge a remote MCP server by what can be seen from the outside.
//!
//! The harness runs as in any detonation (windows, metadata checks, benign calls synthesized
//! from the schemas, content checks; adversarial payloads only with `allow_payloads_remote`),
//! its events recorded by a placeholder in the jail, whose own process events are left out:
//! they are not the server's. The report says `mode: "probe"`. No behavioural evidence can
//! exist for a server that runs elsewhere, so a probe is never a PASS: findings give their
//! verdict as usual, and without any the verdict is INCONCLUSIVE at stage `probe` ("no
//! findings in what could be observed").

use std::time::Instant;

use anyhow::Result;
use serde_json::json;
use warden_events::{Event, EventKind};
use warden_jail::Jail;

use crate::harness::{self, remote::Remote};
use crate::phases::verdict::{Inconclusive, Stage};
use crate::{Options, Report, phases, report};

/// Whether an event is the protocol's (kept) rather than the placeholder's (left out).
fn protocol(e: &Event) -> bool {
    let name = serde_json::to_value(e.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    name.starts_with("mcp.") || e.kind == EventKind::HarnessPayload
}

/// Probe `remote` and judge it with `rules`.
pub fn probe(
    jail: &Jail,
    options: &Options,
    remote: &Remote,
    rules: &[warden_rules::Compiled],
) -> Result<Report> {
    let begun = Instant::now();
    remote.check()?;
    let policy = phases::base_policy(options.budget, options);
    let settings = harness::Settings {
        call_timeout: options.call_timeout,
        budget: options.budget,
        adversarial: options.adversarial && options.allow_payloads_remote,
        calls_per_tool: options.calls_per_tool,
        progress: options.progress,
        llm: options.llm.clone(),
        http: None,
        remote: Some(remote.clone()),
        sinks: Vec::new(),
        // Nothing of a remote server runs here: nothing to wait for.
        dwell: std::time::Duration::ZERO,
    };
    phases::progress(
        options,
        "probing the remote server (nothing of it runs here)",
    );
    let placeholder = ["sleep".to_owned(), "86400".to_owned()];
    let (session, events) = harness::run(jail, &policy, &placeholder, &settings)?;
    let events: Vec<Event> = events.into_iter().filter(protocol).collect();
    let windows = session.windows.clone();
    let tool_of = move |w: Option<&str>| w.and_then(|w| windows.get(w).cloned());
    let findings = phases::verdict::findings(rules, &events, &tool_of);
    let score = report::score(&findings);
    let why = if !session.initialized {
        Some(Inconclusive::new(
            Stage::Initialize,
            session
                .aborted
                .clone()
                .unwrap_or_else(|| "the remote server never answered initialize".into()),
        ))
    } else if score < 20 {
        Some(Inconclusive::new(
            Stage::Probe,
            "a remote server, probed from the outside: no behavioural evidence exists, so \
             this is never a PASS; no findings in what could be observed"
                .to_owned(),
        ))
    } else {
        None
    };
    Ok(Report {
        schema: "warden.report/v1",
        target: crate::llm::shown_url(&remote.url),
        mode: "probe",
        verdict: phases::verdict::verdict(score, why.as_ref()),
        why,
        evidence_incomplete: None,
        limits_unenforced: None,
        score,
        duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
        findings,
        tools: crate::tools_json(&session),
        harness: crate::harness_json(
            &session,
            json!({
                "transport": { "kind": "remote", "url": crate::llm::shown_url(&remote.url) },
                "payloads": settings.adversarial,
            }),
        ),
        events,
        sandbox: json!({ "probe": "the server is remote: nothing of it ran in the sandbox" }),
        warden_version: env!("CARGO_PKG_VERSION"),
        llm: session.llm.clone(),
        scan: None,
        location: None,
    })
}
