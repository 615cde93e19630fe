//! The report (`warden.report/v1`): score and verdict, findings with evidence, the tools, the
//! events and the sandbox that applied; rendered as JSON, SARIF 2.1.0 or a terminal timeline.

use serde::Serialize;
use serde_json::{Value, json};
use warden_events::{Event, Finding, Severity, Verdict};
use warden_scan::report::level;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always `warden.report/v1`.
    pub schema: &'static str,
    /// What was detonated.
    pub target: String,
    /// `fast` (the deterministic harness).
    pub mode: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the verdict is `INCONCLUSIVE`: where the detonation stopped short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<crate::Inconclusive>,
    /// Set when events were dropped past the caps: the verdict rests on incomplete evidence
    /// (less sure, never more severe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_incomplete: Option<Value>,
    /// Set when a run of the server had its memory or process limit held by per-process
    /// rlimits only (no cgroup controller): a hog may then stay below every limit that would
    /// have stopped it, so `resource_abuse` evidence is weaker. Says which and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits_unenforced: Option<Value>,
    /// 0–100.
    pub score: u32,
    /// Wall time of the whole detonation.
    pub duration_ms: u64,
    /// The findings, most severe first.
    pub findings: Vec<Finding>,
    /// The tools as listed.
    pub tools: Vec<Value>,
    /// Calls made and accepted.
    pub harness: Value,
    /// Every event.
    pub events: Vec<Event>,
    /// The policy the server ran under.
    pub sandbox: Value,
    /// This Warden.
    pub warden_version: &'static str,
    /// Full mode: the model, its tallies and the transcript.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<Value>,
    /// The static phase: component count, the vulnerability check, static context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scan: Option<Value>,
    /// The manifest or entry file findings point at (SARIF).
    #[serde(skip)]
    pub location: Option<String>,
}

/// The dwell after the last call in words (`None` when none was asked for).
pub fn dwell_line(dwell: &Value) -> Option<String> {
    if let Some(why) = dwell["skipped"].as_str() {
        return Some(format!("dwell skipped: {}", clean(why)));
    }
    let real = dwell["real_ms"].as_u64()?;
    let virt = dwell["virtual_ms"].as_u64()?;
    #[allow(clippy::cast_precision_loss)]
    let line = format!(
        "dwell: {} s of the server's time in {:.1} s (its clocks {}x)",
        virt / 1000,
        real as f64 / 1000.0,
        dwell["rate"].as_f64().unwrap_or(1.0).round()
    );
    Some(line)
}

