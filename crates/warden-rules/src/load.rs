//! Loading rules: the built-in set (embedded in the binary), rule directories, and the
//! validation that turns a bad rule into an error naming the file and line.

use std::path::{Path, PathBuf};

use thiserror::Error;

use warden_events::{Basis, Severity};

use crate::engine::Compiled;
use crate::rule::Rule;

/// A rule that could not be loaded.
#[derive(Debug, Error)]
#[error("{file}:{line}: {message}")]
pub struct RuleError {
    /// The file (or `builtin:<name>`).
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The built-in rules: (file name, YAML).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "prompt-guidance.yaml",
        include_str!("../rules/prompt-guidance.yaml"),
    ),
    (
        "prompt-hidden-content.yaml",
        include_str!("../rules/prompt-hidden-content.yaml"),
    ),
    (
        "credential-exposure-generic.yaml",
        include_str!("../rules/credential-exposure-generic.yaml"),
    ),
    (
        "tool-poisoning-shape.yaml",
        include_str!("../rules/tool-poisoning-shape.yaml"),
    ),
    (
        "rug-pull-shape.yaml",
        include_str!("../rules/rug-pull-shape.yaml"),
    ),
    (
        "rug-pull-listing.yaml",
        include_str!("../rules/rug-pull-listing.yaml"),
    ),
    (
        "command-execution.yaml",
        include_str!("../rules/command-execution.yaml"),
    ),
    (
        "canary-in-workdir.yaml",
        include_str!("../rules/canary-in-workdir.yaml"),
    ),
    (
        "decoy-read-and-exposed.yaml",
        include_str!("../rules/decoy-read-and-exposed.yaml"),
    ),
    (
        "llm-judged-orders.yaml",
        include_str!("../rules/llm-judged-orders.yaml"),
    ),
    (
        "prompt-injection.yaml",
        include_str!("../rules/prompt-injection.yaml"),
    ),
    (
        "prompt-injection-in-prompt.yaml",
        include_str!("../rules/prompt-injection-in-prompt.yaml"),
    ),
    (
        "credential-exposure.yaml",
        include_str!("../rules/credential-exposure.yaml"),
    ),
    (
        "rug-pull-behaviour.yaml",
        include_str!("../rules/rug-pull-behaviour.yaml"),
    ),
    (
        "rug-pull-behaviour-shape.yaml",
        include_str!("../rules/rug-pull-behaviour-shape.yaml"),
    ),
    (
        "exposed-server-wildcard.yaml",
        include_str!("../rules/exposed-server-wildcard.yaml"),
    ),
    (
        "exposed-server-rebinding.yaml",
        include_str!("../rules/exposed-server-rebinding.yaml"),
    ),
    (
        "exposed-server-unauthenticated.yaml",
        include_str!("../rules/exposed-server-unauthenticated.yaml"),
    ),
    ("shell-exec.yaml", include_str!("../rules/shell-exec.yaml")),
    (
        "tool-instructions.yaml",
        include_str!("../rules/tool-instructions.yaml"),
    ),
    (
        "persistence-write.yaml",
        include_str!("../rules/persistence-write.yaml"),
    ),
    (
        "persistence-rename.yaml",
        include_str!("../rules/persistence-rename.yaml"),
    ),
    ("path-reach.yaml", include_str!("../rules/path-reach.yaml")),
    (
        "home-folder-made.yaml",
        include_str!("../rules/home-folder-made.yaml"),
    ),
    (
        "user-data-to-account.yaml",
        include_str!("../rules/user-data-to-account.yaml"),
    ),
    (
        "home-data-write.yaml",
        include_str!("../rules/home-data-write.yaml"),
    ),
    (
        "config-read.yaml",
        include_str!("../rules/config-read.yaml"),
    ),
    (
        "config-read-own-folder.yaml",
        include_str!("../rules/config-read-own-folder.yaml"),
    ),
    (
        "long-description.yaml",
        include_str!("../rules/long-description.yaml"),
    ),
    (
        "fileless-exec.yaml",
        include_str!("../rules/fileless-exec.yaml"),
    ),
    (
        "startup-shell.yaml",
        include_str!("../rules/startup-shell.yaml"),
    ),
    (
        "evidence-dropped.yaml",
        include_str!("../rules/evidence-dropped.yaml"),
    ),
    (
        "process-spawn.yaml",
        include_str!("../rules/process-spawn.yaml"),
    ),
    (
        "sensitive-file-read.yaml",
        include_str!("../rules/sensitive-file-read.yaml"),
    ),
    (
        "environ-read.yaml",
        include_str!("../rules/environ-read.yaml"),
    ),
    (
        "decoy-linked.yaml",
        include_str!("../rules/decoy-linked.yaml"),
    ),
    (
        "credential-sent-to-its-service.yaml",
        include_str!("../rules/credential-sent-to-its-service.yaml"),
    ),
    (
        "capture-dropped.yaml",
        include_str!("../rules/capture-dropped.yaml"),
    ),
    (
        "credential-access.yaml",
        include_str!("../rules/credential-access.yaml"),
    ),
    (
        "outbound-network.yaml",
        include_str!("../rules/outbound-network.yaml"),
    ),
    (
        "suspicious-dns.yaml",
        include_str!("../rules/suspicious-dns.yaml"),
    ),
    (
        "canary-leaving.yaml",
        include_str!("../rules/canary-leaving.yaml"),
    ),
    (
        "canary-in-output.yaml",
        include_str!("../rules/canary-in-output.yaml"),
    ),
    (
        "canary-in-file.yaml",
        include_str!("../rules/canary-in-file.yaml"),
    ),
    (
        "write-outside-workdir.yaml",
        include_str!("../rules/write-outside-workdir.yaml"),
    ),
    (
        "install-writes-outside.yaml",
        include_str!("../rules/install-writes-outside.yaml"),
    ),
    (
        "rename-outside-workdir.yaml",
        include_str!("../rules/rename-outside-workdir.yaml"),
    ),
    (
        "destructive-tool.yaml",
        include_str!("../rules/destructive-tool.yaml"),
    ),
    (
        "mutating-tool.yaml",
        include_str!("../rules/mutating-tool.yaml"),
    ),
    (
        "tool-poisoning.yaml",
        include_str!("../rules/tool-poisoning.yaml"),
    ),
    ("rug-pull.yaml", include_str!("../rules/rug-pull.yaml")),
    (
        "command-injection.yaml",
        include_str!("../rules/command-injection.yaml"),
    ),
    (
        "sql-injection.yaml",
        include_str!("../rules/sql-injection.yaml"),
    ),
    (
        "code-injection.yaml",
        include_str!("../rules/code-injection.yaml"),
    ),
    (
        "agent-config-write.yaml",
        include_str!("../rules/agent-config-write.yaml"),
    ),
    (
        "sink-confirmed.yaml",
        include_str!("../rules/sink-confirmed.yaml"),
    ),
    (
        "template-injection.yaml",
        include_str!("../rules/template-injection.yaml"),
    ),
    (
        "cloud-metadata.yaml",
        include_str!("../rules/cloud-metadata.yaml"),
    ),
    (
        "network-scan.yaml",
        include_str!("../rules/network-scan.yaml"),
    ),
    (
        "user-data-undisclosed.yaml",
        include_str!("../rules/user-data-undisclosed.yaml"),
    ),
    (
        "user-data-disclosed.yaml",
        include_str!("../rules/user-data-disclosed.yaml"),
    ),
    (
        "user-data-kept.yaml",
        include_str!("../rules/user-data-kept.yaml"),
    ),
    (
        "loopback-probe.yaml",
        include_str!("../rules/loopback-probe.yaml"),
    ),
    (
        "path-traversal.yaml",
        include_str!("../rules/path-traversal.yaml"),
    ),
    ("ssrf.yaml", include_str!("../rules/ssrf.yaml")),
    (
        "resource-exhaustion.yaml",
        include_str!("../rules/resource-exhaustion.yaml"),
    ),
    (
        "resource-heavy-input.yaml",
        include_str!("../rules/resource-heavy-input.yaml"),
    ),
    ("cpu-burn.yaml", include_str!("../rules/cpu-burn.yaml")),
    (
        "resource-abuse.yaml",
        include_str!("../rules/resource-abuse.yaml"),
    ),
    (
        "delayed-init.yaml",
        include_str!("../rules/delayed-init.yaml"),
    ),
    ("slow-tool.yaml", include_str!("../rules/slow-tool.yaml")),
    (
        "install-script.yaml",
        include_str!("../rules/install-script.yaml"),
    ),
    (
        "sandbox-violation.yaml",
        include_str!("../rules/sandbox-violation.yaml"),
    ),
];

