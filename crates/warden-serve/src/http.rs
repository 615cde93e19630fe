//! Streamable HTTP at `/mcp` (rmcp's service behind axum), with the checks rmcp leaves to us:
//! - a non-loopback bind is refused unless a bearer token is configured, and with a token every
//!   request must carry `Authorization: Bearer <token>` (compared in constant time);
//! - `Origin` is always validated: only the server's own loopback origins and the configured
//!   ones pass, so a web page elsewhere cannot drive the server through the user's browser (DNS
//!   rebinding); requests without `Origin` (non-browser clients) pass. rmcp also checks `Host`
//!   against loopback names;
//! - new sessions are admitted by [`crate::admission`] (a cap on open sessions, a rate per
//!   client), and idle ones close after `idle_timeout_s`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::ServeError;
use crate::admission::Admission;
use crate::config::Config;
use crate::server::WardenServer;
use crate::state::Shared;

/// How to listen.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address.
    pub addr: SocketAddr,
    /// The `warden` executable for the jail (default: the current one).
    pub helper: Option<PathBuf>,
    /// Cancelled to shut down gracefully (besides Ctrl-C).
    pub shutdown: tokio_util::sync::CancellationToken,
}

fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn require_token(token: Arc<String>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same_bytes(t.as_bytes(), token.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response()
    }
}

pub(crate) async fn serve(config: Config, opts: HttpOptions) -> Result<(), ServeError> {
    let addr = opts.addr;
    let token = config
        .settings
        .http
        .bearer_token
        .clone()
        .filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(ServeError::PublicWithoutToken(addr));
    }
    let hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    // The server's own loopback origins (nothing else is served there), then the operator's.
    let port = addr.port();
    let mut origins: Vec<String> = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|h| format!("http://{h}:{port}"))
        .collect();
    origins.extend(config.settings.http.allowed_origins.iter().cloned());
    let mut http_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    if !addr.ip().is_loopback() {
        // Reached under any name; the bearer token (required here) is what keeps browsers out.
        http_config = http_config.disable_allowed_hosts();
    }
    let shared = Shared::new(config, opts.helper)?;
    let audit_owner = shared.clone();
    let http = shared.config.settings.http.clone();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive =
        Some(std::time::Duration::from_secs(http.idle_timeout_s.max(1)));
    let sessions = Arc::new(sessions);
    let admission = Arc::new(Admission::new(
        sessions.clone(),
        http.max_sessions.max(1),
        http.sessions_per_minute.max(1),
    ));
    let service = StreamableHttpService::new(
        // HTTP sessions end through rmcp, which cancels their calls itself.
        move || {
            let closed = tokio_util::sync::CancellationToken::new();
            Ok(WardenServer::new(shared.clone(), closed))
        },
        sessions,
        http_config,
    );
    let mut app =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |req, next| {
                admission.clone().check(req, next)
            }));
    if let Some(t) = token {
        let t = Arc::new(t);
        app = app.layer(axum::middleware::from_fn(move |req, next| {
            require_token(t.clone(), req, next)
        }));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Http { addr, source })?;
    tracing::info!(%addr, "serving MCP over HTTP at /mcp");
    let shutdown = opts.shutdown.clone();
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = shutdown.cancelled() => {}
        }
    })
    .await
    .map_err(|source| ServeError::Http { addr, source })?;
    audit_owner.audit.close();
    Ok(())
}
