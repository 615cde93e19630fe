//! `warden serve`: an MCP server whose tools run inside Warden's sandbox.
//!
//! Two transports: stdio (one session) and Streamable HTTP at `/mcp` (one session per MCP
//! session, bound to loopback unless a bearer token is configured, foreign `Origin`s refused).
//! Every call is validated against its tool's input schema, limited in time and size, run in
//! the jail where it executes anything, and written to the audit log.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod admission;
pub mod audit;
pub mod config;
mod http;
pub mod leftovers;
pub mod metrics;
pub mod pool;
mod quota;
pub mod server;
pub mod snapshots;
pub mod state;
mod stdio;
mod stdio_direct;
pub mod tools;
mod wsfs;

use std::net::SocketAddr;
use std::path::PathBuf;

use rmcp::ServiceExt;
use thiserror::Error;

pub use config::{Config, ConfigError, ConfigFile};
pub use http::HttpOptions;
pub use server::WardenServer;
pub use state::{Shared, StartError};

/// Largest JSON-RPC message accepted on stdio (rmcp's reader is bounded by this).
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// Errors running the server.
#[derive(Debug, Error)]
pub enum ServeError {
    /// Setting up failed.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The MCP session could not start (the client never initialised, for instance).
    #[error("MCP session: {0}")]
    Session(String),
    /// The HTTP listener failed.
    #[error("HTTP on {addr}: {source}")]
    Http {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Refused to listen: a non-loopback address needs a bearer token.
    #[error(
        "refusing to listen on non-loopback {0} without a bearer token (set [http] bearer_token)"
    )]
    PublicWithoutToken(SocketAddr),
}

/// Serve one session over stdin/stdout until the client closes it.
pub async fn serve_stdio(config: Config, helper: Option<PathBuf>) -> Result<(), ServeError> {
    let shared = Shared::new(config, helper)?;
    // Cancelled at end of input, so calls of a vanished client stop at once (rmcp itself
    // waits a grace period before cancelling them).
    let closed = tokio_util::sync::CancellationToken::new();
    let (input, output, writer) = stdio::frame(
        stdio_direct::input(),
        stdio_direct::output(),
        MAX_MESSAGE_BYTES,
        closed.clone(),
    );
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(input, output)
        .with_max_line_length(MAX_MESSAGE_BYTES);
    let running = WardenServer::new(shared.clone(), closed)
        .serve(transport)
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    let _ = running.waiting().await;
    // Every answer written before exiting.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), writer).await;
    shared.audit.close();
    Ok(())
}

/// Serve Streamable HTTP on `addr` until interrupted.
pub async fn serve_http(config: Config, opts: HttpOptions) -> Result<(), ServeError> {
    http::serve(config, opts).await
}
