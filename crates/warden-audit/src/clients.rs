//! Where each agent client keeps its MCP servers on Linux: the file (in the user's home or in a
//! project), its format and the key its servers are under. One table, read by discovery and
//! printed in the README.
//!
//! Guarantees: constant data; every path is relative (to the home or the project folder).

/// How a file lists its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (comments and trailing commas allowed, as editors write it): an object of servers
    /// by name at this key path.
    Json(&'static [&'static str]),
    /// Claude Code's `~/.claude.json`: `mcpServers` (user scope) and each project's own
    /// (`projects.PATH.mcpServers`, local scope).
    ClaudeJson,
    /// Continue's YAML: a list of servers, each with its `name`, under `mcpServers`.
    ContinueYaml,
    /// Codex's TOML: tables `[mcp_servers.NAME]`.
    CodexToml,
    /// Zed's JSON settings: `context_servers`, whose `command` is a string or an object
    /// (`path`, `args`, `env`).
    ZedJson,
}

/// Whether a file is in the home or in the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Relative to the home directory.
    Home,
    /// Relative to the project folder (the current directory, or `--project`).
    Project,
}

/// One client's configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The client's name.
    pub client: &'static str,
    /// Where the file is.
    pub scope: Scope,
    /// The path, relative to the scope's folder.
    pub path: &'static str,
    /// How it lists its servers.
    pub format: Format,
}

const fn home(client: &'static str, path: &'static str, format: Format) -> Place {
    Place {
        client,
        scope: Scope::Home,
        path,
        format,
    }
}

const fn project(client: &'static str, path: &'static str, format: Format) -> Place {
    Place {
        client,
        scope: Scope::Project,
        path,
        format,
    }
}

const MCP_SERVERS: Format = Format::Json(&["mcpServers"]);

/// Every place `warden audit` looks, in the order it reports them.
pub const PLACES: &[Place] = &[
    home(
        "Claude Desktop",
        ".config/Claude/claude_desktop_config.json",
        MCP_SERVERS,
    ),
    home("Claude Code", ".claude.json", Format::ClaudeJson),
    project("Claude Code", ".mcp.json", MCP_SERVERS),
    home("Cursor", ".cursor/mcp.json", MCP_SERVERS),
    project("Cursor", ".cursor/mcp.json", MCP_SERVERS),
    home("Windsurf", ".codeium/windsurf/mcp_config.json", MCP_SERVERS),
    home(
        "VS Code",
        ".config/Code/User/settings.json",
        Format::Json(&["mcp", "servers"]),
    ),
    home(
        "VS Code",
        ".config/Code/User/mcp.json",
        Format::Json(&["servers"]),
    ),
    project("VS Code", ".vscode/mcp.json", Format::Json(&["servers"])),
    home("Continue", ".continue/config.yaml", Format::ContinueYaml),
    home("Zed", ".config/zed/settings.json", Format::ZedJson),
    project("Zed", ".zed/settings.json", Format::ZedJson),
    home("Gemini CLI", ".gemini/settings.json", MCP_SERVERS),
    project("Gemini CLI", ".gemini/settings.json", MCP_SERVERS),
    home("Codex", ".codex/config.toml", Format::CodexToml),
];

/// The place a file given with `--config` is read as: the first whose path it ends with, else
/// a plain `mcpServers` JSON file.
pub fn place_of(file: &std::path::Path) -> Place {
    let s = file.to_string_lossy();
    PLACES
        .iter()
        .find(|p| s.ends_with(p.path))
        .copied()
        .unwrap_or(Place {
            client: "configuration",
            scope: Scope::Project,
            path: "",
            format: MCP_SERVERS,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_place_is_relative_and_a_given_file_is_read_by_its_name() {
        assert!(PLACES.iter().all(|p| !p.path.starts_with('/')));
        let p = place_of(std::path::Path::new("/x/.codex/config.toml"));
        assert_eq!((p.client, p.format), ("Codex", Format::CodexToml));
        let p = place_of(std::path::Path::new("/x/servers.json"));
        assert_eq!(p.format, MCP_SERVERS);
    }
}