/// The first line of `text` containing `needle` (1-based), or 0.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map_or(0, |i| i + 1)
}

/// Parse and validate one rule file.
pub fn parse(file: &str, text: &str) -> Result<Compiled, RuleError> {
    let rule: Rule = serde_norway::from_str(text).map_err(|e| RuleError {
        file: file.to_owned(),
        line: e.location().map_or(0, |l| l.line()),
        message: e.to_string(),
    })?;
    let err = |needle: &str, message: String| RuleError {
        file: file.to_owned(),
        line: line_of(text, needle),
        message,
    };
    let id_ok = !rule.id.is_empty()
        && rule.id.len() <= 64
        && rule
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !id_ok {
        return Err(err(
            "id:",
            format!(
                "rule id {:?}: use lower-case letters, digits and dashes",
                rule.id
            ),
        ));
    }
    if rule.matcher.kinds.is_empty() {
        return Err(err(
            "kinds",
            "match.kinds must name at least one event kind".into(),
        ));
    }
    if rule.threshold == 0 {
        return Err(err("threshold", "threshold must be at least 1".into()));
    }
    if rule.basis == Basis::Shape && rule.severity > Severity::Medium {
        return Err(err(
            "severity:",
            format!(
                "a shape rule is at most medium (this one says {}): high and critical need a \
                 consequence (basis: consequence) with its evidence",
                serde_json::to_value(rule.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
        ));
    }
    if rule.basis == Basis::Shape && rule.falsepositives.is_empty() {
        return Err(err(
            "basis:",
            "a shape rule lists its falsepositives: the honest software that shows the same".into(),
        ));
    }
    let mut paths: Vec<&String> = rule.matcher.conditions.keys().collect();
    if let Some(c) = &rule.correlate {
        if c.all.is_empty() {
            return Err(err(
                "correlate",
                "correlate.all names at least one part".into(),
            ));
        }
        paths.push(&c.key);
        for part in &c.all {
            if part.kinds.is_empty() {
                return Err(err(
                    "kinds",
                    "every correlate part names at least one event kind".into(),
                ));
            }
            paths.push(&part.key);
            paths.extend(part.conditions.keys());
        }
    }
    for path in paths {
        if !field_path_ok(path) {
            return Err(err(
                path,
                format!(
                    "{path:?}: a condition or key names kind, pid, triggered_by, id, t_ms or data.<field>"
                ),
            ));
        }
    }
    Compiled::new(rule).map_err(|(needle, message)| err(&needle, message))
}

/// Whether `path` names a field rules may read.
fn field_path_ok(path: &str) -> bool {
    matches!(path, "kind" | "pid" | "triggered_by" | "id" | "t_ms")
        || path
            .strip_prefix("data.")
            .is_some_and(|rest| !rest.is_empty())
}

/// The built-in rules, compiled.
pub fn builtin() -> Result<Vec<Compiled>, RuleError> {
    BUILTIN
        .iter()
        .map(|(name, text)| parse(&format!("builtin:{name}"), text))
        .collect()
}

/// Every `*.yaml`/`*.yml` file of `dir`, compiled, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Compiled>, RuleError> {
    let io = |e: std::io::Error, p: &Path| RuleError {
        file: p.display().to_string(),
        line: 0,
        message: e.to_string(),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(e, dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| io(e, p))?;
            parse(&p.display().to_string(), &text)
        })
        .collect()
}

/// The built-in rules overridden (by id) and extended by the rules of `dirs`; disabled rules
/// are dropped.
pub fn ruleset(dirs: &[PathBuf]) -> Result<Vec<Compiled>, RuleError> {
    let mut rules = builtin()?;
    for d in dirs {
        for r in load_dir(d)? {
            match rules.iter_mut().find(|b| b.rule.id == r.rule.id) {
                Some(slot) => *slot = r,
                None => rules.push(r),
            }
        }
    }
    rules.retain(|r| !r.rule.disabled);
    Ok(rules)
}
