//! The static phase, after the install: `warden-scan` reads the server's source and what its
//! install left (a venv, `node_modules`, wheels) — never running anything — for the component
//! inventory, known vulnerabilities and manifest capabilities.
//!
//! Its `vulnerable_dependency` findings join the detonation's findings (and its score); the
//! rest (capabilities, typosquat hints) is context in the report's `scan` section, because the
//! detonation itself shows what the package does. Vulnerabilities are checked only against a
//! source the operator named (`--osv-db`, `--osv-url`, `WARDEN_OSV_DB`): a detonation asks no
//! third party about the package unless told to, and says *unknown* otherwise.
//!
//! A server that is one file outside any project (no manifest or venv above it) is read
//! alone: a copy of that file in a folder of its own, so a script in `~/Downloads` is never
//! blamed for what its neighbours contain.

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

/// A lone file copied at most this big (a script; anything larger is read by name only).
const MAX_LONE_FILE: u64 = 16 << 20;

/// A folder holding a copy of `file` alone, named as the file is.
fn alone(file: &std::path::Path) -> Option<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("warden-lone-")
        .tempdir()
        .ok()?;
    let bytes = warden_scan::read_file(file, MAX_LONE_FILE)?;
    std::fs::write(dir.path().join(file.file_name()?), bytes).ok()?;
    Some(dir)
}

/// Scan the target's source and installed tree.
pub fn scan(options: &Options, source: &Source) -> Option<Scanned> {
    let mut _lone = None;
    let path = match source {
        Source::Fetched(f) => f.workspace.path().to_path_buf(),
        Source::Local(r) => match &r.lone_file {
            Some(file) => {
                let dir = alone(file)?;
                let path = dir.path().to_path_buf();
                _lone = Some(dir);
                path
            }
            None => r.source.clone()?,
        },
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
