//! Source hints: which of the project's own source files use process, network or dynamic-code
//! modules. Low-severity context for the reader of the report (nearly every MCP server does
//! one of these), never a verdict on their own: the detonation shows what the code really does.
//!
//! Bounded: [`MAX_SOURCES`] files of at most [`MAX_SOURCE`] bytes, installed trees
//! (`node_modules`, venvs, `site-packages`) and `.git` skipped, links never followed.

use std::collections::BTreeMap;
use std::path::Path;

use warden_events::{Category, Finding, Severity};

use super::finding;

/// Most source files read.
pub const MAX_SOURCES: usize = 5_000;

/// Largest source file read.
pub const MAX_SOURCE: u64 = 1 << 20;

/// (rule, what it means, Python markers, JavaScript markers).
const HINTS: [(&str, &str, &[&str], &[&str]); 3] = [
    (
        "source-starts-processes",
        "starts processes",
        &[
            "import subprocess",
            "from subprocess",
            "os.system(",
            "os.popen(",
            "pty.spawn(",
            "os.exec",
        ],
        &["child_process"],
    ),
    (
        "source-uses-network",
        "opens network connections",
        &[
            "import socket",
            "from socket",
            "import requests",
            "import httpx",
            "urllib.request",
            "import aiohttp",
            "http.client",
        ],
        &[
            "'net'",
            "\"net\"",
            "node:net",
            "'http'",
            "\"http\"",
            "'https'",
            "\"https\"",
            "node:http",
            "'dgram'",
            "node:dgram",
            "fetch(",
            "axios",
        ],
    ),
    (
        "source-evaluates-code",
        "evaluates code built at run time",
        &[
            "eval(",
            "exec(",
            "__import__(",
            "pickle.loads",
            "marshal.loads",
        ],
        &["eval(", "new Function(", "vm.runIn"],
    ),
];

/// Most directory entries visited.
pub const MAX_ENTRIES: usize = 500_000;

/// The hints for the project's source under `root`, and whether the walk stopped at a limit.
pub fn hints(root: &Path) -> (Vec<Finding>, bool) {
    let mut files: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let capped = walk(root, &mut |rel, python, text| {
        for (rule, _, py, jsm) in HINTS {
            let markers = if python { py } else { jsm };
            if markers.iter().any(|m| text.contains(m)) {
                files.entry(rule).or_default().push(rel.to_owned());
            }
        }
    });
    (findings(files), capped)
}

/// Hand each of the project's own Python and JavaScript/TypeScript source files under `root`
/// to `each` (its path relative to `root`, whether it is Python, its text), within the bounds
/// above; whether the walk stopped at a limit.
pub(crate) fn walk(root: &Path, each: &mut dyn FnMut(&str, bool, &str)) -> bool {
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut read = 0usize;
    let mut visited = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        // A venv below the root is installed code (never a link's target: no stat through it).
        if depth > 0 && std::fs::symlink_metadata(dir.join("pyvenv.cfg")).is_ok_and(|m| m.is_file())
        {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            visited += 1;
            if visited > MAX_ENTRIES {
                return true;
            }
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if kind.is_dir() {
                let skip = matches!(
                    name.as_str(),
                    ".git"
                        | "node_modules"
                        | "site-packages"
                        | "dist-packages"
                        | ".fetch"
                        | "__pycache__"
                );
                if !skip && depth < 20 {
                    stack.push((e.path(), depth + 1));
                }
                continue;
            }
            let python = name.ends_with(".py");
            let js = [".js", ".mjs", ".cjs", ".ts", ".mts"]
                .iter()
                .any(|x| name.ends_with(x));
            if !kind.is_file() || !(python || js) {
                continue;
            }
            read += 1;
            if read > MAX_SOURCES {
                return true;
            }
            let Some(bytes) = crate::read_bounded(&e.path(), MAX_SOURCE) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let rel = e
                .path()
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or(name.clone());
            each(&rel, python, &text);
        }
    }
    false
}

fn findings(files: BTreeMap<&str, Vec<String>>) -> Vec<Finding> {
    HINTS
        .iter()
        .filter_map(|(rule, what, _, _)| {
            let mut list = files.get(rule)?.clone();
            list.sort();
            let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
            let more = list.len().saturating_sub(shown.len());
            Some(finding(
                Category::ManifestCapability,
                rule,
                Severity::Info,
                &list[0],
                format!(
                    "the source {what}: {}{}",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
                "Context for review: the detonation shows whether and when the code does this.",
            ))
        })
        .collect()
}
