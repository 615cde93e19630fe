//! The server's configuration: a TOML file with named profiles, validated into one typed
//! [`Config`] before anything is served.
//!
//! A profile picks the tools a client may call and the limits those calls run under. Four are
//! built in — `code` (commands, Python, files, validation, and the web tools when `[web]` is
//! configured), `readonly` (reading and validation only), `recon` (the security toolset) and
//! `web` (the web tools only) — and a file may add more or override them by name. Nothing a client sends
//! can change the profile or widen an allowlist: they are read here, at start, and only here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;
use warden_jail::{Limits, Policy};

pub use crate::tools::CODE_TOOLS;
use crate::tools::{RECON_TOOLS, WEB_TOOLS, all_tools};

#[path = "config_web.rs"]
mod web;
pub use web::{BRAVE_URL, Backend, SearchFile, WebFile};

/// Errors in the configuration.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path:?}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse or had unknown fields.
    #[error("{path:?}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The selected profile does not exist.
    #[error("no profile named {0:?} (built in: code, readonly, recon, web)")]
    NoProfile(String),
    /// A profile names a tool that does not exist.
    #[error("profile {profile:?} names unknown tool {tool:?}")]
    UnknownTool {
        /// The profile.
        profile: String,
        /// The tool.
        tool: String,
    },
    /// A profile's numbers make no sense.
    #[error("profile {profile:?}: {what}")]
    BadProfile {
        /// The profile.
        profile: String,
        /// What is wrong.
        what: &'static str,
    },
    /// The `[recon]` table is invalid, or recon tools are offered without targets.
    #[error("[recon]: {0}")]
    Recon(String),
    /// The `[web]` table is invalid, or web tools are offered with nothing configured.
    #[error("[web]: {0}")]
    Web(String),
    /// The jail policy of a profile is invalid.
    #[error("profile {profile:?}: invalid sandbox policy")]
    Policy {
        /// The profile.
        profile: String,
        /// Why.
        #[source]
        source: warden_jail::PolicyError,
    },
}

/// One profile as written in the file (every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Tools offered (default: the `code` set).
    pub tools: Option<Vec<String>>,
    /// If set, `run_command` may start only these programs (by name), and `command` (a shell
    /// line) only if `sh` is among them.
    pub allowed_programs: Option<Vec<String>>,
    /// Default per-call timeout, seconds.
    pub default_timeout_s: Option<f64>,
    /// Largest timeout a call may ask for, seconds.
    pub max_timeout_s: Option<f64>,
    /// Largest file the file tools read or write, bytes.
    pub max_file_bytes: Option<u64>,
    /// If set, file tools only touch files with these extensions (without the dot).
    pub allowed_extensions: Option<Vec<String>>,
    /// Modules and builtins `run_python` refuses before running (an extra layer, off by default).
    pub python_denylist: Option<Vec<String>>,
    /// Sandbox limits for commands and Python.
    pub limits: Option<Limits>,
    /// Environment of sandboxed commands (replaces the default).
    pub env: Option<BTreeMap<String, String>>,
}

/// HTTP settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpFile {
    /// Bearer token clients must send; required to listen on a non-loopback address.
    pub bearer_token: Option<String>,
    /// Browser origins allowed to call the server (scheme://host[:port]); any other Origin
    /// header gets 403. Requests without an Origin header (non-browser clients) are allowed.
    pub allowed_origins: Vec<String>,
    /// Sessions open at once; a new one past this gets 503 (with `Retry-After`).
    pub max_sessions: usize,
    /// New sessions one client address may open per minute; past this, 429.
    pub sessions_per_minute: u32,
    /// A session idle this long (seconds) is closed, its workspace with it.
    pub idle_timeout_s: u64,
}

impl Default for HttpFile {
    fn default() -> Self {
        HttpFile {
            bearer_token: None,
            allowed_origins: Vec::new(),
            max_sessions: 64,
            sessions_per_minute: 60,
            idle_timeout_s: 300,
        }
    }
}

/// Warm sandboxes (see [`crate::pool`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolFile {
    /// Sandboxes kept prepared per policy (a session's code tools share one); 0 turns the pool
    /// off and every call starts its sandbox from nothing.
    pub size: usize,
    /// Prepared sandboxes waiting at once, across sessions and policies, at most.
    pub max_waiting: usize,
    /// A prepared sandbox unused for this long (seconds) is destroyed.
    pub idle_timeout_s: u64,
}

