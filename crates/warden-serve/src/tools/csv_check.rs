//! `validate_csv`: a CSV file of the workspace (or inline text) against required headers and
//! per-column rules — type (int, float, bool, date, datetime, email, url, regex, enum) and
//! nullability — with row-level errors (row and column) and a summary.
//!
//! The `csv` crate handles quoting and embedded newlines; a UTF-8 BOM is stripped; input larger
//! than the profile's file limit is refused before it is read. Rows are streamed, errors are
//! capped, and the regexes come from the caller but are compiled with a size limit (256 KiB
//! each, at most 32 of them); matching is linear in the cell's length.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{ArgError, Spec, ToolError, parse};
use crate::config::Profile;
use crate::state::CallContext;

/// Errors reported per call, at most.
const MAX_ERRORS: usize = 500;
/// Compiled size of one column regex, at most (the crate's default is 10 MiB).
const REGEX_SIZE_LIMIT: usize = 256 << 10;
/// Columns with a regex rule, at most.
const MAX_REGEX_COLUMNS: usize = 32;

pub(super) fn spec(profile: &Profile) -> Spec {
    Spec {
        name: "validate_csv",
        title: "Validate CSV",
        description: format!(
            "Validate CSV data (a workspace file via `path`, or inline `text`) against required \
             headers and per-column rules: type (int, float, bool, date, datetime, email, url, \
             regex, enum) and nullability. Reports every bad cell with its row and column and a \
             summary. Input up to {} bytes; quoting, embedded newlines and a UTF-8 BOM are handled.",
            profile.max_file_bytes
        ),
        input: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "minLength": 1, "maxLength": 4096 },
                "text": { "type": "string", "maxLength": profile.max_file_bytes },
                "delimiter": { "type": "string", "minLength": 1, "maxLength": 1, "default": "," },
                "required_headers": { "type": "array", "maxItems": 1000,
                                      "items": { "type": "string", "maxLength": 256 } },
                "columns": {
                    "type": "object",
                    "maxProperties": 1000,
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "type": { "enum": ["string", "int", "float", "bool", "date", "datetime",
                                               "email", "url", "regex", "enum"] },
                            "nullable": { "type": "boolean", "default": true },
                            "pattern": { "type": "string", "maxLength": 1024 },
                            "values": { "type": "array", "maxItems": 10000,
                                        "items": { "type": "string", "maxLength": 1024 } }
                        },
                        "required": ["type"],
                        "additionalProperties": false
                    }
                }
            },
            "oneOf": [ { "required": ["path"] }, { "required": ["text"] } ],
            "additionalProperties": false
        }),
        output: json!({
            "type": "object",
            "properties": {
                "valid": { "type": "boolean" },
                "rows": { "type": "integer" },
                "headers": { "type": "array", "items": { "type": "string" } },
                "missing_headers": { "type": "array", "items": { "type": "string" } },
                "error_count": { "type": "integer" },
                "errors": { "type": "array", "items": { "type": "object",
                    "properties": { "row": { "type": ["integer", "null"] },
                                    "column": { "type": ["string", "null"] },
                                    "value": { "type": ["string", "null"] },
                                    "message": { "type": "string" } },
                    "required": ["message"] } },
                "summary": { "type": "object" },
                "truncated": { "type": "boolean" }
            },
            "required": ["valid", "rows", "headers", "missing_headers", "error_count", "errors",
                         "summary", "truncated"]
        }),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    }
}

