//! `nuclei_scan`: template scanning with nuclei, offered only when the operator installed a
//! `nuclei` binary and its templates (no package here ships either). Tags come from a closed
//! list, and templates tagged intrusive, dos or fuzz are excluded (`cve` templates still send
//! the probes that detect each flaw: aim it only at what you may test); interactsh
//! (out-of-band callbacks to a public server) and update checks are off; results are nuclei's
//! JSON lines on stdout. A URL with a comma is refused: nuclei would read it as two targets.

use serde::Deserialize;
use serde_json::{Value, json};

use super::target::Allowed;
use super::toolbox::{Program, TEMPLATES_MOUNT, Toolbox};
use super::{Job, url_property};
use crate::tools::{ToolError, parse};

/// Template tags a caller may choose.
pub const TAGS: &[&str] = &[
    "cve",
    "exposure",
    "misconfig",
    "tech",
    "panel",
    "config",
    "files",
    "disclosure",
    "token",
];
/// Values of one extracted list kept, at most.
const MAX_EXTRACTED: usize = 32;

pub(super) fn spec() -> (&'static str, String, Value, Value) {
    let input = json!({
        "type": "object",
        "properties": {
            "url": url_property("The base URL to scan; its host must be a configured target's \
                                 address."),
            "tags": { "type": "array", "items": { "enum": TAGS }, "minItems": 1,
                      "maxItems": TAGS.len(), "uniqueItems": true,
                      "description": "Template tags to run." }
        },
        "required": ["url", "tags"]
    });
    let finding = json!({
        "type": "object",
        "properties": {
            "template_id": { "type": "string" },
            "name": { "type": ["string", "null"] },
            "severity": { "type": ["string", "null"] },
            "matched_at": { "type": ["string", "null"] },
            "extracted": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["template_id", "extracted"]
    });
    (
        "Template scan (nuclei)",
        "Run nuclei's templates of the chosen tags against a URL and return what matched."
            .to_owned(),
        input,
        finding,
    )
}

#[derive(Deserialize)]
struct Args {
    url: String,
    tags: Vec<String>,
    timeout_s: Option<f64>,
}

pub(super) fn job(
    args: Value,
    allowed: &Allowed,
    toolbox: &Toolbox,
    program: &Program,
) -> Result<Job, ToolError> {
    let a: Args = parse(args)?;
    let (url, ip) = allowed.url(&a.url, false)?;
    // nuclei splits `-u` at commas: a second URL would escape the check above.
    if url.contains(',') {
        return Err(crate::tools::invalid(
            "/url",
            "nuclei takes a comma as a list of targets: write it %2C",
        ));
    }
    let templates = toolbox
        .templates
        .clone()
        .ok_or_else(|| ToolError::Unavailable("no nuclei templates".into()))?;
    let tags: Vec<&str> = TAGS
        .iter()
        .copied()
        .filter(|t| a.tags.iter().any(|x| x == t))
        .collect();
    let argv: Vec<String> = [
        program.path.display().to_string(),
        "-u".into(),
        url,
        "-t".into(),
        TEMPLATES_MOUNT.into(),
        "-tags".into(),
        tags.join(","),
        "-etags".into(),
        "intrusive,dos,fuzz".into(),
        "-jsonl".into(),
        "-silent".into(),
        "-no-color".into(),
        "-disable-update-check".into(),
        "-no-interactsh".into(),
        "-timeout".into(),
        "10".into(),
        "-rate-limit".into(),
        "50".into(),
    ]
    .into();
    Ok(Job {
        tool: "nuclei_scan",
        target: ip.to_string(),
        argv,
        binds: vec![warden_jail::Bind {
            source: templates,
            target: Some(TEMPLATES_MOUNT.into()),
            writable: false,
        }],
        out_file: None,
        timeout_s: a.timeout_s,
        parse: |b| super::plain(parse_jsonl(b)),
    })
}

/// nuclei's JSON lines, one finding per line that is one; `None` when output was there but
/// no line was a finding.
pub(super) fn parse_jsonl(bytes: &[u8]) -> Option<Vec<Value>> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut other = 0usize;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            other += 1;
            continue;
        };
        let Some(id) = v["template-id"].as_str() else {
            other += 1;
            continue;
        };
        let extracted: Vec<&str> = v["extracted-results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .take(MAX_EXTRACTED)
            .collect();
        out.push(json!({
            "template_id": id,
            "name": v["info"]["name"].as_str(),
            "severity": v["info"]["severity"].as_str(),
            "matched_at": v["matched-at"].as_str(),
            "extracted": extracted,
        }));
    }
    (out.is_empty() && other > 0)
        .then_some(())
        .map_or(Some(out), |()| None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as nuclei v3 writes them (`-jsonl`), shortened.
    const RECORDED: &str = r#"{"template":"http/exposures/configs/git-config.yaml","template-id":"git-config","template-path":"/t/http/exposures/configs/git-config.yaml","info":{"name":"Git Configuration - Detect","author":["pdteam"],"tags":["config","git","exposure"],"severity":"medium"},"type":"http","host":"192.0.2.2:8080","matched-at":"http://192.0.2.2:8080/.git/config","extracted-results":["[core]"],"ip":"192.0.2.2","timestamp":"2026-11-25T10:00:00Z","matcher-status":true}
{"template-id":"tech-detect","info":{"name":"Wappalyzer Technology Detection","severity":"info"},"matcher-name":"python","matched-at":"http://192.0.2.2:8080/"}
"#;

    #[test]
    fn recorded_lines_are_parsed() {
        let f = parse_jsonl(RECORDED.as_bytes()).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0]["template_id"], "git-config");
        assert_eq!(f[0]["severity"], "medium");
        assert_eq!(f[0]["matched_at"], "http://192.0.2.2:8080/.git/config");
        assert_eq!(f[0]["extracted"], json!(["[core]"]));
        assert_eq!(f[1]["extracted"], json!([]));
    }

    #[test]
    fn malformed_lines_are_skipped_and_nothing_but_them_is_no_result() {
        let mixed = format!("not json\n{RECORDED}{{\"no\": \"id\"}}\n");
        assert_eq!(parse_jsonl(mixed.as_bytes()).unwrap().len(), 2);
        assert_eq!(parse_jsonl(b"").unwrap().len(), 0, "nothing found");
        assert!(parse_jsonl(b"[ERR] could not run\n").is_none());
        assert!(parse_jsonl(b"\xff\xfe{").is_none());
    }
}
