//! The audit's report: every configured server with its verdict (or why it was not judged), its
//! top findings, what changed since its pins and its whole detonation report, as a table, JSON
//! (`warden.audit/v1`), SARIF (one run per judged server) and one HTML page.
//!
//! Guarantees: every entry found is in the report exactly once, judged or not; the verdicts a
//! `--fail-on` compares are the detonations' own.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use warden_sweep::index::esc;

use crate::discover::Found;
use crate::pins::Change;

/// The report's schema name.
pub const SCHEMA: &str = "warden.audit/v1";

/// The whole audit.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The Warden that ran it.
    pub warden_version: &'static str,
    /// Every configuration file looked at.
    pub configs: Vec<Found>,
    /// Every server they list.
    pub servers: Vec<Server>,
}

/// One configured server.
#[derive(Debug, Clone, Serialize)]
pub struct Server {
    /// The client.
    pub client: String,
    /// The configuration file.
    pub config: PathBuf,
    /// Its name there.
    pub name: String,
    /// What it was judged as (a target, with its arguments, or a command line).
    pub target: Option<String>,
    /// The variables its entry sets (names only; the chamber gave each a value of its own).
    pub env_names: Vec<String>,
    /// The client has it turned off (judged all the same).
    pub disabled: bool,
    /// PASS … CRITICAL, INCONCLUSIVE, `ERROR` (no report came out) or `NOT_JUDGED`.
    pub verdict: String,
    /// The detonation's score (0 without one).
    pub score: u32,
    /// The findings above low, most severe first (`severity rule [tool]`), at most five.
    pub top_findings: Vec<String>,
    /// Why it was not judged, why there is no report, or why the verdict is INCONCLUSIVE.
    pub why: Option<String>,
    /// Its pins: `new` (pinned now), `unchanged`, `changed` (with the changes), `accepted`
    /// (changed, and `--update-pins` took the new ones).
    pub pins: Option<PinState>,
    /// The detonation report (`warden.report/v1`).
    pub report: Option<Value>,
}

/// A server against its pins.
#[derive(Debug, Clone, Serialize)]
pub struct PinState {
    /// `new`, `unchanged`, `changed` or `accepted`.
    pub status: &'static str,
    /// What changed.
    pub changes: Vec<Change>,
}

/// The identity a server is pinned under.
pub fn pin_key(s: &Server) -> String {
    format!("{} | {} | {}", s.client, s.config.display(), s.name)
}

const ORDER: [&str; 5] = ["critical", "high", "medium", "low", "info"];

/// The findings above low in `report`, most severe first.
pub fn top_findings(report: &Value) -> Vec<String> {
    let mut list: Vec<(usize, String)> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let sev = f["severity"].as_str()?;
            let rank = ORDER.iter().position(|o| *o == sev)?;
            (rank < 3).then(|| {
                let tool = f["tool"]
                    .as_str()
                    .map(|t| format!(" [{t}]"))
                    .unwrap_or_default();
                (
                    rank,
                    format!("{sev} {}{tool}", f["rule"].as_str().unwrap_or("?")),
                )
            })
        })
        .collect();
    list.sort();
    list.dedup();
    list.into_iter().take(5).map(|(_, s)| s).collect()
}

/// Whether a verdict reaches `level` (`low` … `critical`).
pub fn reaches(verdict: &str, level: &str) -> bool {
    let rank = |s: &str| ORDER.iter().position(|o| o.eq_ignore_ascii_case(s));
    matches!((rank(verdict), rank(level)), (Some(v), Some(l)) if v <= l)
}

