//! Phase two: the package's install lifecycle, in the sandbox with tracing and decoys on, every
//! event in the `install` window (see [`crate::harness::install`]). A fetched package installs
//! into its workspace; a local project runs its own hooks and build on a read-only mount.
//!
//! Guarantees: package code never runs outside the jail; an install that could not run, or
//! whose failure leaves nothing to start, is an [`Inconclusive`] in the result, with the
//! events it did produce kept for the report.

use anyhow::Result;
use warden_events::Event;
use warden_jail::{Bind, Jail};

use super::source::Source;
use super::verdict::{Inconclusive, Stage};
use crate::fetch::project;
use crate::{Options, harness, target};

/// What the install phase did.
#[derive(Debug, Default)]
pub struct Install {
    /// Its events (all in the `install` window).
    pub events: Vec<Event>,
    /// Its exit code (`None` when nothing ran, or it was killed).
    pub exit_code: Option<i32>,
    /// Whether an install ran at all.
    pub ran: bool,
    /// Why the server cannot be judged after it, if it cannot.
    pub failure: Option<Inconclusive>,
}

/// Run the target's install lifecycle, if it has one.
pub fn install(
    jail: &Jail,
    options: &Options,
    source: &Source,
    browser: Option<&super::browser::Offered>,
) -> Result<Install> {
    let mut policy = super::base_policy(options.install_budget, options);
    if let Some(b) = browser {
        b.quiet_downloads(&mut policy);
    }
    let (command, hooks, needs_success) = match source {
        Source::Fetched(f) => {
            let Some(cmd) = &f.install else {
                return Ok(Install::default());
            };
            policy.workspace = Some(f.workspace.path().to_path_buf());
            policy.protect = false;
            policy.egress.clone_from(&f.egress);
            super::progress(options, "installing in the sandbox");
            (cmd.clone(), f.hooks.clone(), f.entry.needs_venv())
        }
        Source::Local(resolved) => {
            let Some(src) = &resolved.source else {
                return Ok(Install::default());
            };
            // A local package's own install lifecycle runs too, as npm or pip would run it.
            let inside = target::mount_point(src);
            let plan = project::plan(src, &inside, project::Mode::Local);
            let Some(cmd) = plan.command else {
                return Ok(Install::default());
            };
            policy.egress = plan.egress;
            policy.binds.push(Bind {
                source: src.clone(),
                target: Some(inside),
                writable: false,
            });
            super::progress(options, "running its install lifecycle in the sandbox");
            (cmd, plan.hooks, false)
        }
    };
    let done = harness::install(jail, &policy, &command, &hooks, options.install_budget)?;
    let failure = match (&done.sandbox_failure, done.exit_code) {
        (Some(why), _) => Some(Inconclusive::new(
            Stage::Sandbox,
            format!("the install's sandbox could not be set up: {why}"),
        )),
        (None, code) if code != Some(0) && needs_success => Some(
            Inconclusive::new(
                Stage::Install,
                format!(
                    "the install failed in the sandbox ({})",
                    code.map_or("killed".into(), |c| format!("exit code {c}"))
                ),
            )
            .with_stderr(&done.stderr),
        ),
        _ => None,
    };
    Ok(Install {
        events: done.events,
        exit_code: done.exit_code,
        ran: true,
        failure,
    })
}
