//! The scan's report (`"schema": "warden.scan/v1"`) and its renderings: a terminal summary, JSON
//! and SARIF 2.1.0 (each finding at the file it was read from, a vulnerable component as its
//! logical location). CycloneDX is in [`crate::cyclonedx`].
//!
//! Text from the scanned files (names, scripts, summaries) never reaches the terminal with
//! control characters in it.

use serde::Serialize;
use serde_json::{Value, json};
use warden_events::{Finding, Severity};

use crate::component::Component;
use crate::osv::Vulnerability;
use crate::{Check, OsvStatus};

/// What a scan found.
#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    /// `warden.scan/v1`.
    pub schema: &'static str,
    /// What was scanned.
    pub target: String,
    /// The scanner's version.
    pub warden_version: &'static str,
    /// How long it took.
    pub duration_ms: u64,
    /// Every component.
    pub components: Vec<Component>,
    /// Known vulnerabilities of the components.
    pub vulnerabilities: Vec<Vulnerability>,
    /// Whether the vulnerabilities could be checked.
    pub vulnerability_check: Check,
    /// Findings: vulnerabilities, capabilities, typosquats.
    pub findings: Vec<Finding>,
    /// Files that should have said something and could not be read.
    pub unreadable: Vec<Unreadable>,
    /// The walk stopped at its limit: the inventory may be incomplete.
    pub truncated: bool,
    /// What the scan could not see, in words (set by the caller: a package whose source
    /// distribution must be built before its dependencies are known…).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Dangerous sinks reached from a tool's handler, by tool ([`crate::sinks`]).
    pub sinks: Vec<crate::sinks::Sink>,
}

/// A file the inventory could not read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    /// The file.
    pub file: String,
    /// Why.
    pub why: String,
}

/// Whether `c` can change what a terminal shows beyond itself: control characters (C0, DEL,
/// C1) and the bidirectional and invisible formatting characters.
pub fn unsafe_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `s` without characters that could drive a terminal, at most `max` characters (with `…`
/// when cut).
pub fn clip(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if unsafe_on_a_terminal(c) { ' ' } else { c })
        .collect();
    if clean.chars().count() <= max {
        clean
    } else {
        let mut cut: String = clean.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

/// `url` without user, password, query or fragment.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = host.rsplit('@').next().unwrap_or(host);
    format!("{scheme}://{host}{path}")
}

/// SARIF's level for a severity.
pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// SARIF 2.1.0 for `findings`: one rule per rule id, one result per finding, located at the
/// finding's file (and its component, for a vulnerable dependency). `fallback` is the location
/// of findings without one.
pub fn sarif(findings: &[Finding], fallback: &str, version: &str) -> Value {
    let mut rules: Vec<&Finding> = Vec::new();
    for f in findings {
        if !rules.iter().any(|r| r.rule == f.rule) {
            rules.push(f);
        }
    }
    let descriptors: Vec<Value> = rules
        .iter()
        .map(|r| {
            json!({
                "id": r.rule,
                "name": r.rule,
                "shortDescription": { "text": crate::report::category_name(r) },
                "fullDescription": { "text": r.recommendation },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": { "category": r.category, "severity": r.severity },
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let index = rules.iter().position(|r| r.rule == f.rule);
            let file = f
                .location
                .as_ref()
                .map(|l| l.file.as_str())
                .filter(|f| !f.is_empty())
                .unwrap_or(fallback);
            let mut location = json!({ "physicalLocation": {
                "artifactLocation": { "uri": file },
                "region": { "startLine": 1 }
            }});
            if let Some(purl) = f.location.as_ref().and_then(|l| l.component.as_ref()) {
                location["logicalLocations"] =
                    json!([{ "fullyQualifiedName": purl, "kind": "module" }]);
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": index,
                "level": level(f.severity),
                "message": { "text": format!("{}{}", f.tool.as_ref().map(|t| format!("[{t}] ")).unwrap_or_default(), f.message) },
                "locations": [location],
                "properties": { "severity": f.severity, "category": f.category, "evidence": f.evidence, "llm_only": f.llm_only },
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "warden",
                "version": version,
                "informationUri": "https://github.com/warden-sandbox/warden",
                "rules": descriptors,
            }},
            "results": results,
        }]
    })
}

