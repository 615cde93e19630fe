//! Server state: what all sessions share ([`Shared`]: configuration, the jail, the audit log,
//! metrics, the concurrency limit) and what each session owns ([`Session`]: its workspace).
//!
//! A session's workspace is created on first use and removed when the session ends (unless the
//! configuration shares one workspace between sessions); the server's private state directory
//! (workspaces, scratch files for `run_python`) goes when the server does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use warden_jail::{Jail, Policy};

use crate::audit::Audit;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::tools::{self, Spec, ToolError};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state directory or audit log could not be created.
    #[error("creating {path:?}")]
    Io {
        /// What.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The jail helper (our own executable) could not be found.
    #[error("locating the jail helper")]
    Jail(#[source] warden_jail::JailError),
    /// A tool's schema does not compile (a bug).
    #[error("tool {tool} has an invalid schema: {message}")]
    Schema {
        /// The tool.
        tool: &'static str,
        /// Why.
        message: String,
    },
}

/// State shared by every session.
#[derive(Debug)]
pub struct Shared {
    /// The validated configuration.
    pub config: Config,
    /// Starts sandboxed commands.
    pub jail: Jail,
    /// The audit log.
    pub audit: Audit,
    /// Per-tool metrics.
    pub metrics: Metrics,
    /// Sandboxes prepared ahead of the calls that use them.
    pub pool: Arc<crate::pool::Pool>,
    /// Calls running at once.
    pub permits: Semaphore,
    /// When the server started.
    pub started: Instant,
    /// The recon toolbox (programs found at start, targets).
    pub recon: crate::tools::recon::Toolbox,
    /// The profile's tools, in listing order.
    pub specs: Vec<Spec>,
    /// Compiled input schemas by tool.
    pub validators: HashMap<&'static str, jsonschema::Validator>,
    /// The server's private directory.
    state_dir: tempfile::TempDir,
    /// Held while the server lives, so no other server sweeps it.
    _state_held: Option<crate::leftovers::Held>,
    /// The `warden` executable (the jail's helper, the validation worker).
    exe: PathBuf,
    /// The real path of the running `warden`, bound into web calls' sandboxes as their worker.
    web_exe: Option<PathBuf>,
    /// Validation workers running at once: all cores but one, so a flood of expensive
    /// validations cannot starve the other calls.
    pub validation_slots: Semaphore,
    /// The workspace all sessions use when shared.
    shared_workspace: OnceLock<PathBuf>,
    /// Serialises snapshot operations.
    pub snapshot_lock: tokio::sync::Mutex<()>,
    next_session: AtomicU64,
    next_call: AtomicU64,
}

impl Shared {
    /// Set up from a validated configuration. `helper` is the `warden` executable.
    pub fn new(config: Config, helper: Option<PathBuf>) -> Result<Arc<Shared>, StartError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StartError::Io { path, source }
        };
        // What servers killed with SIGKILL left; this one's folder is named after its pid so a
        // later server can tell.
        let tmp = std::env::temp_dir();
        crate::leftovers::sweep_dead(&tmp, "warden-serve-", &tmp);
        if let Some(root) = &config.settings.workspace_root {
            let held_at = root.join(".quota");
            for dir in [root.clone(), root.join(".snapshots"), root.join(".quota")] {
                crate::leftovers::sweep_dead(&dir, crate::leftovers::SESSION, &held_at);
            }
        }
        let state_dir = tempfile::Builder::new()
            .prefix(&format!("warden-serve-{}-", std::process::id()))
            .tempdir()
            .map_err(io(&std::env::temp_dir()))?;
        crate::leftovers::register(state_dir.path());
        let state_held = crate::leftovers::hold(state_dir.path());
        let audit_path = config
            .settings
            .audit_log
            .clone()
            .unwrap_or_else(|| state_dir.path().join("audit.jsonl"));
        let audit = Audit::open(
            &audit_path,
            config.settings.audit_max_bytes,
            config.settings.audit_keep,
        )
        .map_err(io(&audit_path))?;
        // This very binary for our workers (even once an upgrade has replaced its file: two
        // builds never meet), unless a helper is named.
        let exe = match &helper {
            Some(h) => h.clone(),
            None => PathBuf::from(warden_jail::SELF_EXE),
        };
        // The jail's helper: the one asked for, else the small `warden-jail` of this build
        // beside us when there is one, else this binary.
        let jail = match helper {
            Some(h) => Jail::with_helper(h),
            None => Jail::current_exe().unwrap_or_else(|_| Jail::with_helper(exe.clone())),
        };
        let wants_recon = config
            .profile
            .tools
            .iter()
            .any(|t| tools::RECON_TOOLS.contains(t));
        let recon = crate::tools::recon::Toolbox::discover(
            &config.settings.recon,
            wants_recon,
            &jail,
            &config.profile.policy,
            state_dir.path(),
        );
        let specs: Vec<Spec> = config
            .profile
            .tools
            .iter()
            .filter_map(|t| {
                if tools::RECON_TOOLS.contains(t) {
                    crate::tools::recon::spec(t, &recon, config.profile.max_timeout_s)
                } else if tools::WEB_TOOLS.contains(t) {
                    crate::tools::web::spec(t, &config.settings.web, config.profile.max_timeout_s)
                } else {
                    tools::spec(t, &config.profile)
                }
            })
            .collect();
        let mut validators = HashMap::new();
        for s in &specs {
            let v = jsonschema::validator_for(&s.input).map_err(|e| StartError::Schema {
                tool: s.name,
                message: e.to_string(),
            })?;
            validators.insert(s.name, v);
        }
        Ok(Arc::new(Shared {
            permits: Semaphore::new(config.settings.max_concurrent_calls),
            pool: crate::pool::Pool::new(jail.clone(), config.settings.pool.clone()),
            config,
            jail,
            audit,
            metrics: Metrics::default(),
            started: Instant::now(),
            recon,
            specs,
            validators,
            state_dir,
            _state_held: state_held,
            exe,
            web_exe: crate::tools::web::worker_exe(),
            validation_slots: Semaphore::new(
                std::thread::available_parallelism()
                    .map_or(1, std::num::NonZeroUsize::get)
                    .saturating_sub(1)
                    .max(1),
            ),
            shared_workspace: OnceLock::new(),
            snapshot_lock: tokio::sync::Mutex::new(()),
            next_session: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
        }))
    }

    /// The `warden` executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// The real path of the running `warden` (the web worker), if it can be found.
    pub fn web_exe(&self) -> Option<&Path> {
        self.web_exe.as_deref()
    }

    /// The server's private directory.
    pub fn state_dir(&self) -> &Path {
        self.state_dir.path()
    }

    fn workspace_root(&self) -> PathBuf {
        self.config
            .settings
            .workspace_root
            .clone()
            .unwrap_or_else(|| self.state_dir.path().join("workspaces"))
    }

    /// A new call id (for audit and scratch files).
    pub fn call_id(&self) -> u64 {
        self.next_call.fetch_add(1, Ordering::Relaxed)
    }
}

