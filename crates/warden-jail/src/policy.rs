//! The sandbox policy: what a jailed command sees and how much it may use.
//!
//! A [`Policy`] is plain data (serde, TOML) with a default for everything. [`Policy::validate`]
//! checks it before anything is started and fails closed: a bind that would cover the jail's
//! own mounts, a relative target or a zero limit is an error, never silently adjusted.
//! Nothing here is taken from the sandboxed program: policies come from the operator.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Mount point of the workspace inside the jail (also the working directory).
pub const WORKSPACE_MOUNT: &str = "/workspace";

/// Errors in a policy.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// The TOML did not parse or had unknown fields.
    #[error("policy file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The file could not be read.
    #[error("reading policy file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A mount target is not an absolute, normal path.
    #[error("mount target {0:?} must be an absolute path without `..`")]
    BadTarget(PathBuf),
    /// A mount target would hide or sit inside one of the jail's own mounts.
    #[error("mount target {0:?} collides with a mount the jail owns (/, /proc, /dev, /workspace)")]
    ReservedTarget(PathBuf),
    /// A bind source does not exist.
    #[error("bind source {path:?} does not exist")]
    MissingSource {
        /// The source.
        path: PathBuf,
    },
    /// A limit of zero.
    #[error("limit `{0}` must be greater than zero")]
    ZeroLimit(&'static str),
    /// A limit outside the range the kernel accepts.
    #[error("limit {0} must be {1}")]
    OutOfRange(&'static str, &'static str),
    /// An environment variable name that cannot be passed to execve.
    #[error("environment variable name {0:?} is empty or contains `=` or NUL")]
    BadEnvName(String),
    /// More binds than the jail can hand over.
    #[error("at most 200 binds are allowed")]
    TooManyBinds,
    /// A direct target entry that is not an address or a CIDR network (or too many).
    #[error("network target {0}: give IP addresses or CIDR networks (at most 64 entries)")]
    BadNetworkTarget(String),
    /// An egress entry that is not a host name or `*.` and a host name.
    #[error(
        "egress entry {0:?} must be a host name such as pypi.org or *.example.org (at most 64 entries)"
    )]
    BadEgress(String),
    /// A string with a NUL byte.
    #[error("{0} contains a NUL byte")]
    Nul(&'static str),
    /// A user name that is not a plain login name.
    #[error("user name {0:?} is not a plain login name ([a-z_][a-z0-9_-]*, 32 at most)")]
    BadUser(String),
}

/// Network mode of the jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// A fresh network namespace with only loopback up: nothing leaves the jail.
    #[default]
    None,
}

/// How hard the jail insists on Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LandlockMode {
    /// Apply it at the best level the kernel offers and report the level reached.
    #[default]
    BestEffort,
    /// Refuse to start the command unless every requested Landlock feature is enforced.
    Required,
    /// Do not use Landlock (the mount plan alone shapes the file system).
    Off,
}

/// A bind mount of a host path into the jail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    /// Host path.
    pub source: PathBuf,
    /// Path inside the jail (defaults to `source`).
    #[serde(default)]
    pub target: Option<PathBuf>,
    /// Whether the jail may write to it.
    #[serde(default)]
    pub writable: bool,
}

impl Bind {
    /// The path inside the jail.
    pub fn target(&self) -> &Path {
        self.target.as_deref().unwrap_or(&self.source)
    }
}

/// A private tmpfs inside the jail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tmpfs {
    /// Path inside the jail.
    pub target: PathBuf,
    /// Size limit in bytes.
    #[serde(default = "default_tmpfs_size")]
    pub size_bytes: u64,
}

fn default_tmpfs_size() -> u64 {
    64 << 20
}

