//! The static phase, after the install: `warden-scan` reads the server's source and what its
//! install left (a venv, `node_modules`, wheels) — never running anything — for the component
//! inventory, known vulnerabilities and manifest capabilities.
//!
//! Its `vulnerable_dependency` findings join the detonation's findings (and its score); the
//! rest (capabilities, typosquat hints) is context in the report's `scan` section, because the
//! detonation itself shows what the package does. Vulnerabilities are checked only against a
//! source the operator named (`--osv-db`, `--osv-url`, `WARDEN_OSV_DB`): a detonation asks no
//! third party about the package unless told to, and says *unknown* otherwise.

use serde_json::{Value, json};
use warden_events::{Category, Finding};
use warden_scan::{Root, ScanReport};

use super::source::Source;
use crate::Options;

/// What the static phase found.
#[derive(Debug)]
pub struct Scanned {
    /// The scan's report.
    pub report: ScanReport,
}

/// Scan the target's source and installed tree.
pub fn scan(options: &Options, source: &Source) -> Option<Scanned> {
    let path = match source {
        Source::Fetched(f) => f.workspace.path().to_path_buf(),
        Source::Local(r) => r.source.clone()?,
    };
    super::progress(options, "reading its components (static scan)");
    let roots = [Root {
        path,
        label: String::new(),
    }];
    let target = options
        .target
        .clone()
        .unwrap_or_else(|| options.command.join(" "));
    Some(Scanned {
        report: warden_scan::scan(&target, &roots, &options.osv),
    })
}

impl Scanned {
    /// The findings that join the detonation's: known vulnerabilities.
    pub fn findings(&self) -> Vec<Finding> {
        self.report
            .findings
            .iter()
            .filter(|f| f.category == Category::VulnerableDependency)
            .cloned()
            .collect()
    }

    /// The report's `scan` section.
    pub fn summary(&self) -> Value {
        let r = &self.report;
        json!({
            "components": r.components.len(),
            "direct": r.components.iter().filter(|c| c.direct).count(),
            "unpinned": r.components.iter().filter(|c| c.version.is_none()).count(),
            "vulnerability_check": r.vulnerability_check,
            "vulnerabilities": r.vulnerabilities,
            "context": r.findings.iter().filter(|f| f.category != Category::VulnerableDependency).take(50).collect::<Vec<_>>(),
            "unreadable": r.unreadable,
            "truncated": r.truncated,
            "duration_ms": r.duration_ms,
        })
    }
}