/// The category's name as the report writes it.
pub fn category_name(f: &Finding) -> String {
    serde_json::to_value(f.category)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl ScanReport {
    /// SARIF 2.1.0.
    pub fn sarif(&self) -> Value {
        sarif(&self.findings, "package.json", self.warden_version)
    }

    /// The worst finding's severity.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// A summary for the terminal.
    pub fn timeline(&self, colour: bool) -> String {
        let paint = |s: &str, code: &str| {
            if colour {
                format!("\x1b[{code}m{s}\x1b[0m")
            } else {
                s.to_owned()
            }
        };
        let mut out = String::new();
        let count = |eco| {
            self.components
                .iter()
                .filter(|c| c.ecosystem == eco)
                .count()
        };
        let unpinned = self
            .components
            .iter()
            .filter(|c| c.version.is_none())
            .count();
        out.push_str(&format!(
            "warden scan {}\n  {} components ({} PyPI, {} npm; {} direct; {} without an exact version) in {} ms\n",
            clip(&self.target, 200),
            self.components.len(),
            count(crate::Ecosystem::PyPI),
            count(crate::Ecosystem::Npm),
            self.components.iter().filter(|c| c.direct).count(),
            unpinned,
            self.duration_ms,
        ));
        let check = &self.vulnerability_check;
        let status = match check.status {
            "complete" => paint("checked", "32"),
            "unknown" => paint("UNKNOWN: not checked", "33;1"),
            "partial" => paint("partly checked", "33"),
            other => other.to_owned(),
        };
        out.push_str(&format!(
            "  known vulnerabilities: {status} ({} checked, {} unknown; source {})\n",
            check.checked,
            check.unknown,
            clip(&check.source, 200)
        ));
        let reasons: Vec<String> = {
            let mut r: Vec<String> = self
                .components
                .iter()
                .filter_map(|c| match &c.osv {
                    Some(OsvStatus::Unknown { why }) if c.version.is_some() => Some(why.clone()),
                    _ => None,
                })
                .collect();
            r.sort();
            r.dedup();
            r
        };
        for why in reasons.iter().take(5) {
            out.push_str(&format!("    unknown: {}\n", clip(why, 300)));
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {}\n", clip(n, 400)));
        }
        if self.truncated {
            out.push_str("  the walk stopped at its file limit: the inventory may be incomplete\n");
        }
        for u in &self.unreadable {
            out.push_str(&format!(
                "  unreadable: {} ({})\n",
                clip(&u.file, 200),
                clip(&u.why, 200)
            ));
        }
        if !self.sinks.is_empty() {
            out.push_str(
                "  sinks by tool (static: what a tool may reach; the detonation proves it):\n",
            );
            let mut tools: Vec<&str> = self.sinks.iter().map(|s| s.tool.as_str()).collect();
            tools.sort_unstable();
            tools.dedup();
            for tool in tools {
                out.push_str(&format!("    {}\n", clip(tool, 120)));
                for s in self.sinks.iter().filter(|s| s.tool == tool) {
                    out.push_str(&format!(
                        "      {:<12} {}:{} {}\n",
                        s.family.name(),
                        clip(&s.file, 200),
                        s.line,
                        clip(&s.call, 100)
                    ));
                }
            }
        }
        if self.findings.is_empty() {
            out.push_str("  no findings\n");
        }
        for f in &self.findings {
            let sev = format!("{:<8}", crate::report::severity_name(f.severity));
            let code = match f.severity {
                Severity::Critical | Severity::High => "31;1",
                Severity::Medium => "33",
                _ => "2",
            };
            let at = f
                .location
                .as_ref()
                .map(|l| format!(" [{}]", clip(&l.file, 120)))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {} {:<24} {}{at}\n",
                paint(&sev, code),
                clip(&f.rule, 40),
                clip(&f.message, 400)
            ));
        }
        out
    }
}

/// `HIGH`, `MEDIUM`…
pub fn severity_name(s: Severity) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_ascii_uppercase))
        .unwrap_or_default()
}

/// JSON text for a terminal: the characters [`unsafe_on_a_terminal`] written as `\uXXXX`
/// escapes (they only occur inside strings, where the escape means the same).
pub fn json_for_a_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if unsafe_on_a_terminal(c) && c != '\n' {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}