/// Create `dir` (and parents) and make it accessible to root only: workspaces and snapshot
/// stores below it hold the sessions' data. It must be a real folder of the server's own user
/// (not a link, not someone else's): a folder another user controls could have links planted
/// where the server creates, formats and mounts its session folders.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::create_dir_all(dir)?;
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != nix::unistd::geteuid().as_raw() {
        return Err(std::io::Error::other(format!(
            "{} must be a folder owned by the server's user, not a link",
            dir.display()
        )));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Create `dir`, which must not exist yet (a session's own folder: nothing planted there
/// beforehand is ever used).
fn fresh_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)
}

/// One client session.
#[derive(Debug)]
pub struct Session {
    /// Its id (in the audit log).
    pub id: String,
    /// The shared state.
    pub shared: Arc<Shared>,
    /// Cancelled when the client goes away (stdio EOF): every call of the session stops at once.
    pub closed: CancellationToken,
    workspace: OnceLock<Result<(PathBuf, crate::quota::Backing), String>>,
    /// Held while the session lives (its `.quota/ID` under an operator's root), so no other
    /// server sweeps it.
    held: std::sync::Mutex<Option<crate::leftovers::Held>>,
}

impl Session {
    /// A new session; `closed` fires when its client is gone.
    pub fn new(shared: Arc<Shared>, closed: CancellationToken) -> Session {
        let n = shared.next_session.fetch_add(1, Ordering::Relaxed);
        Session {
            // Unique across server runs too (workspaces may outlive a killed server).
            id: format!("{}{}-{n}", crate::leftovers::SESSION, std::process::id()),
            shared,
            closed,
            workspace: OnceLock::new(),
            held: std::sync::Mutex::new(None),
        }
    }

    /// The session's workspace, created on first use.
    pub fn workspace(&self) -> Result<PathBuf, ToolError> {
        self.workspace_and_quota().map(|(p, _)| p)
    }

