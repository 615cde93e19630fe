//! Manifest capabilities: what a package asks for before it runs — install hooks ([`npm`]'s
//! lifecycle scripts, [`python`]'s `setup.py` and build backends), native code, programs put
//! on `PATH`, entry points, dependencies from git or URLs, bundled dependencies — and, as
//! low-severity context, which process, network, filesystem and `eval` modules its own source
//! uses ([`source`]).
//!
//! These are static findings: what the package *may* do. The detonation shows what it does.
//! Each finding names the file it was read from.

pub mod npm;
pub mod python;
pub mod source;

use warden_events::{Category, Finding, Location, Severity};

use crate::inventory::Files;

/// A static finding about `file`.
pub(crate) fn finding(
    category: Category,
    rule: &str,
    severity: Severity,
    file: &str,
    message: String,
    recommendation: &str,
) -> Finding {
    Finding {
        category,
        rule: rule.to_owned(),
        severity,
        message,
        recommendation: recommendation.to_owned(),
        tool: None,
        tools: Vec::new(),
        evidence: Vec::new(),
        llm_only: false,
        basis: None,
        capped: None,
        location: Some(Location {
            file: file.to_owned(),
            component: None,
        }),
    }
}

/// Whether `rel` is inside an installed tree (a dependency, not the project's own file).
pub(crate) fn installed(rel: &str) -> bool {
    rel.split('/')
        .any(|p| matches!(p, "node_modules" | "site-packages" | "dist-packages"))
}

/// Every capability the files show.
pub fn capabilities(files: &Files) -> Vec<Finding> {
    let mut out = Vec::new();
    for (rel, path) in &files.known {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        match name.as_ref() {
            "package.json" => out.extend(npm::manifest(rel, path)),
            "binding.gyp" => out.push(npm::gyp(rel)),
            n if n.ends_with(".node") => out.push(npm::prebuilt(rel)),
            "pyproject.toml" | "setup.cfg" | "setup.py" => out.extend(python::manifest(rel, path)),
            n if n.starts_with("requirements") => out.extend(python::requirements(rel, path)),
            _ => {}
        }
    }
    collapse_prebuilt(&mut out);
    out
}

/// Prebuilt `.node` files: one finding per package folder, not one per file.
fn collapse_prebuilt(out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|f| {
        if f.rule != "native-prebuilt" {
            return true;
        }
        let file = f.location.as_ref().map(|l| l.file.as_str()).unwrap_or("");
        let package = match file.rfind("node_modules/") {
            Some(i) => {
                let rest = &file[i + "node_modules/".len()..];
                let n = if rest.starts_with('@') { 2 } else { 1 };
                rest.split('/').take(n).collect::<Vec<_>>().join("/")
            }
            None => String::new(),
        };
        seen.insert(package)
    });
}
