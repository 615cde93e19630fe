//! Python manifests: `setup.py` (code that runs at build and install), the build backend
//! (`[build-system]`), entry points and console scripts, and requirements that come from git,
//! URLs or local paths instead of the index.
//!
//! Only the project's own files are read: an installed distribution has already been built.

use std::path::Path;

use warden_events::{Category, Finding, Severity};

use super::{finding, installed};

const STANDARD_BACKENDS: [&str; 6] = [
    "setuptools.build_meta",
    "hatchling.build",
    "poetry.core.masonry.api",
    "flit_core.buildapi",
    "pdm.backend",
    "uv_build",
];

/// What `pyproject.toml`, `setup.cfg` or `setup.py` asks for.
pub fn manifest(rel: &str, path: &Path) -> Vec<Finding> {
    if installed(rel) {
        return Vec::new();
    }
    if rel.ends_with("setup.py") {
        return vec![finding(
            Category::InstallScript,
            "setup-py",
            Severity::Low,
            rel,
            "setup.py runs arbitrary code when the package is built or installed from source"
                .into(),
            "Read setup.py, or install only from wheels (pip --only-binary=:all:) and detonate the package to see what the build does.",
        )];
    }
    let Ok(text) = crate::inventory::text(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if rel.ends_with("setup.cfg") {
        if text.contains("[options.entry_points]") {
            out.push(entry_points(rel, "setup.cfg [options.entry_points]".into()));
        }
        return out;
    }
    let Ok(doc) = toml::from_str::<toml::Table>(&text) else {
        return out;
    };
    let backend = doc
        .get("build-system")
        .and_then(|b| b.get("build-backend"))
        .and_then(toml::Value::as_str);
    if let Some(b) = backend {
        let standard = STANDARD_BACKENDS.iter().any(|s| b.starts_with(s));
        let in_tree = doc
            .get("build-system")
            .and_then(|b| b.get("backend-path"))
            .is_some();
        out.push(finding(
            Category::ManifestCapability,
            "build-backend",
            if standard && !in_tree { Severity::Info } else { Severity::Low },
            rel,
            format!(
                "builds with {}{}",
                crate::report::clip(b, 100),
                if in_tree { " from the project's own tree (backend-path)" } else { "" }
            ),
            "A build backend runs when the package is built from source; a custom or in-tree one is code to review.",
        ));
    }
    let project = doc.get("project");
    let mut points = Vec::new();
    for key in ["scripts", "gui-scripts"] {
        if let Some(t) = project
            .and_then(|p| p.get(key))
            .and_then(toml::Value::as_table)
        {
            points.extend(t.keys().cloned());
        }
    }
    if let Some(groups) = project
        .and_then(|p| p.get("entry-points"))
        .and_then(toml::Value::as_table)
    {
        points.extend(groups.keys().map(|g| format!("[{g}]")));
    }
    if let Some(t) = doc
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("scripts"))
        .and_then(toml::Value::as_table)
    {
        points.extend(t.keys().cloned());
    }
    if !points.is_empty() {
        out.push(entry_points(
            rel,
            crate::report::clip(&points.join(", "), 200),
        ));
    }
    out
}

fn entry_points(rel: &str, what: String) -> Finding {
    finding(
        Category::ManifestCapability,
        "entry-points",
        Severity::Info,
        rel,
        format!("declares entry points (programs and plugins): {what}"),
        "Console scripts land on PATH and plugin entry points are loaded by other programs; check their names.",
    )
}

/// Requirements from git, URLs or paths.
pub fn requirements(rel: &str, path: &Path) -> Vec<Finding> {
    if installed(rel) {
        return Vec::new();
    }
    let Ok(text) = crate::inventory::text(path) else {
        return Vec::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let bare = l.trim_start_matches("-e ").trim_start_matches("--editable ").trim();
            let kind = if bare.starts_with("git+") || bare.contains(" @ git+") {
                "git"
            } else if bare.starts_with("http://") || bare.starts_with("https://") || bare.contains(" @ http") {
                "URL"
            } else if l.starts_with("-e ") || l.starts_with("--editable ") || bare.starts_with("./") || bare.starts_with("file:") {
                "local path"
            } else {
                return None;
            };
            Some(finding(
                Category::ManifestCapability,
                "non-registry-dependency",
                Severity::Low,
                rel,
                format!("a requirement from a {kind}: {}", crate::report::clip(bare, 200)),
                "A dependency from git, a URL or a path bypasses the index and its advisories; pin it to an index release.",
            ))
        })
        .collect()
}