impl Default for PoolFile {
    fn default() -> Self {
        PoolFile {
            size: 2,
            max_waiting: 8,
            idle_timeout_s: 60,
        }
    }
}

/// The recon toolset's settings: where its targets are (the only addresses its tools may be
/// aimed at and its sandboxes may reach) and where its programs are.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconFile {
    /// Addresses and CIDR networks the recon tools may be aimed at (`192.168.68.100`,
    /// `10.20.0.0/24`, `2001:db8::/64`); fixed at start, never widened by a call.
    pub targets: Vec<String>,
    /// nmap (default: found in the system's PATH directories).
    pub nmap: Option<PathBuf>,
    /// ffuf (default: found in the system's PATH directories).
    pub ffuf: Option<PathBuf>,
    /// arjun, 2.2.7 or later (default: Warden's own venv, `/opt/warden/recon/bin/arjun`).
    pub arjun: Option<PathBuf>,
    /// nuclei (default: found in the system's PATH directories); listed only with templates.
    pub nuclei: Option<PathBuf>,
    /// The nuclei templates folder (default: `/usr/share/nuclei-templates` or
    /// `/opt/nuclei-templates`).
    pub nuclei_templates: Option<PathBuf>,
    /// How long a connect to a target may take before the port counts as filtered, ms.
    pub connect_timeout_ms: u64,
    /// Ports one `nmap_scan` may name, at most.
    pub max_ports: u32,
    /// Bytes of a tool's raw output returned, at most (the rest is cut and the result says so).
    pub raw_max_bytes: u64,
}

impl Default for ReconFile {
    fn default() -> Self {
        ReconFile {
            targets: Vec::new(),
            nmap: None,
            ffuf: None,
            arjun: None,
            nuclei: None,
            nuclei_templates: None,
            connect_timeout_ms: 1500,
            max_ports: 10_000,
            raw_max_bytes: 64 << 10,
        }
    }
}

/// The file, raw.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigFile {
    /// The profile to serve.
    pub profile: String,
    /// Directory under which session workspaces are created (default: a private temporary one).
    pub workspace_root: Option<PathBuf>,
    /// All sessions share one workspace instead of one each.
    pub shared_workspace: bool,
    /// With `workspace_root` or `shared_workspace` (workspaces that outlive a session), the
    /// paths that run code later outside the sandbox (`.git` config and hooks, `.mcp.json`,
    /// `.vscode/`, `.env`…) are read-only to commands and file tools; these (relative to the
    /// workspace: `.vscode`, `.git/hooks`) are left writable.
    pub allow_protected: Vec<String>,
    /// Inside a container that masks `/proc`, when no fresh procfs can be made for the
    /// sandbox, bind the container's own read-only instead of failing every call (weaker).
    pub allow_host_proc: bool,
    /// Calls running at once, across sessions.
    pub max_concurrent_calls: usize,
    /// Audit log file (default: `audit.jsonl` in the state directory).
    pub audit_log: Option<PathBuf>,
    /// Rotate the audit log past this size.
    pub audit_max_bytes: u64,
    /// Rotated audit files kept.
    pub audit_keep: u32,
    /// Folder of named JSON Schemas for `validate_json`.
    pub schemas_dir: Option<PathBuf>,
    /// Total size of a workspace's snapshot store.
    pub snapshots_max_bytes: u64,
    /// Size of a session's own workspace, its disk quota: a tmpfs of this size, or under
    /// `workspace_root` a loop-mounted disk image of this size. The shared workspace (the
    /// operator's lasting folder) has none.
    pub workspace_max_bytes: u64,
    /// HTTP settings.
    pub http: HttpFile,
    /// The recon toolset's settings.
    pub recon: ReconFile,
    /// The web tools' settings.
    pub web: WebFile,
    /// Warm sandboxes.
    pub pool: PoolFile,
    /// Named profiles (override or extend the built-in ones).
    pub profiles: BTreeMap<String, ProfileFile>,
}

impl Default for ConfigFile {
    fn default() -> Self {
        ConfigFile {
            profile: "code".into(),
            workspace_root: None,
            shared_workspace: false,
            allow_protected: Vec::new(),
            allow_host_proc: false,
            max_concurrent_calls: 4,
            audit_log: None,
            audit_max_bytes: 10 << 20,
            audit_keep: 3,
            schemas_dir: None,
            snapshots_max_bytes: 512 << 20,
            workspace_max_bytes: 512 << 20,
            http: HttpFile::default(),
            recon: ReconFile::default(),
            web: WebFile::default(),
            pool: PoolFile::default(),
            profiles: BTreeMap::new(),
        }
    }
}