impl Audit {
    /// Whether the audit fails a `--fail-on level` gate: a server's verdict reaches `level`, a
    /// server meant to be judged was not (`ERROR`, `INCONCLUSIVE`: a gate never passes on what
    /// it could not see), or a server's tools changed since its pins and were not accepted.
    pub fn fails(&self, level: &str) -> bool {
        self.servers.iter().any(|s| {
            reaches(&s.verdict, level)
                || matches!(s.verdict.as_str(), "ERROR" | "INCONCLUSIVE")
                || s.pins.as_ref().is_some_and(|p| p.status == "changed")
        })
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for c in self.configs.iter().filter(|c| c.error.is_some()) {
            let _ = writeln!(
                out,
                "! {} {}: {}",
                c.client,
                c.path.display(),
                c.error.as_deref().unwrap_or_default()
            );
        }
        let _ = writeln!(
            out,
            "{:<15} {:<22} {:<44} {:<12} top findings",
            "client", "server", "target", "verdict"
        );
        for s in &self.servers {
            let mut notes = s.top_findings.join(", ");
            if let Some(p) = s.pins.as_ref().filter(|p| !p.changes.is_empty()) {
                let _ = write!(
                    notes,
                    "{}pins {}: {} change(s)",
                    if notes.is_empty() { "" } else { "; " },
                    p.status,
                    p.changes.len()
                );
            }
            if notes.is_empty()
                && let Some(why) = &s.why
            {
                notes = why.clone();
            }
            let _ = writeln!(
                out,
                "{:<15} {:<22} {:<44} {:<12} {}",
                clip(&s.client, 15),
                clip(&s.name, 22),
                clip(s.target.as_deref().unwrap_or("-"), 44),
                s.verdict,
                clip(&notes, 160)
            );
        }
        let judged = self.servers.iter().filter(|s| s.report.is_some()).count();
        let _ = writeln!(
            out,
            "{} servers in {} configuration files; {judged} judged in the chamber",
            self.servers.len(),
            self.configs.len()
        );
        out
    }

    /// One SARIF log with a run per judged server (each detonation's own `runs`).
    pub fn sarif(&self, per_server: &[Value]) -> Value {
        let runs: Vec<Value> = per_server
            .iter()
            .flat_map(|s| s["runs"].as_array().cloned().unwrap_or_default())
            .collect();
        serde_json::json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": runs,
        })
    }

    /// One self-contained HTML page.
    pub fn html(&self) -> String {
        let mut rows = String::new();
        for s in &self.servers {
            let _ = write!(
                rows,
                "<tr><td>{}</td><td>{}<br><small>{}</small></td><td><code>{}</code></td><td class=\"v {}\">{}</td><td>{}</td></tr>",
                esc(&s.client),
                esc(&s.name),
                esc(&s.config.display().to_string()),
                esc(s.target.as_deref().unwrap_or("-")),
                esc(&s.verdict.to_ascii_lowercase()),
                esc(&s.verdict),
                esc(&if s.top_findings.is_empty() {
                    s.why.clone().unwrap_or_default()
                } else {
                    s.top_findings.join(", ")
                }),
            );
        }
        format!(
            "<!doctype html><meta charset=\"utf-8\"><title>warden audit</title>\
             <style>body{{font:14px system-ui;margin:2em}}td,th{{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}\
             .critical,.high{{color:#b00;font-weight:bold}}.medium{{color:#a60}}</style>\
             <h1>warden audit</h1><p>{} servers in {} configuration files, each judged in Warden's chamber (never started on this machine).</p>\
             <table><tr><th>client</th><th>server</th><th>target</th><th>verdict</th><th>top findings</th></tr>{rows}</table>",
            self.servers.len(),
            self.configs.len()
        )
    }
}

/// `s` for a column `n` wide: no control character (names and targets come from the
/// configuration), at most `n` characters with the ellipsis.
fn clip(s: &str, n: usize) -> String {
    warden_sweep::clip(s, n.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_ranked_and_levels_compared() {
        let r = serde_json::json!({"findings": [
            {"severity": "medium", "rule": "outbound-network"},
            {"severity": "low", "rule": "x"},
            {"severity": "critical", "rule": "canary-leaving", "tool": "get"}]});
        assert_eq!(
            top_findings(&r),
            ["critical canary-leaving [get]", "medium outbound-network"]
        );
        assert!(reaches("CRITICAL", "high") && reaches("HIGH", "high"));
        assert!(!reaches("MEDIUM", "high") && !reaches("NOT_JUDGED", "low"));
        assert!(!reaches("INCONCLUSIVE", "low") && !reaches("PASS", "low"));
    }
}