    /// The session's workspace and what bounds its size, created on first use.
    pub(crate) fn workspace_and_quota(
        &self,
    ) -> Result<(PathBuf, crate::quota::Backing), ToolError> {
        let shared = &self.shared;
        let settings = &shared.config.settings;
        self.workspace
            .get_or_init(|| {
                let root = shared.workspace_root();
                let path = if settings.shared_workspace {
                    shared
                        .shared_workspace
                        .get_or_init(|| root.join("shared"))
                        .clone()
                } else {
                    root.join(&self.id)
                };
                let lasting_root = settings.workspace_root.is_some() && !settings.shared_workspace;
                let quota_dir = root.join(".quota").join(&self.id);
                private_dir(&root)
                    .and_then(|()| {
                        if settings.shared_workspace {
                            std::fs::create_dir_all(&path)
                        } else {
                            fresh_dir(&path)
                        }
                    })
                    .and_then(|()| {
                        // Under an operator's root: the session's `.quota/ID`, held.
                        if lasting_root {
                            private_dir(&root.join(".quota"))?;
                            fresh_dir(&quota_dir)?;
                            *self
                                .held
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                                crate::leftovers::hold(&quota_dir);
                        }
                        Ok(())
                    })
                    .map(|()| {
                        // A session's own workspace goes with it, also on a signal.
                        if !settings.shared_workspace {
                            crate::leftovers::register(&path);
                            crate::leftovers::register(&root.join(".snapshots").join(&self.id));
                            crate::leftovers::register(&root.join(".quota").join(&self.id));
                        }
                        // It has a disk quota: a tmpfs in the server's private folder, a disk
                        // image under the operator's root. The shared one is the operator's.
                        let backing = if settings.shared_workspace {
                            crate::quota::Backing::Unbounded
                        } else {
                            crate::quota::limit(
                                &path,
                                settings.workspace_max_bytes,
                                lasting_root.then_some(quota_dir.as_path()),
                            )
                        };
                        (path, backing)
                    })
                    .map_err(|e| format!("creating the workspace: {e}"))
            })
            .clone()
            .map_err(ToolError::Internal)
    }

    /// The session's snapshot store: beside the workspace, never inside it.
    pub fn snapshots(&self) -> Result<crate::snapshots::Store, ToolError> {
        let ws = self.workspace()?;
        let name = ws
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = self.shared.workspace_root().join(".snapshots").join(name);
        crate::snapshots::Store::open(&root, self.shared.config.settings.snapshots_max_bytes)
            .map_err(|e| ToolError::Internal(e.to_string()))
    }

    /// The workspace if it exists already (no creation).
    pub fn existing_workspace(&self) -> Option<PathBuf> {
        self.workspace
            .get()
            .and_then(|w| w.as_ref().ok().map(|(p, _)| p.clone()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Its prepared sandboxes first: they hold its workspace.
        self.shared.pool.forget(&self.id);
        // A session's own workspace goes with it; a shared one stays for the others.
        if !self.shared.config.settings.shared_workspace
            && let Some(Ok((path, _))) = self.workspace.get()
        {
            crate::quota::release(path);
            let root = self.shared.workspace_root();
            for dir in [
                path.clone(),
                root.join(".snapshots").join(&self.id),
                root.join(".quota").join(&self.id),
            ] {
                let _ = std::fs::remove_dir_all(&dir);
                crate::leftovers::unregister(&dir);
            }
        }
    }
}

/// Everything a tool call can use.
#[derive(Debug)]
pub struct CallContext {
    /// The session.
    pub session: Arc<Session>,
    /// Cancelled when the client cancels the call or goes away.
    pub cancel: CancellationToken,
    /// This call's id.
    pub call_id: u64,
}

impl CallContext {
    /// The shared state.
    pub fn shared(&self) -> &Shared {
        &self.session.shared
    }

    /// The jail policy for a command of this session, with a wall-time limit of `timeout_s`.
    pub fn policy(&self, timeout_s: f64) -> Result<Policy, ToolError> {
        let config = &self.shared().config;
        let mut p = config.profile.policy.clone();
        p.workspace = Some(self.session.workspace()?);
        // A private workspace is removed with its session: nothing in it runs later.
        p.protect = config.settings.lasting_workspaces();
        p.allow_protected
            .clone_from(&config.settings.allow_protected);
        p.allow_host_proc = config.settings.allow_host_proc;
        let ms = (timeout_s * 1000.0).clamp(1.0, 86_400_000.0);
        // Both values are in range: clamped to a day in milliseconds.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ms = ms as u64;
        p.limits.wall_time_ms = ms;
        p.limits.cpu_time_ms = p.limits.cpu_time_ms.min(ms.max(1000));
        Ok(p)
    }
}
