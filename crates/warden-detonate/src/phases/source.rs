//! Phase one: what to detonate. A registry or GitHub target is fetched (without running its
//! code: see [`crate::fetch`]); a local target or a start command is resolved to a command and
//! the source folder the jail will show (see [`crate::target`]).

use anyhow::Result;

use crate::Options;
use crate::fetch::{self, Fetched};
use crate::target::{self, Resolved};

/// The target, fetched or resolved.
#[derive(Debug)]
pub enum Source {
    /// A package fetched into its own workspace; its start command is known once installed.
    Fetched(Fetched),
    /// A local file, folder or start command.
    Local(Resolved),
}

/// Fetch or resolve `options`' target. Errors are the operator's (a bad spec, a registry that
/// cannot be reached, nothing to detonate): no sandbox ran yet.
pub fn source(options: &Options) -> Result<Source> {
    if let Some(t) = &options.target
        && let Some(f) = fetch::fetch(t)?
    {
        return Ok(Source::Fetched(f));
    }
    target::resolve(options.target.as_deref(), &options.command).map(Source::Local)
}