/// The validated profile in force.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its name.
    pub name: String,
    /// Tools offered, in a stable order.
    pub tools: Vec<&'static str>,
    /// Programs `run_command` may start, if restricted.
    pub allowed_programs: Option<Vec<String>>,
    /// Default per-call timeout, seconds.
    pub default_timeout_s: f64,
    /// Largest per-call timeout, seconds.
    pub max_timeout_s: f64,
    /// Largest file for the file tools, bytes.
    pub max_file_bytes: u64,
    /// Extensions the file tools accept, if restricted.
    pub allowed_extensions: Option<Vec<String>>,
    /// `run_python`'s static pre-check list (empty: off).
    pub python_denylist: Vec<String>,
    /// Jail policy for commands (workspace filled in per session).
    pub policy: Policy,
}

impl ConfigFile {
    /// Whether session workspaces outlive their session (so their protected paths matter).
    pub fn lasting_workspaces(&self) -> bool {
        self.shared_workspace || self.workspace_root.is_some()
    }
}

/// The validated configuration: the file's settings (normalised) and the profile in force.
#[derive(Debug, Clone)]
pub struct Config {
    /// The profile in force.
    pub profile: Profile,
    /// Everything else the file says (`settings.profiles` is what `profile` was chosen from).
    pub settings: ConfigFile,
}

/// Tools of the built-in `readonly` profile.
pub const READONLY_TOOLS: &[&str] = &[
    "snapshot_list",
    "snapshot_diff",
    "file_read",
    "file_list",
    "file_info",
    "validate_json",
    "validate_csv",
    "sandbox_metrics",
    "env_get",
];

fn builtin(name: &str) -> Option<ProfileFile> {
    let tools: Vec<&str> = match name {
        // The web tools are listed only once `[web]` gives them somewhere to go.
        "code" => CODE_TOOLS.iter().chain(WEB_TOOLS).copied().collect(),
        "readonly" => READONLY_TOOLS.to_vec(),
        "recon" => RECON_TOOLS.to_vec(),
        "web" => WEB_TOOLS.to_vec(),
        _ => return None,
    };
    let recon = name == "recon";
    Some(ProfileFile {
        tools: Some(tools.iter().map(|t| t.to_string()).collect()),
        // Scans take longer than an agent's usual call (a version scan waits on every probe).
        default_timeout_s: recon.then_some(120.0),
        max_timeout_s: recon.then_some(900.0),
        limits: recon.then(|| Limits {
            wall_time_ms: 900_000,
            cpu_time_ms: 900_000,
            memory_bytes: 1 << 30,
            ..call_limits()
        }),
        ..ProfileFile::default()
    })
}

/// Default limits for tool calls: tighter than `warden run`'s (an agent's call should be quick).
fn call_limits() -> Limits {
    Limits {
        wall_time_ms: 30_000,
        cpu_time_ms: 30_000,
        memory_bytes: 512 << 20,
        pids: 128,
        output_bytes: 256 << 10,
        tmp_bytes: 128 << 20,
        ..Limits::default()
    }
}

