//! `warden serve`: configuration in, MCP server out. Logs go to stderr (stdout is the protocol
//! in stdio mode).

use std::process::ExitCode;

use anyhow::{Context, Result};
use warden_serve::{ConfigFile, HttpOptions};

use crate::cli::ServeArgs;

/// Serve until the client (stdio) or an interrupt (HTTP) ends it; SIGINT, SIGTERM and SIGHUP
/// end it too, with the session data removed as at the end of a session (exit 128+N).
pub fn main(args: ServeArgs) -> ExitCode {
    let shutdown = tokio_util::sync::CancellationToken::new();
    clean_up_on_signals(shutdown.clone(), args.http.is_some());
    let result = run(args, shutdown);
    let signal = SIGNALLED.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 {
        // Ended by a signal, gracefully: nothing of the session stays either way.
        warden_serve::leftovers::remove_all();
        return ExitCode::from(u8::try_from(128 + signal).unwrap_or(1));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The signal that ended the server, once one has.
static SIGNALLED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Time an HTTP server is given to finish its requests after a termination signal.
const GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// On SIGINT, SIGTERM or SIGHUP: an HTTP server shuts down gracefully (within [`GRACE`]); then
/// the server's state folder, audit log and session workspaces are removed and the process
/// exits 128+N (the sandboxes die with it, through their lifelines).
fn clean_up_on_signals(shutdown: tokio_util::sync::CancellationToken, http: bool) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            SIGNALLED.store(sig, std::sync::atomic::Ordering::SeqCst);
            if http {
                shutdown.cancel();
                std::thread::sleep(GRACE);
            }
            warden_serve::leftovers::remove_all();
            std::process::exit(128 + sig);
        }
    });
}

fn run(args: ServeArgs, shutdown: tokio_util::sync::CancellationToken) -> Result<()> {
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
                let options = HttpOptions {
                    addr,
                    helper: None,
                    shutdown,
                };
                warden_serve::serve_http(config, options).await?;
            }
            None => warden_serve::serve_stdio(config, None).await?,
        }
        Ok(())
    })
}
