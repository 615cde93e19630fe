//! The agent clients people use, as decoys and as targets: where each keeps its MCP server
//! configuration, a plausible configuration for the decoy home (servers a developer would have
//! configured, their keys the run's canaries), and the names of the servers a configuration
//! lists, so a server that adds one of its own (a rogue MCP server planted in Claude Code,
//! Cursor, Windsurf, Continue, VS Code or Claude Desktop) is named.
//!
//! Guarantees: pure functions over bounded bytes; a configuration that does not parse lists no
//! server (and is still a write to an agent's configuration).

use serde_json::Value;

/// One agent client's MCP configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The client's name.
    pub name: &'static str,
    /// The file, relative to the home directory.
    pub path: &'static str,
    /// Where its servers are: a JSON object's key path (`mcpServers`), or `yaml` (Continue's
    /// list of `name:` entries).
    pub servers_at: &'static [&'static str],
}

/// The clients, by configuration file.
pub const CLIENTS: &[Client] = &[
    Client {
        name: "Claude Code",
        path: ".claude.json",
        servers_at: &["mcpServers"],
    },
    Client {
        name: "Claude Code",
        path: ".claude/settings.json",
        servers_at: &["mcpServers"],
    },
    Client {
        name: "Claude Desktop",
        path: ".config/Claude/claude_desktop_config.json",
        servers_at: &["mcpServers"],
    },
    Client {
        name: "Cursor",
        path: ".cursor/mcp.json",
        servers_at: &["mcpServers"],
    },
    Client {
        name: "Windsurf",
        path: ".codeium/windsurf/mcp_config.json",
        servers_at: &["mcpServers"],
    },
    Client {
        name: "Continue",
        path: ".continue/config.yaml",
        servers_at: &[],
    },
    Client {
        name: "VS Code",
        path: ".config/Code/User/mcp.json",
        servers_at: &["servers"],
    },
    Client {
        name: "VS Code",
        path: ".config/Code/User/settings.json",
        servers_at: &["mcp", "servers"],
    },
];

/// The client whose configuration `rel` (a path relative to the home directory) is.
pub fn client_of(rel: &str) -> Option<&'static Client> {
    CLIENTS.iter().find(|c| c.path == rel)
}

/// The servers the decoy configurations list (each client's file lists the same ones).
pub const DECOY_SERVERS: &[&str] = &["github", "postgres", "slack"];

/// The decoy configuration of `client`, its keys `github`, `db` and `slack` (the run's canaries).
pub fn decoy(client: &Client, github: &str, db: &str, slack: &str) -> String {
    if client.servers_at.is_empty() {
        return format!(
            "name: Local Assistant\nversion: 1.0.0\nschema: v1\nmcpServers:\n  - name: github\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-github\"]\n    env:\n      GITHUB_PERSONAL_ACCESS_TOKEN: {github}\n  - name: postgres\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-postgres\", \"postgresql://app:{db}@db.corp-internal.net:5432/app\"]\n  - name: slack\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-slack\"]\n    env:\n      SLACK_BOT_TOKEN: {slack}\n"
        );
    }
    let servers = serde_json::json!({
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": github }
        },
        "postgres": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-postgres",
                     format!("postgresql://app:{db}@db.corp-internal.net:5432/app")]
        },
        "slack": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-slack"],
            "env": { "SLACK_BOT_TOKEN": slack, "SLACK_TEAM_ID": "T04QX2K7M" }
        }
    });
    let mut doc = servers;
    for key in client.servers_at.iter().rev() {
        doc = serde_json::json!({ *key: doc });
    }
    // A little of what else such a file holds, so that it looks used.
    if client.path == ".claude.json"
        && let Some(m) = doc.as_object_mut()
    {
        m.insert("numStartups".into(), serde_json::json!(41));
        m.insert("theme".into(), serde_json::json!("dark"));
    }
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

/// The names of the MCP servers a configuration of `client` lists (empty when it does not
/// parse).
pub fn servers(client: &Client, bytes: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    if client.servers_at.is_empty() {
        // Continue's YAML: `- name: X` entries under `mcpServers:` (a flat reading, enough
        // for the names).
        let mut inside = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if !line.starts_with(' ') && !line.starts_with('-') {
                inside = line.trim_end() == "mcpServers:";
                continue;
            }
            if inside && let Some(name) = line.trim_start().strip_prefix("- name:") {
                out.push(name.trim().trim_matches(['"', '\'']).to_owned());
            }
        }
        out.sort();
        out.dedup();
        return out;
    }
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut at = &v;
    for key in client.servers_at {
        at = &at[*key];
    }
    let mut names: Vec<String> = at
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    // Claude Code also keeps servers per project.
    if let Some(projects) = v["projects"].as_object() {
        for p in projects.values() {
            if let Some(m) = p["mcpServers"].as_object() {
                names.extend(m.keys().cloned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The servers a written configuration lists that the decoy did not.
pub fn added(client: &Client, bytes: &[u8]) -> Vec<String> {
    servers(client, bytes)
        .into_iter()
        .filter(|s| !DECOY_SERVERS.contains(&s.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decoy_parses_and_lists_its_servers() {
        for c in CLIENTS {
            let text = decoy(c, "ghp_x", "pw", "xoxb-1");
            assert_eq!(servers(c, text.as_bytes()), DECOY_SERVERS, "{}", c.path);
            assert!(added(c, text.as_bytes()).is_empty());
            assert!(
                text.contains("ghp_x") && text.contains("xoxb-1"),
                "{}",
                c.path
            );
        }
    }

    #[test]
    fn a_planted_server_is_named() {
        let cursor = client_of(".cursor/mcp.json").unwrap();
        let mut v: Value = serde_json::from_str(&decoy(cursor, "a", "b", "c")).unwrap();
        v["mcpServers"]["helper"] = serde_json::json!({"command": "node", "args": ["/tmp/x.js"]});
        assert_eq!(added(cursor, v.to_string().as_bytes()), vec!["helper"]);
        let cont = client_of(".continue/config.yaml").unwrap();
        let yaml = decoy(cont, "a", "b", "c") + "  - name: \"sync\"\n    command: sh\n";
        assert_eq!(added(cont, yaml.as_bytes()), vec!["sync"]);
        let code = client_of(".claude.json").unwrap();
        let projects = r#"{"mcpServers": {}, "projects": {"/w": {"mcpServers": {"x": {}}}}}"#;
        assert_eq!(added(code, projects.as_bytes()), vec!["x"]);
        assert!(added(code, b"not json").is_empty());
        assert!(client_of(".bashrc").is_none());
    }
}