/// Resource limits. Every one has a default; none can be switched off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock time before the whole tree is killed, in milliseconds.
    pub wall_time_ms: u64,
    /// CPU time of the whole tree, in milliseconds.
    pub cpu_time_ms: u64,
    /// CPU rate of the whole tree, in thousandths of a CPU (2000: two CPUs' worth), throttled by
    /// cgroup v2 `cpu.max` where that controller is delegated.
    pub cpu_rate_milli: u64,
    /// Memory of the whole tree, in bytes.
    pub memory_bytes: u64,
    /// Processes and threads alive at once.
    pub pids: u64,
    /// Open files per process.
    pub open_files: u64,
    /// Largest file a process may write, in bytes.
    pub file_size_bytes: u64,
    /// Bytes kept of stdout and of stderr each; more ends the run.
    pub output_bytes: u64,
    /// Size of the private `/tmp`, in bytes.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall_time_ms: 300_000,
            cpu_time_ms: 300_000,
            cpu_rate_milli: 2000,
            memory_bytes: 1 << 30,
            pids: 512,
            open_files: 1024,
            file_size_bytes: 1 << 30,
            output_bytes: 16 << 20,
            tmp_bytes: 256 << 20,
        }
    }
}

/// Everything the jail needs to know about one sandboxed command, except the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Host directory mounted read-write at `/workspace`; `None` gives an empty private tmpfs.
    pub workspace: Option<PathBuf>,
    /// The command's whole environment (nothing is inherited from the caller).
    pub env: BTreeMap<String, String>,
    /// Resource limits.
    pub limits: Limits,
    /// Network mode.
    pub network: NetworkMode,
    /// Landlock mode.
    pub landlock: LandlockMode,
    /// Host system directories bound read-only (those that do not exist are skipped; symlinks
    /// such as a merged-usr `/bin` are recreated as symlinks).
    pub system_paths: Vec<PathBuf>,
    /// Single files or directories of `/etc` bound read-only when present.
    pub etc_paths: Vec<PathBuf>,
    /// Extra binds.
    pub binds: Vec<Bind>,
    /// Extra tmpfs mounts.
    pub tmpfs: Vec<Tmpfs>,
    /// Host name inside the jail.
    pub hostname: String,
    /// The user's login name inside the jail (`/etc/passwd`, and with decoys the home
    /// `/home/USER`): [`crate::persona::DEFAULT_USER`] unless a persona was drawn.
    #[serde(default = "default_user")]
    pub user: String,
    /// User id the command runs as inside the jail.
    pub uid: u32,
    /// Group id the command runs as inside the jail.
    pub gid: u32,
    /// Observe what the tree does (process starts, file opens, deletes and renames,
    /// connections) through seccomp user notification; the outcome then carries the events.
    pub trace: bool,
    /// Plant a decoy home and canary credentials and report every canary that shows up where
    /// it should not (implies `trace`).
    pub decoys: bool,
    /// With decoys: open TLS in the capture network with an authority made for the run and
    /// trusted inside the jail (its system store, `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`,
    /// `NODE_EXTRA_CA_CERTS`, `CURL_CA_BUNDLE`), so what a client sends inside TLS is read.
    #[serde(default)]
    pub open_tls: bool,
    /// With decoys: read every packet of the jail's network namespace at the boundary (the
    /// packet tap), so a secret is seen whatever syscall sent it. On by default; off, the
    /// network is judged by the sink's first bytes and the traced syscalls only.
    #[serde(default = "yes")]
    pub capture: bool,
    /// Write every packet of the jail's network namespace to this pcapng file (created; it
    /// must not exist). Implies `trace`.
    #[serde(default)]
    pub pcap: Option<PathBuf>,
    /// How the tracer's DNS stub answers.
    pub dns: warden_trace::DnsMode,
    /// The attribution window open from the very start of a traced run (the caller can switch
    /// it later), so the command's first exec is attributed too.
    pub initial_window: Option<String>,
    /// Host names a traced run may reach for real (`pypi.org`, or `*.example.org` for the names
    /// below it): a connection to an address the DNS stub handed out for such a name is
    /// forwarded to that host from the supervisor's side and recorded; everything else still
    /// lands on the capture sink. Names only, never addresses. Implies `trace`.
    pub egress: Vec<String>,
    /// Addresses and networks a traced run may connect to directly (`192.0.2.7`,
    /// `10.20.0.0/24`, `2001:db8::/64`; private ranges allowed, never names): a connect to one
    /// is answered with what the real target answers, and an open one is relayed from the
    /// supervisor's side; a connect to any other address fails with `EACCES`. See
    /// [`crate::trace::targets`]. Implies `trace`.
    pub targets: Vec<String>,
    /// How long a real connect to a target may take before it counts as filtered
    /// (`ETIMEDOUT`), milliseconds.
    pub target_connect_ms: u64,
    /// Protect the paths that run code later outside the sandbox (git's configuration and
    /// hooks, agents' and editors' project settings, dotenv files…) in the workspace and every
    /// writable bind: see [`crate::protect`].
    pub protect: bool,
    /// Protected paths (relative to a writable root: `.vscode`, `.git/hooks`) left writable.
    pub allow_protected: Vec<String>,
    /// Where a container masks `/proc` and no fresh procfs can be made for the jail, bind the
    /// container's own read-only instead of failing (weaker: see [`crate::procfs`]).
    pub allow_host_proc: bool,
    /// A library the jail's loader preloads into every dynamically linked program, named by the
    /// jail's own `/etc/ld.so.preload` (a path inside the jail): tracing sets it to its
    /// interposer, so no variable in the program's environment names it.
    #[serde(default)]
    pub preload: Option<PathBuf>,
}

