//! Benign arguments synthesized from a tool's `inputSchema`, chosen so that a real server's own
//! validation accepts them: `const`, `enum`, `default` and `examples` first, then the type with
//! its format, pattern, length and range constraints, nested objects and arrays, and the first
//! usable branch of `anyOf`/`oneOf`. Parameter names steer the choice of plausible strings
//! (a `url` gets a URL, a `timezone` a time zone). Bounded in depth and size.

use serde_json::{Map, Value, json};

/// Nesting followed, at most.
const MAX_DEPTH: usize = 6;
/// Properties filled per object, at most.
const MAX_PROPERTIES: usize = 32;

/// Values built per tool, at most (a hostile schema cannot make the arguments explode).
const MAX_NODES: usize = 2000;
/// Longest `pattern` compiled.
const MAX_PATTERN: usize = 256;

thread_local! {
    static BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_NODES) };
    static MARKER: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Arguments for a tool whose input schema is `schema`.
pub fn benign(schema: &Value) -> Map<String, Value> {
    benign_for_user(schema, None)
}

/// Like [`benign`], the free text in them (a string with no format, pattern or telling name,
/// where `test` would go) being `marker`: the argument canary, so that what the user gave a
/// tool can be followed wherever it goes.
pub fn benign_for_user(schema: &Value, marker: Option<&str>) -> Map<String, Value> {
    BUDGET.with(|b| b.set(MAX_NODES));
    MARKER.with(|m| *m.borrow_mut() = marker.map(str::to_owned));
    let out = match value_for(schema, "", 0) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    MARKER.with(|m| *m.borrow_mut() = None);
    out
}

fn first_type(schema: &Value) -> Option<String> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .or_else(|| ts.first().and_then(Value::as_str))
            .map(str::to_owned),
        _ if schema.get("properties").is_some() => Some("object".into()),
        _ if schema.get("items").is_some() => Some("array".into()),
        _ => None,
    }
}

/// A value for `schema`; `name` is the property it is for.
pub fn value_for(schema: &Value, name: &str, depth: usize) -> Value {
    let left = BUDGET.with(|b| {
        let v = b.get();
        b.set(v.saturating_sub(1));
        v
    });
    if depth > MAX_DEPTH || left == 0 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    if let Some(e) = schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            let usable = branches
                .iter()
                .find(|b| first_type(b).as_deref() != Some("null"))
                .or_else(|| branches.first());
            if let Some(b) = usable {
                return value_for(b, name, depth + 1);
            }
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        let mut merged = Map::new();
        for part in all {
            if let Value::Object(m) = value_for(part, name, depth + 1) {
                merged.extend(m);
            }
        }
        return Value::Object(merged);
    }
    match first_type(schema).as_deref() {
        Some("object") => object(schema, depth),
        Some("array") => {
            let min = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, 4);
            let items = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            Value::Array(
                (0..min)
                    .map(|_| value_for(&items, name, depth + 1))
                    .collect(),
            )
        }
        Some("integer") => integer(number(schema)),
        Some("number") => json!(number(schema)),
        Some("boolean") => json!(false),
        Some("null") => Value::Null,
        _ => json!(string(schema, name)),
    }
}

fn object(schema: &Value, depth: usize) -> Value {
    let mut out = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props.iter().take(MAX_PROPERTIES) {
            // Required properties always; optional ones only when the schema suggests a value.
            let suggested = v.get("default").is_some() || v.get("examples").is_some();
            if required.contains(&k.as_str()) || suggested {
                out.insert(k.clone(), value_for(v, k, depth + 1));
            }
        }
    }
    Value::Object(out)
}

/// `n` rounded, as a JSON integer (saturating at the i64 range).
fn integer(n: f64) -> Value {
    let r = n.round().clamp(-9.0e15, 9.0e15);
    // Within ±9e15 every integral f64 is exact, so the string form parses back exactly.
    format!("{r:.0}")
        .parse::<i64>()
        .map_or(json!(1), |i| json!(i))
}

fn number(schema: &Value) -> f64 {
    let get = |k: &str| schema.get(k).and_then(Value::as_f64);
    let low = get("minimum").or_else(|| get("exclusiveMinimum").map(|x| x + 1.0));
    let high = get("maximum").or_else(|| get("exclusiveMaximum").map(|x| x - 1.0));
    match (low, high) {
        (Some(l), _) => l.max(1.0).min(high.unwrap_or(f64::MAX)),
        (None, Some(h)) => h.min(1.0),
        (None, None) => 1.0,
    }
}

/// A plausible string for a property called `name`.
fn by_name(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    let has = |w: &str| n.contains(w);
    Some(
        if has("url") || has("uri") || has("link") || has("endpoint") {
            "https://example.test/"
        } else if has("email") {
            "user@example.test"
        } else if has("timezone") || n == "tz" {
            "UTC"
        } else if has("time") && !has("timeout") {
            "12:00"
        } else if has("date") {
            "2024-01-01"
        } else if has("dir") || has("folder") || has("repo") {
            "/workspace"
        } else if has("path") || has("file") {
            "/workspace/warden-probe.txt"
        } else if has("host") || has("domain") {
            "example.test"
        } else if has("lang") {
            "en"
        } else if has("id") {
            "1"
        } else {
            return None;
        },
    )
}

