//! `warden serve`: configuration in, MCP server out. Logs go to stderr (stdout is the protocol
//! in stdio mode).

use std::process::ExitCode;

use anyhow::{Context, Result};
use warden_serve::{ConfigFile, HttpOptions};

use crate::cli::ServeArgs;

/// Serve until the client (stdio) or an interrupt (HTTP) ends it.
pub fn main(args: ServeArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: ServeArgs) -> Result<()> {
    let file = match &args.config {
        Some(path) => ConfigFile::from_file(path)?,
        None => ConfigFile::default(),
    };
    let config = file.validate(args.profile.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match args.http {
            Some(addr) => {
                warden_serve::serve_http(config, HttpOptions { addr, helper: None }).await?;
            }
            None => warden_serve::serve_stdio(config, None).await?,
        }
        Ok(())
    })
}