impl Policy {
    /// The decoy home's path inside the jail: `/home/USER`.
    pub fn decoy_home(&self) -> String {
        format!("/home/{}", self.user)
    }
}

/// The plain user name, for serde defaults.
fn default_user() -> String {
    crate::persona::DEFAULT_USER.to_owned()
}

/// `true`, for serde defaults.
fn yes() -> bool {
    true
}

impl Default for Policy {
    fn default() -> Self {
        let env = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
            ("HOME", WORKSPACE_MOUNT),
            ("LANG", "C.UTF-8"),
            ("TMPDIR", "/tmp"),
            ("USER", "sandbox"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let paths = |list: &[&str]| list.iter().map(PathBuf::from).collect();
        Policy {
            workspace: None,
            env,
            limits: Limits::default(),
            network: NetworkMode::None,
            landlock: LandlockMode::BestEffort,
            system_paths: paths(&[
                "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
            ]),
            etc_paths: paths(&[
                "/etc/alternatives",
                "/etc/ld.so.cache",
                "/etc/ld.so.conf",
                "/etc/ld.so.conf.d",
                "/etc/localtime",
                "/etc/nsswitch.conf",
                "/etc/ssl",
                "/etc/ca-certificates",
                "/etc/mime.types",
                "/etc/protocols",
                "/etc/services",
                "/etc/python3",
                "/etc/python3.11",
                "/etc/gitconfig",
            ]),
            binds: Vec::new(),
            tmpfs: Vec::new(),
            decoys: false,
            open_tls: false,
            capture: true,
            pcap: None,
            dns: warden_trace::DnsMode::FakeIp,
            initial_window: None,
            egress: Vec::new(),
            targets: Vec::new(),
            target_connect_ms: 1500,
            protect: true,
            allow_protected: Vec::new(),
            allow_host_proc: false,
            preload: None,
            hostname: "warden".to_owned(),
            user: default_user(),
            uid: 1000,
            gid: 1000,
            trace: false,
        }
    }
}

/// Targets the jail mounts itself; user mounts may not be these or lie beneath them (except
/// `/workspace`, beneath which extra binds are allowed).
const RESERVED: &[&str] = &["/", "/proc", "/dev", "/etc", "/tmp"];

fn check_target(target: &Path) -> Result<(), PolicyError> {
    let normal = target.is_absolute()
        && target
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !normal {
        return Err(PolicyError::BadTarget(target.to_owned()));
    }
    // The tracer's tools folder, and any folder above it (a mount there would cover it).
    let tools = Path::new(crate::trace::prepare::TOOLS_MOUNT);
    let reserved = tools.starts_with(target) || target.starts_with(tools);
    let reserved = reserved
        || RESERVED.iter().any(|r| {
            let r = Path::new(r);
            target == r || (r != Path::new("/") && target.starts_with(r))
        });
    if reserved || target == Path::new(WORKSPACE_MOUNT) {
        return Err(PolicyError::ReservedTarget(target.to_owned()));
    }
    Ok(())
}

impl Policy {
    /// Whether the run is observed: asked for, or implied by decoys or an egress allowlist.
    pub fn traced(&self) -> bool {
        self.trace
            || self.decoys
            || self.pcap.is_some()
            || !self.egress.is_empty()
            || !self.targets.is_empty()
    }

