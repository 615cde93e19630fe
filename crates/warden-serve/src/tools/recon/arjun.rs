//! `arjun_params`: hidden HTTP parameter discovery with arjun (2.2.7 from PyPI, in a venv of
//! Warden's own) on one URL of an allowed target, with arjun's bundled parameter list; results
//! read from its JSON file. Redirects are not followed (they could only lead off the list).

use serde::Deserialize;
use serde_json::{Value, json};

use super::target::Allowed;
use super::toolbox::Program;
use super::{Job, OUT_MOUNT, url_property};
use crate::tools::{ToolError, parse};

/// The report's name in the output folder.
const REPORT: &str = "arjun.json";

pub(super) fn spec() -> (&'static str, String, Value, Value) {
    let input = json!({
        "type": "object",
        "properties": {
            "url": url_property("The endpoint to probe (`http://192.0.2.10:8080/search`); its \
                                 host must be a configured target's address."),
            "method": { "enum": ["GET", "POST"], "default": "GET" }
        },
        "required": ["url"]
    });
    let finding = json!({
        "type": "object",
        "properties": {
            "url": { "type": "string" },
            "method": { "type": "string" },
            "params": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["url", "method", "params"]
    });
    (
        "Parameter discovery (arjun)",
        "Find the query or form parameters an HTTP endpoint accepts with arjun's bundled \
         parameter list."
            .to_owned(),
        input,
        finding,
    )
}

#[derive(Deserialize)]
struct Args {
    url: String,
    method: Option<String>,
    timeout_s: Option<f64>,
}

pub(super) fn job(args: Value, allowed: &Allowed, program: &Program) -> Result<Job, ToolError> {
    let a: Args = parse(args)?;
    let (url, ip) = allowed.url(&a.url, false)?;
    let method = match a.method.as_deref() {
        Some("POST") => "POST",
        _ => "GET",
    };
    let argv = vec![
        program.path.display().to_string(),
        "-u".into(),
        url,
        "-m".into(),
        method.into(),
        "-oJ".into(),
        format!("{OUT_MOUNT}/{REPORT}"),
        "-q".into(),
        "-T".into(),
        "10".into(),
        "-t".into(),
        "5".into(),
        "--disable-redirects".into(),
    ];
    Ok(Job {
        tool: "arjun_params",
        target: ip.to_string(),
        argv,
        binds: Vec::new(),
        out_file: Some(REPORT),
        timeout_s: a.timeout_s,
        parse: |b| super::plain(parse_report(b)),
    })
}

/// The endpoints of arjun's JSON report (`{url: {method, params, headers}}`); `None` when it
/// is not one. No report at all (arjun writes none when it finds nothing) is no findings.
pub(super) fn parse_report(bytes: &[u8]) -> Option<Vec<Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Some(Vec::new());
    }
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let map = v.as_object()?;
    Some(
        map.iter()
            .filter_map(|(url, e)| {
                let params: Vec<&str> = e["params"]
                    .as_array()?
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                Some(json!({
                    "url": url,
                    "method": e["method"].as_str().unwrap_or("GET"),
                    "params": params,
                }))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_is_read_defensively() {
        let report = br#"{"http://192.0.2.2:8080/search": {"headers": {}, "method": "GET", "params": ["debug", "q", 7]}}"#;
        let f = parse_report(report).unwrap();
        assert_eq!(f[0]["params"], json!(["debug", "q"]));
        assert_eq!(f[0]["method"], "GET");
        assert_eq!(parse_report(b"").unwrap().len(), 0);
        assert_eq!(parse_report(b"{\"u\": {\"params\": 1}}").unwrap().len(), 0);
        for bad in [&b"{"[..], b"[1]", b"\xff"] {
            assert!(parse_report(bad).is_none());
        }
    }
}
