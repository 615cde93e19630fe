//! `ffuf_discover`: content discovery with ffuf 1.1.0 (Debian's) on one URL of an allowed
//! target, words from a closed list of aliases, results read from ffuf's JSON file. That
//! version has no `-json`, `-noninteractive` or `-rate`: `-s -of json -o FILE` gives the
//! report, and a rate is kept with threads and a per-thread delay (`-t`, `-p`).

use serde::Deserialize;
use serde_json::{Value, json};

use super::target::Allowed;
use super::toolbox::{Program, Toolbox, WORDLIST_MOUNT};
use super::{Job, OUT_MOUNT, url_property};
use crate::tools::{ToolError, parse};

/// Status codes a caller may ask to match (ffuf's own default when none are given).
const CODES: &[u16] = &[
    200, 201, 202, 203, 204, 301, 302, 303, 307, 308, 400, 401, 403, 405, 500,
];
/// Requests at once, at most.
const THREADS: u32 = 10;
/// The report's name in the output folder.
const REPORT: &str = "ffuf.json";

pub(super) fn spec(toolbox: &Toolbox) -> (&'static str, String, Value, Value) {
    let aliases: Vec<&str> = toolbox.wordlists.iter().map(|(a, _)| a.as_str()).collect();
    let input = json!({
        "type": "object",
        "properties": {
            "url": url_property("The URL to fuzz, with exactly one FUZZ marker in its path or \
                                 query (`http://192.0.2.10:8080/FUZZ`); its host must be a \
                                 configured target's address."),
            "wordlist": { "enum": aliases, "description": "Which word list to try." },
            "match_codes": { "type": "array", "items": { "enum": CODES }, "minItems": 1,
                             "maxItems": CODES.len(), "uniqueItems": true,
                             "description": "Status codes that count as found (default: ffuf's \
                                             200, 204, 301, 302, 307, 401, 403)." },
            "rate": { "type": "integer", "minimum": 1, "maximum": 1000,
                      "description": "Requests per second, at most (default: as fast as 10 \
                                      requests at once allow)." }
        },
        "required": ["url", "wordlist"]
    });
    let finding = json!({
        "type": "object",
        "properties": {
            "input": { "type": "string" },
            "url": { "type": "string" },
            "status": { "type": "integer" },
            "length": { "type": "integer" },
            "words": { "type": "integer" },
            "lines": { "type": "integer" },
            "redirect": { "type": ["string", "null"] }
        },
        "required": ["input", "url", "status"]
    });
    (
        "Content discovery (ffuf)",
        "Try each word of a word list in place of FUZZ in a URL with ffuf and return the \
         responses whose status matches."
            .to_owned(),
        input,
        finding,
    )
}

#[derive(Deserialize)]
struct Args {
    url: String,
    wordlist: String,
    match_codes: Option<Vec<u16>>,
    rate: Option<u32>,
    timeout_s: Option<f64>,
}

/// Threads and the per-thread delay (seconds) that keep to `rate` requests per second.
fn pace(rate: Option<u32>) -> (u32, Option<String>) {
    match rate {
        None => (THREADS, None),
        Some(r) => {
            let threads = r.clamp(1, THREADS);
            (
                threads,
                Some(format!("{:.3}", f64::from(threads) / f64::from(r))),
            )
        }
    }
}

pub(super) fn job(
    args: Value,
    allowed: &Allowed,
    toolbox: &Toolbox,
    program: &Program,
) -> Result<Job, ToolError> {
    let a: Args = parse(args)?;
    let (url, ip) = allowed.url(&a.url, true)?;
    let words = toolbox.wordlist(&a.wordlist).ok_or_else(|| {
        crate::tools::invalid(
            "/wordlist",
            format!("no word list {:?} on this server", a.wordlist),
        )
    })?;
    let (threads, delay) = pace(a.rate);
    let mut argv: Vec<String> = vec![
        program.path.display().to_string(),
        "-s".into(),
        "-u".into(),
        url,
        "-w".into(),
        WORDLIST_MOUNT.into(),
        "-of".into(),
        "json".into(),
        "-o".into(),
        format!("{OUT_MOUNT}/{REPORT}"),
        "-t".into(),
        threads.to_string(),
        "-timeout".into(),
        "10".into(),
    ];
    if let Some(d) = delay {
        argv.extend(["-p".into(), d]);
    }
    if let Some(codes) = a.match_codes {
        let list: Vec<String> = codes.iter().map(u16::to_string).collect();
        argv.extend(["-mc".into(), list.join(",")]);
    }
    Ok(Job {
        tool: "ffuf_discover",
        target: ip.to_string(),
        argv,
        binds: vec![warden_jail::Bind {
            source: words.to_path_buf(),
            target: Some(WORDLIST_MOUNT.into()),
            writable: false,
        }],
        out_file: Some(REPORT),
        timeout_s: a.timeout_s,
        parse: |b| super::plain(parse_report(b)),
    })
}

/// The results of ffuf's JSON report; `None` when it is not one.
pub(super) fn parse_report(bytes: &[u8]) -> Option<Vec<Value>> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let results = v.get("results")?.as_array()?;
    Some(
        results
            .iter()
            .filter_map(|r| {
                let input = r["input"]["FUZZ"].as_str()?;
                let redirect = r["redirectlocation"].as_str().filter(|s| !s.is_empty());
                Some(json!({
                    "input": input,
                    "url": r["url"].as_str().unwrap_or_default(),
                    "status": r["status"].as_u64()?,
                    "length": r["length"].as_u64().unwrap_or(0),
                    "words": r["words"].as_u64().unwrap_or(0),
                    "lines": r["lines"].as_u64().unwrap_or(0),
                    "redirect": redirect,
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
        let report = br#"{"commandline":"ffuf","results":[
            {"input":{"FUZZ":"admin"},"position":1,"status":200,"length":184,"words":25,"lines":9,"redirectlocation":"","url":"http://192.0.2.2:8080/admin"},
            {"input":{"FUZZ":"old"},"status":301,"length":0,"words":1,"lines":1,"redirectlocation":"/new","url":"http://192.0.2.2:8080/old"},
            {"input":{},"status":200}]}"#;
        let f = parse_report(report).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0]["input"], "admin");
        assert_eq!(f[0]["redirect"], Value::Null);
        assert_eq!(f[1]["redirect"], "/new");
        for bad in [&b""[..], b"{", b"[]", b"{\"results\": 3}", b"\xff"] {
            assert!(parse_report(bad).is_none());
        }
    }

    #[test]
    fn a_rate_becomes_threads_and_a_delay() {
        assert_eq!(pace(None), (THREADS, None));
        assert_eq!(pace(Some(1)), (1, Some("1.000".into())));
        assert_eq!(pace(Some(50)), (10, Some("0.200".into())));
    }
}
