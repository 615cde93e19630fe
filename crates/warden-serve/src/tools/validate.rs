//! `validate_json`: data against an inline JSON Schema or a named one from the operator's
//! schema folder (drafts 2020-12 and 7, chosen by `$schema`; 2020-12 when absent), every error
//! with its instance path and schema path. Schemas never fetch anything: the validator is built
//! without a resolver, so a `$ref` to another document is an error, not a download.
//!
//! A schema is bounded before anything compiles it (size, nodes, patterns), and compiling and
//! validating run in a worker process that the call's deadline, a cancellation or the client's
//! departure stops (see [`super::validate_worker`]).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::validate_worker::{self, Answer, Job, MAX_ERRORS};
use super::{ArgError, Spec, ToolError, parse};
use crate::state::CallContext;

/// Largest schema, serialised.
const MAX_SCHEMA_BYTES: usize = 1 << 20;
/// Most values (objects, arrays, strings, numbers…) in a schema.
const MAX_SCHEMA_NODES: usize = 50_000;
/// Most `pattern`s and `patternProperties` keys in a schema.
const MAX_SCHEMA_PATTERNS: usize = 1_000;
/// Longest `pattern`.
const MAX_PATTERN_CHARS: usize = 10_000;

/// Refuse a schema past the limits, with the limit it passed.
fn check_schema_size(schema: &Value) -> Result<(), ToolError> {
    let refuse = |message: String| {
        Err(ToolError::InvalidArguments(vec![ArgError {
            instance_path: "/schema".into(),
            schema_path: String::new(),
            message,
        }]))
    };
    let bytes = serde_json::to_vec(schema).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_SCHEMA_BYTES {
        return refuse(format!(
            "the schema is {bytes} bytes; at most {MAX_SCHEMA_BYTES} are accepted"
        ));
    }
    let (mut nodes, mut patterns) = (0usize, 0usize);
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        nodes += 1;
        match v {
            Value::Object(m) => {
                if let Some(Value::String(p)) = m.get("pattern") {
                    patterns += 1;
                    if p.chars().count() > MAX_PATTERN_CHARS {
                        return refuse(format!(
                            "a pattern is longer than {MAX_PATTERN_CHARS} characters"
                        ));
                    }
                }
                if let Some(Value::Object(pp)) = m.get("patternProperties") {
                    patterns += pp.len();
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    if nodes > MAX_SCHEMA_NODES {
        return refuse(format!(
            "the schema has {nodes} values; at most {MAX_SCHEMA_NODES} are accepted"
        ));
    }
    if patterns > MAX_SCHEMA_PATTERNS {
        return refuse(format!(
            "the schema has {patterns} patterns; at most {MAX_SCHEMA_PATTERNS} are accepted"
        ));
    }
    Ok(())
}

pub(super) fn spec() -> Spec {
    Spec {
        name: "validate_json",
        title: "Validate JSON",
        description: "Validate JSON data against a JSON Schema given inline (`schema`) or by name \
                      (`schema_name`, from the server's schema folder; see warden://schemas). \
                      Drafts 2020-12 and 7. Returns every error with its instance path and \
                      schema path."
            .into(),
        input: json!({
            "type": "object",
            "properties": {
                "data": { "description": "The JSON value to validate." },
                "schema": { "type": ["object", "boolean"] },
                "schema_name": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$" }
            },
            "required": ["data"],
            "oneOf": [ { "required": ["schema"] }, { "required": ["schema_name"] } ],
            "additionalProperties": false
        }),
        output: json!({
            "type": "object",
            "properties": {
                "valid": { "type": "boolean" },
                "error_count": { "type": "integer" },
                "errors": { "type": "array", "items": {
                    "type": "object",
                    "properties": { "instance_path": { "type": "string" },
                                    "schema_path": { "type": "string" },
                                    "message": { "type": "string" } },
                    "required": ["instance_path", "schema_path", "message"] } },
                "truncated": { "type": "boolean" }
            },
            "required": ["valid", "error_count", "errors", "truncated"]
        }),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    }
}

#[derive(Deserialize)]
struct Args {
    data: Value,
    schema: Option<Value>,
    schema_name: Option<String>,
}

/// Names of the schemas in the operator's folder (files `NAME.json`).
pub fn schema_names(cx_dir: Option<&std::path::Path>) -> Vec<String> {
    let Some(dir) = cx_dir else { return Vec::new() };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

fn named_schema(cx: &CallContext, name: &str) -> Result<Value, ToolError> {
    let dir = cx
        .shared()
        .config
        .settings
        .schemas_dir
        .as_ref()
        .ok_or_else(|| ToolError::Unavailable("the server has no schema folder".into()))?;
    // The name's pattern (no '/', no '..' alone) keeps this inside the folder.
    if name.starts_with('.') {
        return Err(ToolError::Unavailable(format!("no schema named {name:?}")));
    }
    let text = std::fs::read_to_string(dir.join(format!("{name}.json")))
        .map_err(|_| ToolError::Unavailable(format!("no schema named {name:?}")))?;
    serde_json::from_str(&text)
        .map_err(|e| ToolError::Unavailable(format!("schema {name:?} is not valid JSON: {e}")))
}

pub(super) async fn validate_json(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: Args = parse(args)?;
    let schema = match (a.schema, a.schema_name) {
        (Some(s), None) => s,
        (None, Some(name)) => named_schema(cx, &name)?,
        _ => {
            return Err(ToolError::Internal(
                "schema admitted both or neither".into(),
            ));
        }
    };
    check_schema_size(&schema)?;
    // The profile's longest call (well inside the server's own deadline for in-server tools),
    // so the worker is gone before the call (and its concurrency permit) ends.
    let deadline = Duration::from_secs_f64(cx.shared().config.profile.max_timeout_s);
    let job = Job {
        schema,
        data: a.data,
        cpu_s: deadline.as_secs().saturating_add(1),
    };
    // Waiting for a slot counts against the same deadline.
    let started = tokio::time::Instant::now();
    let _slot = tokio::select! {
        slot = cx.shared().validation_slots.acquire() => {
            slot.map_err(|e| ToolError::Internal(e.to_string()))?
        }
        () = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
        () = tokio::time::sleep(deadline) => {
            return Err(ToolError::Unavailable(format!(
                "no validation slot within {} s (others are validating)",
                deadline.as_secs()
            )));
        }
    };
    let left = deadline.saturating_sub(started.elapsed());
    let answer = validate_worker::run(cx.shared().exe(), &job, left, &cx.cancel).await?;
    let (errors, count) = match answer {
        Answer::Checked { errors, count } => (errors, count),
        Answer::InvalidSchema(e) => {
            return Err(ToolError::InvalidArguments(vec![ArgError {
                instance_path: "/schema".into(),
                schema_path: String::new(),
                message: format!("not a valid JSON Schema: {e}"),
            }]));
        }
    };
    Ok(json!({
        "valid": count == 0,
        "error_count": count,
        "errors": errors,
        "truncated": count > MAX_ERRORS,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_past_the_limits_are_refused_with_the_limit() {
        let many: Vec<Value> = (0..MAX_SCHEMA_PATTERNS + 1)
            .map(|i| json!({ "pattern": format!("^a{i}$") }))
            .collect();
        let e = check_schema_size(&json!({ "allOf": many })).unwrap_err();
        assert!(e.to_string().contains("patterns"), "{e}");
        let long = "a".repeat(MAX_PATTERN_CHARS + 1);
        assert!(check_schema_size(&json!({ "pattern": long })).is_err());
        let deep: Vec<Value> = (0..MAX_SCHEMA_NODES).map(|_| json!({})).collect();
        assert!(check_schema_size(&json!({ "enum": deep })).is_err());
        assert!(check_schema_size(&json!({ "type": "string", "pattern": "^a+$" })).is_ok());
    }
}
