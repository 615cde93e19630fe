//! `warden audit --wrap`: a client's configuration with every local (stdio) server started
//! through `warden wrap -- COMMAND ARGS…`, so the client keeps running each inside the sandbox.
//!
//! Guarantees: only the command and arguments of servers that run a program change (remote
//! servers, and servers already wrapped, stay as they are; so does everything else in the
//! file); the formats rewritten are the JSON ones (comments in them are not kept: the result
//! is written as a copy beside the file unless the operator asks for it in place, and then the
//! original is kept as a backup); YAML and TOML files are said as not rewritten.

use std::path::Path;

use serde_json::Value;

use crate::clients::{Format, Place};

/// `text` (a file of `place`'s format) with its servers wrapped by `warden`; `Ok(None)` when
/// nothing changes, `Err` with why when the format is not rewritten or does not parse.
pub fn wrapped(text: &str, place: &Place, warden: &str) -> Result<Option<String>, String> {
    let keys: Vec<Vec<&str>> = match place.format {
        Format::Json(keys) => vec![keys.to_vec()],
        Format::ZedJson => vec![vec!["context_servers"]],
        Format::ClaudeJson => vec![vec!["mcpServers"]],
        Format::ContinueYaml | Format::CodexToml => {
            return Err(format!(
                "{}'s {} is not rewritten (only JSON configurations are, for now): wrap its \
                 servers by hand with `{warden} wrap -- COMMAND`",
                place.client, place.path
            ));
        }
    };
    let mut doc: Value = json5::from_str(text).map_err(|_| "does not parse".to_owned())?;
    let mut changed = false;
    for path in &keys {
        if let Some(servers) = at_mut(&mut doc, path) {
            changed |= wrap_all(servers, warden);
        }
    }
    if place.format == Format::ClaudeJson
        && let Some(projects) = doc.get_mut("projects").and_then(Value::as_object_mut)
    {
        for settings in projects.values_mut() {
            if let Some(servers) = settings.get_mut("mcpServers") {
                changed |= wrap_all(servers, warden);
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    serde_json::to_string_pretty(&doc)
        .map(|s| Some(s + "\n"))
        .map_err(|e| e.to_string())
}

fn at_mut<'a>(doc: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter().try_fold(doc, |v, k| v.get_mut(*k))
}

/// Wrap every server of the object `servers`; whether any changed.
fn wrap_all(servers: &mut Value, warden: &str) -> bool {
    let mut changed = false;
    for server in servers
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        changed |= wrap_one(server, warden);
    }
    changed
}

/// The names of the variables an entry (or Zed's command object) sets.
fn server_env(holder: &serde_json::Map<String, Value>) -> Option<Vec<String>> {
    holder
        .get("env")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
}

fn wrap_one(server: &mut Value, warden: &str) -> bool {
    // Zed's `command` may be an object of its own (`path`, `args`).
    let (holder, program_key) = match server.get("command") {
        Some(Value::Object(_)) => (server.get_mut("command"), "path"),
        Some(Value::String(_)) => (Some(server), "command"),
        _ => return false,
    };
    let Some(holder) = holder.and_then(Value::as_object_mut) else {
        return false;
    };
    let Some(program) = holder
        .get(program_key)
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return false;
    };
    let args: Vec<Value> = holder
        .get("args")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let already = Path::new(&program).file_name() == Path::new(warden).file_name()
        && args.first().and_then(Value::as_str) == Some("wrap");
    if already {
        return false;
    }
    // The variables the client sets for the server reach it through wrap by name (their values
    // stay in the client's environment, off any command line).
    let mut new_args = vec![Value::from("wrap")];
    for name in server_env(holder).unwrap_or_default() {
        new_args.push(Value::from("--pass-env"));
        new_args.push(Value::from(name));
    }
    new_args.push(Value::from("--"));
    if args.is_empty() && program.contains(' ') {
        // A whole command line in `command`: its words, as the client would split them.
        new_args.extend(
            shlex::split(&program)
                .unwrap_or_else(|| vec![program.clone()])
                .into_iter()
                .map(Value::from),
        );
    } else {
        new_args.push(Value::from(program));
        new_args.extend(args);
    }
    holder.insert(program_key.into(), Value::from(warden));
    holder.insert("args".into(), Value::Array(new_args));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::place_of;

    #[test]
    fn local_servers_are_wrapped_once_and_remote_ones_left_alone() {
        let place = place_of(Path::new("/h/.claude.json"));
        let text = r#"{"theme": "dark",
            "mcpServers": {"a": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}},
                           "r": {"type": "http", "url": "https://m.example/mcp"}},
            "projects": {"/p": {"mcpServers": {"b": {"command": "uvx mcp-server-time"}}}}}"#;
        let out = wrapped(text, &place, "/usr/local/bin/warden")
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["mcpServers"]["a"]["command"], "/usr/local/bin/warden");
        assert_eq!(
            v["mcpServers"]["a"]["args"],
            serde_json::json!(["wrap", "--pass-env", "K", "--", "npx", "-y", "pkg"])
        );
        assert_eq!(v["mcpServers"]["a"]["env"]["K"], "v", "the rest stays");
        assert_eq!(v["mcpServers"]["r"]["url"], "https://m.example/mcp");
        assert!(v["mcpServers"]["r"].get("command").is_none());
        assert_eq!(
            v["projects"]["/p"]["mcpServers"]["b"]["args"],
            serde_json::json!(["wrap", "--", "uvx", "mcp-server-time"])
        );
        assert_eq!(v["theme"], "dark");
        // Wrapping what is wrapped changes nothing.
        assert_eq!(
            wrapped(&out, &place, "/usr/local/bin/warden").unwrap(),
            None
        );

        let zed = place_of(Path::new("/h/.config/zed/settings.json"));
        let out = wrapped(
            r#"{"context_servers": {"z": {"command": {"path": "node", "args": ["/s.js"]}}}}"#,
            &zed,
            "warden",
        )
        .unwrap()
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["context_servers"]["z"]["command"],
            serde_json::json!({"path": "warden", "args": ["wrap", "--", "node", "/s.js"]})
        );
        let codex = place_of(Path::new("/h/.codex/config.toml"));
        assert!(wrapped("", &codex, "warden").is_err());
    }
}
