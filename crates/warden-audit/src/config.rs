//! One client configuration file read into its server entries: the command, its arguments, the
//! names of the environment variables it sets, a URL for a remote server.
//!
//! Guarantees: environment *values* are never kept (only the names leave this module, so no
//! report, log or chamber ever holds a user's key); a file over [`MAX_BYTES`] or one that does
//! not parse is a typed error naming the file, never a panic; a server entry of an unknown
//! shape is kept with what could be read (an entry with neither a command nor a URL is judged
//! as "not judged", with why).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::clients::{Format, Place};

/// The largest configuration file read.
pub const MAX_BYTES: u64 = 4 << 20;
/// The most servers read from one file.
pub const MAX_SERVERS: usize = 500;

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The client (`Claude Code`, `Cursor`…).
    pub client: String,
    /// The file it is configured in.
    pub config: PathBuf,
    /// Its name there (for Claude Code's local scope, `PROJECT: NAME`).
    pub name: String,
    /// The program the client starts.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// The environment variables the entry sets (names only).
    pub env_names: Vec<String>,
    /// A remote server's URL.
    pub url: Option<String>,
    /// The client has it turned off.
    pub disabled: bool,
}

/// Why a configuration file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read.
    #[error("{path}: {why}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// It is not what its client writes.
    #[error("{path}: not a {client} configuration: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The client whose format was expected.
        client: String,
        /// Why.
        why: String,
    },
}