/// `s` with control, bidirectional and invisible characters written as `\u{..}`.
pub fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || crate::metadata::invisible(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The headline of a run that stopped short: `INCONCLUSIVE at STAGE…`, or, when what was
/// observed stands as the verdict, that it stopped short there.
pub fn stopped_short(verdict: Verdict, why: &crate::Inconclusive) -> String {
    if verdict == Verdict::Inconclusive {
        format!(
            "INCONCLUSIVE at {}: the detonation did not happen",
            name_of(why.stage)
        )
    } else {
        format!(
            "stopped short at {}: the verdict rests on what was seen before",
            name_of(why.stage)
        )
    }
}

/// `evidence_incomplete` for `events`: how many events the sandbox dropped (the largest count
/// its `sandbox.exited` events report), how many packets the boundary capture lost (the kernel
/// dropped them when the tap fell behind), how many were kept, and the kinds kept whole by
/// their reserve; `None` when nothing was lost.
pub fn evidence_incomplete(events: &[Event]) -> Option<Value> {
    let exits = || {
        events
            .iter()
            .filter(|e| e.kind == warden_events::EventKind::SandboxExited)
    };
    let dropped = exits()
        .filter_map(|e| e.data["events_dropped"].as_u64())
        .max()
        .unwrap_or(0);
    let packets = exits()
        .filter_map(|e| e.data["capture"]["dropped"].as_u64())
        .sum::<u64>();
    // A run whose packet capture could not start was judged by the sink's first bytes only.
    let boundary = exits().find_map(|e| e.data["capture"]["error"].as_str().map(str::to_owned));
    if dropped == 0 && packets == 0 && boundary.is_none() {
        return None;
    }
    let mut v = json!({
        "events_dropped": dropped,
        "packets_dropped": packets,
        "events_kept": events.len(),
        "kept_whole": warden_events::RESERVED_KINDS.iter().map(|k| name_of(*k)).collect::<Vec<_>>(),
    });
    if let Some(b) = boundary {
        v["boundary_off"] = json!(b);
    }
    Some(v)
}

/// `limits_unenforced` for `events`: the tree limits that some run of the server held by
/// rlimits alone (its `sandbox.exited` says no cgroup held them), and why; `None` otherwise.
pub fn limits_unenforced(events: &[Event]) -> Option<Value> {
    let mut missing = std::collections::BTreeSet::new();
    let mut why = None;
    for e in events
        .iter()
        .filter(|e| e.kind == warden_events::EventKind::SandboxExited)
    {
        let by = &e.data["limits_by"];
        if !by.is_object() {
            continue;
        }
        for limit in ["memory", "pids"] {
            if by[limit].is_null() {
                missing.insert(limit);
                why = by["cgroup_v2"].as_str().map(str::to_owned);
            }
        }
    }
    (!missing.is_empty()).then(|| json!({ "limits": missing, "cgroup_v2": why }))
}

/// The name a vocabulary value (kind, severity, verdict, category) has in reports.
pub fn name_of<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn weight(s: Severity) -> u32 {
    match s {
        Severity::Critical => 80,
        Severity::High => 60,
        Severity::Medium => 40,
        Severity::Low => 20,
        Severity::Info => 0,
    }
}

/// The score: the most severe finding's band, plus 3 for each further finding of low severity
/// or worse, staying inside that band (so the verdict is the worst finding's).
pub fn score(findings: &[Finding]) -> u32 {
    let Some(top) = findings.iter().map(|f| weight(f.severity)).max() else {
        return 0;
    };
    let rest = findings
        .iter()
        .filter(|f| f.severity >= Severity::Low)
        .count()
        .saturating_sub(1);
    let bonus = u32::try_from(rest)
        .unwrap_or(u32::MAX)
        .saturating_mul(3)
        .min(19);
    (top + bonus).min(100)
}

impl Report {
    /// SARIF 2.1.0: a rule per rule id (its definition's level where the rule set has one),
    /// a result per finding at the manifest or entry file, or at the file a static finding
    /// was read from with its component as the logical location.
    pub fn sarif(&self, rules: &[warden_rules::Compiled]) -> Value {
        let uri = self.location.clone().unwrap_or_else(|| "mcp-server".into());
        let mut sarif = warden_scan::report::sarif(&self.findings, &uri, self.warden_version);
        let run = &mut sarif["runs"][0];
        if let Some(descriptors) = run["tool"]["driver"]["rules"].as_array_mut() {
            for d in descriptors {
                if let Some(r) = rules.iter().find(|r| d["id"] == r.rule.id.as_str()) {
                    d["fullDescription"] = json!({ "text": r.rule.recommendation });
                    d["defaultConfiguration"] = json!({ "level": level(r.rule.severity) });
                    d["properties"] = json!({ "category": r.rule.category, "severity": r.rule.severity, "basis": r.rule.basis, "falsepositives": r.rule.falsepositives });
                }
            }
        }
        run["invocations"] = json!([self.invocation()]);
        run["properties"] =
            json!({ "verdict": self.verdict, "score": self.score, "target": self.target });
        sarif
    }

    /// The SARIF invocation: whether the detonation happened, and if not, why (as a
    /// tool execution notification).
    fn invocation(&self) -> Value {
        match &self.why {
            None => json!({ "executionSuccessful": true }),
            Some(why) => json!({
                "executionSuccessful": false,
                "exitCode": 3,
                "toolExecutionNotifications": [{
                    "level": "error",
                    "descriptor": { "id": format!("inconclusive/{}", name_of(why.stage)) },
                    "message": { "text": format!("INCONCLUSIVE ({}): {}", name_of(why.stage), why.reason) },
                    "properties": { "stage": why.stage, "stderr_tail": why.stderr_tail },
                }],
            }),
        }
    }

    /// The terminal timeline (colour when `colour`, plain ASCII otherwise). Everything the
    /// server chose (names, messages, event data) is shown with control and invisible
    /// characters escaped, so it cannot rewrite the terminal.
    pub fn timeline(&self, colour: bool) -> String {
        self.timeline_text(colour)
    }

    fn timeline_text(&self, colour: bool) -> String {
        let paint = |code: &str, text: &str| {
            if colour {
                format!("\x1b[{code}m{text}\x1b[0m")
            } else {
                text.to_owned()
            }
        };
        let sev = |s: Severity| {
            let (code, name) = match s {
                Severity::Critical => ("1;35", "CRITICAL"),
                Severity::High => ("1;31", "HIGH"),
                Severity::Medium => ("33", "MEDIUM"),
                Severity::Low => ("36", "LOW"),
                Severity::Info => ("2", "INFO"),
            };
            paint(code, &format!("{name:<8}"))
        };
        let mut out = String::new();
        let verdict = name_of(self.verdict);
        let mut lines = vec![
            format!(
                "warden detonate  {}",
                clean(&self.target.chars().take(60).collect::<String>())
            ),
            format!(
                "verdict {verdict}   score {}/100   {} findings   {} ms",
                self.score,
                self.findings.len(),
                self.duration_ms
            ),
            format!(
                "{} tools, {} calls ({} accepted), {} events",
                self.tools.len(),
                self.harness["calls"],
                self.harness["accepted"],
                self.events.len()
            ),
        ];
        if let Some(dwell) = dwell_line(&self.harness["dwell"]) {
            lines.push(dwell);
        }
        if let Some(why) = &self.why {
            lines.insert(1, stopped_short(self.verdict, why));
        }
        if let Some(lost) = &self.evidence_incomplete {
            lines.insert(
                1,
                match lost["boundary_off"].as_str() {
                    Some(why) => format!(
                        "EVIDENCE INCOMPLETE: the network boundary's capture did not run ({}): what left was judged by each connection's first bytes only; {} events dropped; the verdict is a lower bound",
                        clean(why), lost["events_dropped"]
                    ),
                    None => format!(
                        "EVIDENCE INCOMPLETE: {} events dropped past the caps (canaries and protocol events kept whole), {} packets lost at the boundary; the verdict is a lower bound",
                        lost["events_dropped"], lost["packets_dropped"]
                    ),
                },
            );
        }
        if let Some(gap) = &self.limits_unenforced {
            lines.insert(
                1,
                format!(
                    "LIMITS UNENFORCED: {} held by per-process rlimits only (no cgroup: {}); a resource hog may pass below them",
                    gap["limits"], gap["cgroup_v2"]
                ),
            );
        }
        if let Some(s) = &self.scan {
            let check = &s["vulnerability_check"];
            lines.push(format!(
                "{} components ({} direct), known vulnerabilities: {} ({})",
                s["components"],
                s["direct"],
                match check["status"].as_str().unwrap_or("?") {
                    "complete" => "checked",
                    "partial" => "partly checked",
                    "none" => "nothing to check",
                    _ => "UNKNOWN",
                },
                clean(check["source"].as_str().unwrap_or("?"))
            ));
        }
        if let Some(l) = &self.llm {
            lines.push(format!(
                "full mode: {}:{} made {} calls ({} invalid), {} tokens, {} ms",
                clean(l["provider"].as_str().unwrap_or("?")),
                clean(
                    &l["model"]
                        .as_str()
                        .unwrap_or("?")
                        .chars()
                        .take(30)
                        .collect::<String>()
                ),
                l["calls"],
                l["invalid_calls"],
                l["prompt_tokens"].as_u64().unwrap_or(0)
                    + l["completion_tokens"].as_u64().unwrap_or(0),
                l["wall_ms"]
            ));
            lines.push(format!(
                "model phase: {}",
                clean(
                    &l["stopped"]
                        .as_str()
                        .unwrap_or("?")
                        .chars()
                        .take(60)
                        .collect::<String>()
                )
            ));
        }
        let width = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2;
        out.push_str(&format!("+{}+\n", "-".repeat(width)));
        for l in &lines {
            out.push_str(&format!("| {l:<w$} |\n", w = width - 2));
        }
        out.push_str(&format!("+{}+\n", "-".repeat(width)));
        if let Some(why) = &self.why {
            out.push_str(&format!("{} {}\n", paint("1;33", "STOPPED "), why.reason));
            for line in why.stderr_tail.lines() {
                out.push_str(&format!("         stderr| {line}\n"));
            }
            out.push_str(
                "         -> nothing was judged: fix the cause above and run it again (exit 3)\n",
            );
        }
        if self.findings.is_empty() {
            out.push_str("no findings\n");
        }
        for f in &self.findings {
            let tool = match (&f.tool, f.tools.len()) {
                (Some(t), n) if n > 1 => format!(" [{} and {} more tools]", clean(t), n - 1),
                (Some(t), _) => format!(" [{}]", clean(t)),
                (None, _) => String::new(),
            };
            out.push_str(&format!(
                "{} {} ({}){}{}: {}\n",
                sev(f.severity),
                f.rule,
                name_of(f.category),
                tool,
                if f.llm_only { " [LLM phase only]" } else { "" },
                clean(&f.message)
            ));
            for id in f.evidence.iter().take(5) {
                if let Some(e) = self.events.iter().find(|e| e.id == *id) {
                    let kind = name_of(e.kind);
                    let data: String = e.data.to_string().chars().take(110).collect();
                    out.push_str(&format!(
                        "         #{:<5} {:>6} ms  {:<16} {}\n",
                        e.id,
                        e.t_ms,
                        kind,
                        clean(&data)
                    ));
                }
            }
            if let Some(why) = &f.capped {
                out.push_str(&format!(
                    "         shape, not higher than {}: {}\n",
                    name_of(f.severity),
                    clean(why)
                ));
            }
            out.push_str(&format!("         -> {}\n", f.recommendation));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_boundary_that_did_not_run_is_incomplete_evidence() {
        let exited = |capture: Value| warden_events::Event {
            id: 9,
            t_ms: 0,
            kind: warden_events::EventKind::SandboxExited,
            pid: None,
            triggered_by: None,
            data: json!({ "events_dropped": 0, "capture": capture }),
        };
        assert!(evidence_incomplete(&[exited(json!({ "dropped": 0 }))]).is_none());
        let off = evidence_incomplete(&[exited(json!({ "error": "packet socket: EPERM" }))]);
        assert_eq!(off.unwrap()["boundary_off"], "packet socket: EPERM");
    }

    use super::*;
    use warden_events::Category;

    fn exited(limits_by: Value) -> Event {
        Event {
            id: 1,
            t_ms: 0,
            kind: warden_events::EventKind::SandboxExited,
            pid: None,
            triggered_by: None,
            data: json!({ "exit_code": 0, "limits_by": limits_by }),
        }
    }

    #[test]
    fn limits_held_by_rlimits_alone_are_named_with_the_reason() {
        let held = exited(json!({ "memory": "cgroup_v2", "pids": "cgroup_v2", "cgroup_v2": "x" }));
        assert_eq!(limits_unenforced(std::slice::from_ref(&held)), None);
        let gap = exited(json!({ "memory": null, "pids": "cgroup_v1", "cgroup_v2": "not root" }));
        assert_eq!(
            limits_unenforced(&[held, gap]),
            Some(json!({ "limits": ["memory"], "cgroup_v2": "not root" }))
        );
        // An older sandbox that does not say is not taken for a gap.
        let silent = Event {
            data: json!({ "exit_code": 0 }),
            ..exited(Value::Null)
        };
        assert_eq!(limits_unenforced(&[silent]), None);
    }

    fn f(s: Severity) -> Finding {
        Finding {
            category: Category::ShellExec,
            rule: "r".into(),
            severity: s,
            message: String::new(),
            recommendation: String::new(),
            tool: None,
            tools: vec![],
            evidence: vec![],
            llm_only: false,
            basis: None,
            capped: None,
            location: None,
        }
    }

    #[test]
    fn server_text_cannot_drive_the_terminal() {
        assert_eq!(clean("ok\u{1b}[2Jx\u{202e}"), "ok\\u{1b}[2Jx\\u{202e}");
        assert_eq!(clean("plain text"), "plain text");
    }

    #[test]
    fn the_verdict_is_the_worst_finding() {
        assert_eq!(score(&[]), 0);
        assert_eq!(
            Verdict::from_score(score(&[f(Severity::Info)])),
            Verdict::Pass
        );
        assert_eq!(
            Verdict::from_score(score(&[f(Severity::Low), f(Severity::Low)])),
            Verdict::Low
        );
        let many: Vec<Finding> = (0..30).map(|_| f(Severity::Medium)).collect();
        assert_eq!(Verdict::from_score(score(&many)), Verdict::Medium);
        assert_eq!(score(&[f(Severity::Critical), f(Severity::High)]), 83);
    }
}
