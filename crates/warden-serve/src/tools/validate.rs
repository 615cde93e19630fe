//! `validate_json`: data against an inline JSON Schema or a named one from the operator's
//! schema folder (drafts 2020-12 and 7, chosen by `$schema`; 2020-12 when absent), every error
//! with its instance path and schema path. Schemas never fetch anything: the validator is built
//! without a resolver, so a `$ref` to another document is an error, not a download.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{ArgError, Spec, ToolError, parse};
use crate::state::CallContext;

/// Errors reported per call, at most.
const MAX_ERRORS: usize = 200;

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
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        ToolError::InvalidArguments(vec![ArgError {
            instance_path: "/schema".into(),
            schema_path: String::new(),
            message: format!("not a valid JSON Schema: {e}"),
        }])
    })?;
    let data = a.data;
    // Off the async workers: a large document or schema takes real CPU.
    let (errors, count) = tokio::task::spawn_blocking(move || {
        let mut errors = Vec::new();
        let mut count = 0usize;
        for e in validator.iter_errors(&data) {
            count += 1;
            if errors.len() < MAX_ERRORS {
                let mut message = e.to_string();
                if message.len() > 1000 {
                    let mut cut = 1000;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                    message.push('…');
                }
                errors.push(json!({
                    "instance_path": e.instance_path().to_string(),
                    "schema_path": e.schema_path().to_string(),
                    "message": message,
                }));
            }
        }
        (errors, count)
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?;
    Ok(json!({
        "valid": count == 0,
        "error_count": count,
        "errors": errors,
        "truncated": count > MAX_ERRORS,
    }))
}