impl ConfigFile {
    /// Read a configuration file.
    pub fn from_file(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// Validate into a [`Config`], selecting `profile` (or the file's choice).
    pub fn validate(self, profile: Option<&str>) -> Result<Config, ConfigError> {
        let name = profile.unwrap_or(&self.profile).to_owned();
        let file = match (self.profiles.get(&name), builtin(&name)) {
            (Some(custom), Some(base)) => merge(base, custom.clone()),
            (Some(custom), None) => custom.clone(),
            (None, Some(base)) => base,
            (None, None) => return Err(ConfigError::NoProfile(name)),
        };
        let profile = validate_profile(&name, file)?;
        validate_recon(&self.recon, &profile)?;
        web::validate(&self.web, &profile)?;
        let settings = ConfigFile {
            max_concurrent_calls: self.max_concurrent_calls.max(1),
            audit_max_bytes: self.audit_max_bytes.max(4096),
            pool: PoolFile {
                size: self.pool.size.min(MAX_POOL),
                max_waiting: self.pool.max_waiting.min(MAX_POOL),
                idle_timeout_s: self.pool.idle_timeout_s.clamp(1, 86_400),
            },
            ..self
        };
        Ok(Config { profile, settings })
    }
}

/// Most prepared sandboxes per policy, and waiting at once (each is three processes).
const MAX_POOL: usize = 64;

/// The `[recon]` table: targets parse, the numbers are sane, and a profile that offers recon
/// tools has targets to aim them at.
fn validate_recon(r: &ReconFile, profile: &Profile) -> Result<(), ConfigError> {
    if r.targets.len() > warden_jail::trace::targets::MAX_TARGETS {
        return Err(ConfigError::Recon(format!(
            "at most {} targets",
            warden_jail::trace::targets::MAX_TARGETS
        )));
    }
    for t in &r.targets {
        warden_jail::trace::targets::parse_target(t).map_err(ConfigError::Recon)?;
    }
    if !(1..=60_000).contains(&r.connect_timeout_ms) {
        return Err(ConfigError::Recon(
            "connect_timeout_ms must be between 1 and 60000".into(),
        ));
    }
    if !(1..=65_535).contains(&r.max_ports) {
        return Err(ConfigError::Recon(
            "max_ports must be between 1 and 65535".into(),
        ));
    }
    if !(1024..=64 << 20).contains(&r.raw_max_bytes) {
        return Err(ConfigError::Recon(
            "raw_max_bytes must be between 1024 and 67108864".into(),
        ));
    }
    let offers = profile.tools.iter().any(|t| RECON_TOOLS.contains(t));
    if offers && r.targets.is_empty() {
        return Err(ConfigError::Recon(format!(
            "profile {:?} offers recon tools but no targets are configured \
             (add `[recon] targets = [\"192.0.2.10\", \"10.20.0.0/24\"]`)",
            profile.name
        )));
    }
    Ok(())
}

fn merge(base: ProfileFile, custom: ProfileFile) -> ProfileFile {
    ProfileFile {
        tools: custom.tools.or(base.tools),
        allowed_programs: custom.allowed_programs.or(base.allowed_programs),
        default_timeout_s: custom.default_timeout_s.or(base.default_timeout_s),
        max_timeout_s: custom.max_timeout_s.or(base.max_timeout_s),
        max_file_bytes: custom.max_file_bytes.or(base.max_file_bytes),
        allowed_extensions: custom.allowed_extensions.or(base.allowed_extensions),
        python_denylist: custom.python_denylist.or(base.python_denylist),
        limits: custom.limits.or(base.limits),
        env: custom.env.or(base.env),
    }
}

fn validate_profile(name: &str, f: ProfileFile) -> Result<Profile, ConfigError> {
    let bad = |what| ConfigError::BadProfile {
        profile: name.to_owned(),
        what,
    };
    let requested = f.tools.unwrap_or_else(|| {
        CODE_TOOLS
            .iter()
            .chain(WEB_TOOLS)
            .map(|t| t.to_string())
            .collect()
    });
    let mut tools = Vec::new();
    for t in &requested {
        let Some(known) = all_tools().find(|k| *k == t.as_str()) else {
            return Err(ConfigError::UnknownTool {
                profile: name.to_owned(),
                tool: t.clone(),
            });
        };
        if !tools.contains(&known) {
            tools.push(known);
        }
    }
    let default_timeout_s = f.default_timeout_s.unwrap_or(30.0);
    let max_timeout_s = f.max_timeout_s.unwrap_or(120.0);
    if !(default_timeout_s > 0.0 && max_timeout_s >= default_timeout_s && max_timeout_s <= 86_400.0)
    {
        return Err(bad(
            "timeouts must satisfy 0 < default_timeout_s <= max_timeout_s <= 86400",
        ));
    }
    let max_file_bytes = f.max_file_bytes.unwrap_or(10 << 20);
    if max_file_bytes == 0 {
        return Err(bad("max_file_bytes must be greater than zero"));
    }
    let mut policy = Policy {
        limits: f.limits.unwrap_or_else(call_limits),
        ..Policy::default()
    };
    if let Some(env) = f.env {
        policy.env = env;
    }
    policy.validate().map_err(|source| ConfigError::Policy {
        profile: name.to_owned(),
        source,
    })?;
    Ok(Profile {
        name: name.to_owned(),
        tools,
        allowed_programs: f.allowed_programs,
        default_timeout_s,
        max_timeout_s,
        max_file_bytes,
        allowed_extensions: f.allowed_extensions.map(|v| {
            v.into_iter()
                .map(|e| e.trim_start_matches('.').to_owned())
                .collect()
        }),
        python_denylist: f.python_denylist.unwrap_or_default(),
        policy,
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
