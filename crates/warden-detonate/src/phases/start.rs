//! Phase three: how the server starts and under which policy — the start command (a fetched
//! package's entry once installed, the operator's `--mcp-command`, or a local target's), the
//! source folder mounted read-only at its own path, the workspace, the environment, and the
//! installations of user-installed runtimes (pyenv, nvm, conda, a venv's base interpreter…)
//! that the command needs and the jail does not show (see [`warden_jail::runtime`]).
//!
//! Guarantees: every bind added here is read-only and recorded in the policy (so in the
//! report's `sandbox.binds`); a home folder is never bound whole. A start command that cannot
//! exist is an [`Inconclusive`], not an error, once an install ran (its events still count).

use std::path::{Path, PathBuf};

use anyhow::Result;
use warden_jail::{Bind, Policy};

use super::install::Install;
use super::source::Source;
use super::verdict::{Inconclusive, Stage};
use crate::target::{self, Resolved};
use crate::{Options, phases};

/// The server's start, planned.
#[derive(Debug)]
pub struct Start {
    /// The command and how the report names the target.
    pub resolved: Resolved,
    /// The policy the server runs under.
    pub policy: Policy,
    /// Why it cannot be started at all, if it cannot.
    pub blocked: Option<Inconclusive>,
    /// The installations bound for the start command's program (see `bind_runtime`).
    pub runtime: Vec<PathBuf>,
}

/// Plan the server's start after `install`.
pub fn start(options: &Options, source: &Source, install: &Install) -> Result<Start> {
    let mut policy = phases::base_policy(options.budget, options);
    let mut blocked = install.failure.clone();
    let resolved = match source {
        Source::Fetched(f) => {
            policy.workspace = Some(f.workspace.path().to_path_buf());
            // Warden's own package folder, removed after the run: nothing in it runs later.
            policy.protect = false;
            // The package's programs are on the server's PATH.
            let path = policy.env.get("PATH").cloned().unwrap_or_default();
            policy.env.insert(
                "PATH".into(),
                format!("/workspace/venv/bin:/workspace/node_modules/.bin:{path}"),
            );
            let display = options.target.clone().unwrap_or_default();
            if options.command.is_empty() {
                let argv = match (&blocked, f.entry.argv(f.workspace.path())) {
                    (None, Ok(mut argv)) => {
                        argv.extend(options.server_args.iter().cloned());
                        argv
                    }
                    (Some(_), _) => Vec::new(),
                    (None, Err(e)) if install.ran => {
                        blocked = Some(Inconclusive::new(Stage::Install, format!("{e:#}")));
                        Vec::new()
                    }
                    (None, Err(e)) => return Err(e),
                };
                Resolved {
                    display,
                    argv,
                    source: None,
                    location: f.location.clone(),
                    lone_file: None,
                }
            } else {
                // The package is installed; the operator says how to start it.
                let r = target::resolve(None, &options.command)?;
                Resolved {
                    display,
                    location: f.location.clone().or(r.location),
                    ..r
                }
            }
        }
        Source::Local(r) => {
            policy.workspace.clone_from(&options.workspace);
            r.clone()
        }
    };
    if let Some(src) = &resolved.source {
        policy.binds.push(Bind {
            source: src.clone(),
            target: Some(target::mount_point(src)),
            writable: false,
        });
    }
    for (k, v) in &options.env {
        policy.env.insert(k.clone(), v.clone());
    }
    policy.pcap.clone_from(&options.pcap);
    let mut resolved = resolved;
    let mut runtime = Vec::new();
    if blocked.is_none() {
        match bind_runtime(&mut resolved.argv, &mut policy, options) {
            Ok(dirs) => runtime = dirs,
            Err(why) => blocked = Some(Inconclusive::new(Stage::Start, why)),
        }
    }
    Ok(Start {
        resolved,
        policy,
        blocked,
        runtime,
    })
}

/// Bind, read-only at their own paths, the installations that the start command's program
/// needs and the jail does not show (a pyenv or nvm interpreter, a venv and its base, a
/// Node copied into `/opt`…); a bare name found only on the host's `PATH` is made absolute.
fn bind_runtime(
    argv: &mut [String],
    policy: &mut Policy,
    options: &Options,
) -> Result<Vec<PathBuf>, String> {
    let Some(program) = argv.first().cloned() else {
        return Ok(Vec::new());
    };
    let shown: Vec<PathBuf> = policy
        .system_paths
        .iter()
        .cloned()
        .chain(policy.binds.iter().map(|b| b.source.clone()))
        .chain([
            PathBuf::from(target::SOURCE_MOUNT),
            PathBuf::from(warden_jail::policy::WORKSPACE_MOUNT),
        ])
        .collect();
    let visible = |p: &Path| shown.iter().any(|s| p.starts_with(s));
    let host = if program.contains('/') {
        PathBuf::from(&program)
    } else {
        // A bare name: the jail's PATH finds it, unless only the host's does.
        let in_jail = policy.env.get("PATH").is_some_and(|path| {
            path.split(':').any(|d| {
                let dir = Path::new(d);
                let on_host = match (
                    dir.strip_prefix(warden_jail::policy::WORKSPACE_MOUNT),
                    &policy.workspace,
                ) {
                    (Ok(rest), Some(ws)) => ws.join(rest),
                    (Ok(_), None) => return false,
                    (Err(_), _) => dir.to_path_buf(),
                };
                visible(dir) && on_host.join(&program).exists()
            })
        });
        match (in_jail, warden_jail::runtime::on_host(&program)) {
            (false, Some(found)) => found,
            _ => return Ok(Vec::new()),
        }
    };
    if visible(&host) || !host.is_absolute() || !host.exists() {
        return Ok(Vec::new());
    }
    let dirs = warden_jail::runtime::installations(&host, &visible)?;
    if let Some(owned) = dirs.iter().find(|d| target::mount_point(d) != **d) {
        return Err(format!(
            "{} needs {}, a place the sandbox keeps for itself: install it elsewhere",
            host.display(),
            owned.display()
        ));
    }
    for dir in &dirs {
        super::progress(
            options,
            &format!(
                "binding {} read-only (the start command needs it)",
                dir.display()
            ),
        );
        policy.binds.push(Bind {
            source: dir.clone(),
            target: Some(dir.clone()),
            writable: false,
        });
    }
    argv[0] = host.display().to_string();
    Ok(dirs)
}