#[derive(Deserialize)]
struct Column {
    #[serde(rename = "type")]
    kind: String,
    nullable: Option<bool>,
    pattern: Option<String>,
    values: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Args {
    path: Option<String>,
    text: Option<String>,
    delimiter: Option<String>,
    #[serde(default)]
    required_headers: Vec<String>,
    #[serde(default)]
    columns: BTreeMap<String, Column>,
}

/// A compiled column rule.
struct Rule {
    kind: String,
    nullable: bool,
    regex: Option<regex_lite::Regex>,
    values: Vec<String>,
}

fn bad_arg(path: &str, message: String) -> ToolError {
    ToolError::InvalidArguments(vec![ArgError {
        instance_path: path.into(),
        schema_path: String::new(),
        message,
    }])
}

fn compile(name: &str, c: Column) -> Result<Rule, ToolError> {
    let regex = match (c.kind.as_str(), c.pattern) {
        ("regex", Some(p)) => Some(
            regex_lite::RegexBuilder::new(&format!("^(?:{p})$"))
                .size_limit(REGEX_SIZE_LIMIT)
                .nest_limit(50)
                .build()
                .map_err(|e| bad_arg(&format!("/columns/{name}/pattern"), e.to_string()))?,
        ),
        ("regex", None) => {
            return Err(bad_arg(
                &format!("/columns/{name}"),
                "type regex needs a pattern".into(),
            ));
        }
        _ => None,
    };
    let values = c.values.unwrap_or_default();
    if c.kind == "enum" && values.is_empty() {
        return Err(bad_arg(
            &format!("/columns/{name}"),
            "type enum needs values".into(),
        ));
    }
    Ok(Rule {
        kind: c.kind,
        nullable: c.nullable.unwrap_or(true),
        regex,
        values,
    })
}

fn is_date(v: &str) -> bool {
    let b = v.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |s: &str| s.parse::<u32>().ok();
    match (num(&v[0..4]), num(&v[5..7]), num(&v[8..10])) {
        (Some(y), Some(m), Some(d)) => {
            let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
            let days = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            (1..=12).contains(&m) && d >= 1 && d <= days[(m - 1) as usize]
        }
        _ => false,
    }
}

fn is_datetime(v: &str) -> bool {
    // RFC 3339 / ISO 8601: DATE('T'|' ')HH:MM[:SS[.frac]][Z|±HH:MM]
    let Some((date, rest)) = v.split_once(['T', ' ']) else {
        return false;
    };
    if !is_date(date) || rest.len() < 5 {
        return false;
    }
    let (time, zone) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut parts = time.split(':');
    let h = parts.next().and_then(|p| p.parse::<u32>().ok());
    let m = parts.next().and_then(|p| p.parse::<u32>().ok());
    let s_ok = parts.next().is_none_or(|s| {
        let whole = s.split('.').next().unwrap_or("");
        whole.len() == 2 && whole.parse::<u32>().is_ok_and(|x| x <= 60)
    });
    let zone_ok = zone.is_empty()
        || zone.eq_ignore_ascii_case("z")
        || (zone.len() == 6 && zone.as_bytes()[3] == b':');
    matches!((h, m), (Some(h), Some(m)) if h < 24 && m < 60)
        && s_ok
        && zone_ok
        && parts.next().is_none()
}

fn is_email(v: &str) -> bool {
    let Some((local, domain)) = v.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !v.contains(char::is_whitespace)
        && domain.contains('.')
        && domain
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

fn is_url(v: &str) -> bool {
    let Some((scheme, rest)) = v.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && !rest.is_empty()
        && !rest.starts_with('/')
        && !v.contains(char::is_whitespace)
}

/// Check one non-empty value; `Err` says why it does not fit.
fn check(rule: &Rule, v: &str) -> Result<(), String> {
    let ok = match rule.kind.as_str() {
        "string" => true,
        "int" => v.parse::<i64>().is_ok(),
        "float" => v.parse::<f64>().is_ok_and(f64::is_finite),
        "bool" => matches!(
            v.to_ascii_lowercase().as_str(),
            "true" | "false" | "1" | "0" | "yes" | "no"
        ),
        "date" => is_date(v),
        "datetime" => is_datetime(v),
        "email" => is_email(v),
        "url" => is_url(v),
        "regex" => rule.regex.as_ref().is_some_and(|r| r.is_match(v)),
        "enum" => rule.values.iter().any(|x| x == v),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("not a valid {}", rule.kind))
    }
}

pub(super) async fn validate_csv(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: Args = parse(args)?;
    let max = cx.shared().config.profile.max_file_bytes;
    let data: Vec<u8> = match (&a.path, a.text) {
        (None, Some(t)) => t.into_bytes(),
        (Some(p), None) => super::files::read_all(cx, p, max).await?,
        _ => {
            return Err(ToolError::Internal(
                "schema admitted both or neither".into(),
            ));
        }
    };
    if data.len() as u64 > max {
        return Err(ToolError::TooLarge {
            what: "the CSV",
            limit: max,
        });
    }
    let delimiter = a
        .delimiter
        .as_deref()
        .and_then(|d| d.bytes().next())
        .unwrap_or(b',');
    if a.columns.values().filter(|c| c.kind == "regex").count() > MAX_REGEX_COLUMNS {
        return Err(bad_arg(
            "/columns",
            format!("at most {MAX_REGEX_COLUMNS} regex columns"),
        ));
    }
    let mut rules = BTreeMap::new();
    for (name, c) in a.columns {
        let rule = compile(&name, c)?;
        rules.insert(name, rule);
    }
    let required = a.required_headers;
    tokio::task::spawn_blocking(move || run(&data, delimiter, &required, &rules))
        .await
        .map_err(|e| ToolError::Internal(e.to_string()))
}

fn run(data: &[u8], delimiter: u8, required: &[String], rules: &BTreeMap<String, Rule>) -> Value {
    let data = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .from_reader(data);
    let mut errors = Vec::new();
    let mut count = 0usize;
    let mut push =
        |row: Option<u64>, column: Option<&str>, value: Option<&str>, message: String| {
            count += 1;
            if errors.len() < MAX_ERRORS {
                errors.push(
                    json!({ "row": row, "column": column, "value": value, "message": message }),
                );
            }
        };
    let headers: Vec<String> = match reader.headers() {
        Ok(h) => h.iter().map(str::to_owned).collect(),
        Err(e) => {
            push(None, None, None, format!("unreadable header row: {e}"));
            Vec::new()
        }
    };
    let missing: Vec<String> = required
        .iter()
        .filter(|h| !headers.contains(h))
        .cloned()
        .collect();
    for m in &missing {
        push(None, Some(m), None, "required header is missing".into());
    }
    for name in rules
        .keys()
        .filter(|n| !headers.contains(n) && !missing.contains(n))
    {
        push(
            None,
            Some(name),
            None,
            "a rule names a column the file does not have".into(),
        );
    }
    let index: Vec<(usize, &String, &Rule)> = headers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| rules.get(h).map(|r| (i, h, r)))
        .collect();
    let mut nulls: BTreeMap<&str, u64> = BTreeMap::new();
    let mut rows = 0u64;
    for (n, record) in reader.records().enumerate() {
        // Row numbers count the header as row 1, like a spreadsheet.
        let row = n as u64 + 2;
        rows += 1;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                push(Some(row), None, None, format!("unreadable row: {e}"));
                continue;
            }
        };
        if record.len() != headers.len() {
            push(
                Some(row),
                None,
                None,
                format!("{} fields, the header has {}", record.len(), headers.len()),
            );
        }
        for &(i, name, rule) in &index {
            let v = record.get(i).unwrap_or("");
            if v.is_empty() {
                *nulls.entry(name.as_str()).or_default() += 1;
                if !rule.nullable {
                    push(
                        Some(row),
                        Some(name),
                        Some(v),
                        "empty value in a non-nullable column".into(),
                    );
                }
                continue;
            }
            if let Err(m) = check(rule, v) {
                let shown: String = v.chars().take(200).collect();
                push(Some(row), Some(name), Some(&shown), m);
            }
        }
    }
    let summary = json!({ "columns_checked": index.len(), "empty_values": nulls });
    json!({
        "valid": count == 0,
        "rows": rows,
        "headers": headers,
        "missing_headers": missing,
        "error_count": count,
        "errors": errors,
        "summary": summary,
        "truncated": count > MAX_ERRORS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, &str, bool)]) -> BTreeMap<String, Rule> {
        list.iter()
            .map(|(n, k, nullable)| {
                let c = Column {
                    kind: k.to_string(),
                    nullable: Some(*nullable),
                    pattern: Some("[A-Z]{3}".into()),
                    values: Some(vec!["red".into(), "blue".into()]),
                };
                (n.to_string(), compile(n, c).unwrap())
            })
            .collect()
    }

    #[test]
    fn types_bom_quoting_and_row_numbers() {
        let data = "\u{feff}id,when,mail,site,ok,code,colour,note\n\
                    1,2024-02-29,a@b.co,https://x.test/p,true,ABC,red,\"multi\nline, quoted\"\n\
                    x,2023-02-29,nope,ftp:/x,maybe,AB,green,\n";
        let r = rules(&[
            ("id", "int", false),
            ("when", "date", true),
            ("mail", "email", true),
            ("site", "url", true),
            ("ok", "bool", true),
            ("code", "regex", true),
            ("colour", "enum", true),
            ("note", "string", false),
        ]);
        let v = run(data.as_bytes(), b',', &["id".into(), "missing".into()], &r);
        assert_eq!(v["rows"], 2);
        assert_eq!(v["missing_headers"], json!(["missing"]));
        let bad: Vec<(u64, String)> = v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["row"].is_u64())
            .map(|e| {
                (
                    e["row"].as_u64().unwrap(),
                    e["column"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for col in ["id", "when", "mail", "site", "ok", "code", "colour", "note"] {
            assert!(bad.contains(&(3, col.to_owned())), "{col}: {v}");
        }
        assert!(!bad.iter().any(|(row, _)| *row == 2), "{v}");
        assert_eq!(v["valid"], false);
    }

    #[test]
    fn datetimes() {
        for ok in [
            "2024-01-02T03:04:05Z",
            "2024-01-02 03:04",
            "2024-01-02T03:04:05.123+02:00",
        ] {
            assert!(is_datetime(ok), "{ok}");
        }
        for bad in [
            "2024-01-02",
            "2024-13-02T00:00",
            "2024-01-02T25:00",
            "2024-01-02T03:04:05+0200",
        ] {
            assert!(!is_datetime(bad), "{bad}");
        }
    }
}
