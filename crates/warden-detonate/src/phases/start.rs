//! Phase three: how the server starts and under which policy — the start command (a fetched
//! package's entry once installed, the operator's `--mcp-command`, or a local target's), the
//! source folder mounted read-only at its own path, the workspace, the environment, and the
//! installations of user-installed runtimes (pyenv, nvm, conda, a venv's base interpreter…)
//! that the command needs and the jail does not show (see [`warden_jail::runtime`]).
//!
//! Guarantees: every bind added here is read-only and recorded in the policy (so in the
//! report's `sandbox.binds`); a home folder is never bound whole. A start command that cannot
//! exist is an [`Inconclusive`], not an error, once an install ran (its events still count).

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
}

/// Plan the server's start after `install`.
pub fn start(options: &Options, source: &Source, install: &Install) -> Result<Start> {
    let mut policy = phases::base_policy(options.budget);
    let mut blocked = install.failure.clone();
    let resolved = match source {
        Source::Fetched(f) => {
            policy.workspace = Some(f.workspace.path().to_path_buf());
            // The package's programs are on the server's PATH.
            let path = policy.env.get("PATH").cloned().unwrap_or_default();
            policy.env.insert(
                "PATH".into(),
                format!("/workspace/venv/bin:/workspace/node_modules/.bin:{path}"),
            );
            let display = options.target.clone().unwrap_or_default();
            if options.command.is_empty() {
                let argv = match (&blocked, f.entry.argv(f.workspace.path())) {
                    (None, Ok(argv)) => argv,
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
    Ok(Start {
        resolved,
        policy,
        blocked,
    })
}