/// Read `path` as `place` says.
pub fn read(path: &Path, place: &Place) -> Result<Vec<Entry>, ConfigError> {
    let unreadable = |why: String| ConfigError::Unreadable {
        path: path.to_owned(),
        why,
    };
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
    let meta = file.metadata().map_err(|e| unreadable(e.to_string()))?;
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(unreadable(format!(
            "more than the {MAX_BYTES} bytes a configuration may have"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8".into()))?;
    parse(&text, place, path)
}

/// The entries of `text`, a file of `place`'s format at `path`.
pub fn parse(text: &str, place: &Place, path: &Path) -> Result<Vec<Entry>, ConfigError> {
    let malformed = |why: String| ConfigError::Malformed {
        path: path.to_owned(),
        client: place.client.to_owned(),
        why,
    };
    // A parser's message may quote the line it stopped at, which may hold a key: only where.
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let doc: Value = match place.format {
        Format::ContinueYaml => serde_norway::from_str(text).map_err(|e| {
            malformed(match e.location() {
                Some(l) => format!("YAML that does not parse (line {})", l.line()),
                None => "YAML that does not parse".into(),
            })
        })?,
        Format::CodexToml => toml::from_str(text).map_err(|e| {
            malformed(match e.span() {
                Some(span) => format!("TOML that does not parse (line {})", line_of(span.start)),
                None => "TOML that does not parse".into(),
            })
        })?,
        _ if text.trim().is_empty() => Value::Null,
        _ => json5::from_str(text).map_err(|e| {
            malformed(match e {
                json5::Error::Message {
                    location: Some(l), ..
                } => format!("JSON that does not parse (line {})", l.line),
                json5::Error::Message { .. } => "JSON that does not parse".into(),
            })
        })?,
    };
    let mut out = Vec::new();
    let mut add = |name: String, server: &Value| {
        if out.len() < MAX_SERVERS {
            out.push(entry(place, path, name, server));
        }
    };
    match place.format {
        Format::Json(keys) => {
            for (name, server) in objects(at(&doc, keys)) {
                add(name, server);
            }
        }
        Format::ZedJson => {
            for (name, server) in objects(doc.get("context_servers")) {
                add(name, server);
            }
        }
        Format::CodexToml => {
            for (name, server) in objects(doc.get("mcp_servers")) {
                add(name, server);
            }
        }
        Format::ClaudeJson => {
            for (name, server) in objects(doc.get("mcpServers")) {
                add(name, server);
            }
            for (project, settings) in objects(doc.get("projects")) {
                for (name, server) in objects(settings.get("mcpServers")) {
                    add(format!("{project}: {name}"), server);
                }
            }
        }
        Format::ContinueYaml => {
            let list = doc.get("mcpServers").and_then(Value::as_array);
            for (i, server) in list.into_iter().flatten().enumerate() {
                let name = server
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("server {}", i + 1), str::to_owned);
                add(name, server);
            }
        }
    }
    Ok(out)
}

fn at<'a>(doc: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(doc, |v, k| v.get(*k))
}

fn objects(v: Option<&Value>) -> impl Iterator<Item = (String, &Value)> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, s)| s.is_object())
        .map(|(k, s)| (k.clone(), s))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn names(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn entry(place: &Place, path: &Path, name: String, server: &Value) -> Entry {
    // Zed: `command` may be an object of its own (`path`, `args`, `env`).
    let (command, args, env) = match server.get("command") {
        Some(Value::Object(c)) => (
            c.get("path").and_then(Value::as_str).map(str::to_owned),
            strings(c.get("args")),
            names(c.get("env")),
        ),
        other => (
            other.and_then(Value::as_str).map(str::to_owned),
            strings(server.get("args")),
            names(server.get("env")),
        ),
    };
    let url = ["url", "serverUrl", "httpUrl"]
        .iter()
        .find_map(|k| server.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    let disabled = server.get("disabled").and_then(Value::as_bool) == Some(true)
        || server.get("enabled").and_then(Value::as_bool) == Some(false);
    Entry {
        client: place.client.to_owned(),
        config: path.to_owned(),
        name,
        command,
        args,
        env_names: env,
        url,
        disabled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::place_of;

    fn parse_as(path: &str, text: &str) -> Vec<Entry> {
        parse(text, &place_of(Path::new(path)), Path::new(path)).unwrap()
    }

    #[test]
    fn each_format_gives_its_servers_and_never_an_environment_value() {
        let jsonc = r#"{
            // VS Code writes comments and trailing commas
            "editor.fontSize": 14,
            "mcp": { "servers": { "time": { "command": "uvx", "args": ["mcp-server-time",],
                                             "env": { "TZ_KEY": "s3cr3t-value" } }, }, },
        }"#;
        let e = parse_as("/h/.config/Code/User/settings.json", jsonc);
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].client.as_str(), e[0].command.as_deref()),
            ("VS Code", Some("uvx"))
        );
        assert_eq!(e[0].env_names, ["TZ_KEY"]);
        assert!(!format!("{e:?}").contains("s3cr3t"));

        let claude = r#"{"mcpServers": {"a": {"command": "npx", "args": ["-y", "x"]}},
            "projects": {"/src/app": {"mcpServers": {"b": {"type": "http", "url": "https://m.example/mcp"}}}}}"#;
        let e = parse_as("/h/.claude.json", claude);
        assert_eq!(e[1].name, "/src/app: b");
        assert_eq!(e[1].url.as_deref(), Some("https://m.example/mcp"));

        let yaml =
            "name: x\nmcpServers:\n  - name: git\n    command: uvx\n    args: [mcp-server-git]\n";
        let e = parse_as("/h/.continue/config.yaml", yaml);
        assert_eq!((e[0].name.as_str(), e[0].args.len()), ("git", 1));

        let toml = "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"@scope/fs\"]\nenv = { K = \"v\" }\n";
        let e = parse_as("/h/.codex/config.toml", toml);
        assert_eq!((e[0].name.as_str(), e[0].env_names.len()), ("fs", 1));

        let zed = r#"{"context_servers": {"z": {"command": {"path": "node", "args": ["/s.js"]}},
                                          "y": {"command": "python3", "args": ["/t.py"], "enabled": false}}}"#;
        let e = parse_as("/h/.config/zed/settings.json", zed);
        let z = e.iter().find(|e| e.name == "z").unwrap();
        assert_eq!(
            (z.command.as_deref(), z.args.as_slice()),
            (Some("node"), &["/s.js".to_owned()][..])
        );
        assert!(e.iter().find(|e| e.name == "y").unwrap().disabled);
    }

    #[test]
    fn a_broken_file_is_an_error_naming_it() {
        let place = place_of(Path::new("/h/.cursor/mcp.json"));
        let err = parse("{ nope", &place, Path::new("/h/.cursor/mcp.json")).unwrap_err();
        assert!(err.to_string().contains("/h/.cursor/mcp.json"), "{err}");
        // The message says where, never what: the line may hold a key.
        let codex = place_of(Path::new("/h/.codex/config.toml"));
        let broken = "[mcp_servers.a]\nenv = { K = \"sk-secret-value\" \n";
        let err = parse(broken, &codex, Path::new("/h/.codex/config.toml")).unwrap_err();
        assert!(!err.to_string().contains("sk-secret"), "{err}");
        let broken = "{\"mcpServers\": {\"a\": {\"env\": {\"K\": \"sk-secret-value\" oops}}}}";
        let err = parse(broken, &place, Path::new("/h/.cursor/mcp.json")).unwrap_err();
        assert!(!err.to_string().contains("sk-secret"), "{err}");
        assert!(
            parse("", &place, Path::new("/h/.cursor/mcp.json"))
                .unwrap()
                .is_empty()
        );
    }
}