    /// The direct targets, parsed (entries were checked by [`Policy::validate`]).
    pub fn target_list(&self) -> crate::trace::net::TargetList {
        crate::trace::net::TargetList {
            nets: self
                .targets
                .iter()
                .filter_map(|t| crate::trace::targets::parse_target(t).ok())
                .collect(),
            connect_time: std::time::Duration::from_millis(self.target_connect_ms.clamp(1, 60_000)),
        }
    }

    /// Read a policy from a TOML file (unknown fields are errors).
    pub fn from_toml_file(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| PolicyError::Parse {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// Check the policy; see the module docs for what is refused.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let l = &self.limits;
        for (name, v) in [
            ("wall_time_ms", l.wall_time_ms),
            ("cpu_time_ms", l.cpu_time_ms),
            ("cpu_rate_milli", l.cpu_rate_milli),
            ("memory_bytes", l.memory_bytes),
            ("pids", l.pids),
            ("open_files", l.open_files),
            ("file_size_bytes", l.file_size_bytes),
            ("output_bytes", l.output_bytes),
            ("tmp_bytes", l.tmp_bytes),
        ] {
            if v == 0 {
                return Err(PolicyError::ZeroLimit(name));
            }
        }
        // cgroup v2 refuses a quota under 1 ms per 100 ms period.
        if !(10..=4_096_000).contains(&l.cpu_rate_milli) {
            return Err(PolicyError::OutOfRange("cpu_rate_milli", "10 to 4096000"));
        }
        if self.binds.len() > 200 {
            return Err(PolicyError::TooManyBinds);
        }
        for b in &self.binds {
            check_target(b.target())?;
            if !b.source.exists() {
                return Err(PolicyError::MissingSource {
                    path: b.source.clone(),
                });
            }
        }
        if let Some(lib) = &self.preload
            && (!lib.is_absolute()
                || lib
                    .as_os_str()
                    .as_encoded_bytes()
                    .iter()
                    .any(|b| b.is_ascii_whitespace() || *b == 0))
        {
            return Err(PolicyError::BadTarget(lib.clone()));
        }
        for t in &self.tmpfs {
            check_target(&t.target)?;
            if t.size_bytes == 0 {
                return Err(PolicyError::ZeroLimit("tmpfs.size_bytes"));
            }
        }
        if let Some(ws) = &self.workspace
            && !ws.is_dir()
        {
            return Err(PolicyError::MissingSource { path: ws.clone() });
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(PolicyError::BadEnvName(k.clone()));
            }
            if v.contains('\0') {
                return Err(PolicyError::Nul("an environment value"));
            }
        }
        if self.egress.len() > 64 {
            return Err(PolicyError::BadEgress(format!(
                "{} entries",
                self.egress.len()
            )));
        }
        if let Some(bad) = self
            .egress
            .iter()
            .find(|p| !warden_trace::hosts::valid_pattern(p))
        {
            return Err(PolicyError::BadEgress(bad.clone()));
        }
        if self.targets.len() > crate::trace::targets::MAX_TARGETS {
            return Err(PolicyError::BadNetworkTarget(format!(
                "list of {} entries",
                self.targets.len()
            )));
        }
        for t in &self.targets {
            crate::trace::targets::parse_target(t).map_err(PolicyError::BadNetworkTarget)?;
        }
        if self.hostname.contains('\0') || self.hostname.len() > 64 {
            return Err(PolicyError::Nul(
                "the host name (or it is longer than 64 bytes)",
            ));
        }
        if !crate::persona::valid(&self.user) {
            return Err(PolicyError::BadUser(self.user.clone()));
        }
        Ok(())
    }
}

/// Parse a size such as `512M`, `2G`, `64k` or `1048576` (powers of 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let mult: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                'b' => 1,
                _ => return None,
            };
            (&t[..i], mult)
        }
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