fn string(schema: &Value, name: &str) -> String {
    let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
    let mut s = match format {
        "uri" | "url" | "iri" | "uri-reference" => "https://example.test/".to_owned(),
        "email" | "idn-email" => "user@example.test".to_owned(),
        "date" => "2024-01-01".to_owned(),
        "date-time" => "2024-01-01T00:00:00Z".to_owned(),
        "time" => "12:00:00".to_owned(),
        "uuid" => "00000000-0000-4000-8000-000000000000".to_owned(),
        "ipv4" => "127.0.0.1".to_owned(),
        "ipv6" => "::1".to_owned(),
        "hostname" | "idn-hostname" => "example.test".to_owned(),
        _ => match by_name(name) {
            Some(s) => s.to_owned(),
            None => MARKER
                .with(|m| m.borrow().clone())
                .unwrap_or_else(|| "test".to_owned()),
        },
    };
    if let Some(p) = schema
        .get("pattern")
        .and_then(Value::as_str)
        .filter(|p| p.len() <= MAX_PATTERN)
        && let Ok(re) = regex_lite::Regex::new(p)
        && !re.is_match(&s)
    {
        s = [
            "test",
            "abc",
            "a",
            "1",
            "A1",
            "example",
            "x-1",
            "2024-01-01",
            "user@example.test",
        ]
        .into_iter()
        .find(|c| re.is_match(c))
        .unwrap_or(&s)
        .to_owned();
    }
    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
    let max = schema.get("maxLength").and_then(Value::as_u64);
    while (s.chars().count() as u64) < min.min(256) {
        s.push('a');
    }
    if let Some(max) = max {
        s = s
            .chars()
            .take(usize::try_from(max).unwrap_or(usize::MAX))
            .collect();
    }
    s
}

/// The names of a tool's top-level string parameters.
pub fn string_params(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| {
                    first_type(v).as_deref() == Some("string")
                        && v.get("enum").is_none()
                        && v.get("const").is_none()
                })
                .map(|(k, _)| k.clone())
                .take(MAX_PROPERTIES)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_valid_arguments() {
        let schema = json!({
            "type": "object",
            "required": ["timezone", "count", "mode", "tags", "when", "nested", "pick", "url", "code"],
            "properties": {
                "timezone": {"type": "string"},
                "count": {"type": "integer", "minimum": 3, "maximum": 9},
                "mode": {"enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "when": {"type": "string", "format": "date-time"},
                "nested": {"type": "object", "required": ["flag"], "properties": {"flag": {"type": "boolean"}, "opt": {"type": "string"}}},
                "pick": {"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0}]},
                "url": {"type": "string"},
                "code": {"type": "string", "pattern": "^[A-Z][0-9]$"},
                "optional": {"type": "string"},
                "withdefault": {"type": "string", "default": "d"}
            }
        });
        let a = benign(&schema);
        assert_eq!(a["timezone"], "UTC");
        assert_eq!(a["count"], 3);
        assert_eq!(a["mode"], "fast");
        assert_eq!(a["tags"].as_array().unwrap().len(), 2);
        assert_eq!(a["when"], "2024-01-01T00:00:00Z");
        assert_eq!(a["nested"], json!({"flag": false}));
        assert_eq!(a["pick"], 1.0);
        assert_eq!(a["url"], "https://example.test/");
        assert_eq!(a["code"], "A1");
        assert!(a.get("optional").is_none());
        assert_eq!(a["withdefault"], "d");
        assert_eq!(
            string_params(&schema),
            vec!["code", "optional", "timezone", "url", "when", "withdefault"]
        );
    }

    #[test]
    fn the_users_free_text_carries_the_marker() {
        let schema = json!({
            "type": "object",
            "required": ["note", "url", "short", "digits", "pick"],
            "properties": {
                "note": {"type": "string"},
                "url": {"type": "string"},
                "short": {"type": "string", "maxLength": 4},
                "digits": {"type": "string", "pattern": "^[0-9]+$"},
                "pick": {"enum": ["a", "b"]}
            }
        });
        let a = benign_for_user(&schema, Some("Q7x2Lm9PzR4tVb8NcK3w"));
        assert_eq!(a["note"], "Q7x2Lm9PzR4tVb8NcK3w");
        assert_eq!(a["url"], "https://example.test/");
        assert_eq!(a["short"], "Q7x2", "cut to the schema's length");
        assert_eq!(
            a["digits"], "1",
            "a pattern the marker fails gets a value that fits"
        );
        assert_eq!(a["pick"], "a");
        assert_eq!(benign(&schema)["note"], "test", "no marker afterwards");
    }

    #[test]
    fn hostile_schemas_are_bounded() {
        // Deep nesting and self-similar schemas end at the depth limit.
        let mut s = json!({"type": "string"});
        for _ in 0..100 {
            s = json!({"type": "object", "required": ["x"], "properties": {"x": s}});
        }
        let _ = benign(&s);
        assert_eq!(benign(&json!("not a schema")), Map::new());
        let big = json!({"type": "string", "minLength": 1_000_000_000u64});
        assert!(string(&big, "").len() <= 256);
        // Wide and deep: 32 properties per level, arrays of 4, three levels (two million leaves
        // without the budget).
        let mut wide = json!({"type": "string"});
        for _ in 0..3 {
            let props: serde_json::Map<String, Value> = (0..32)
                .map(|i| {
                    (
                        format!("p{i}"),
                        json!({"type": "array", "minItems": 4, "items": wide.clone()}),
                    )
                })
                .collect();
            let req: Vec<String> = (0..32).map(|i| format!("p{i}")).collect();
            wide = json!({"type": "object", "properties": props, "required": req});
        }
        let a = Value::Object(benign(&wide));
        assert!(a.to_string().len() < 1 << 20, "bounded by the node budget");
    }
}
