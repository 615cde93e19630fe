//! Who may open a new HTTP session: at most `max_sessions` open at once (503 with
//! `Retry-After` past it) and at most `sessions_per_minute` new ones per client address (429).
//! A request opens a session when it is a POST without an `Mcp-Session-Id` header (an
//! `initialize`); every other request passes untouched. Answers are JSON-RPC errors with
//! `id: null`, so an MCP client shows a reason.
//!
//! Guarantees: the counts are the session manager's own (sessions close on `DELETE`, at idle
//! timeout or when their worker ends), and the per-client record is bounded (old entries and
//! addresses are forgotten).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// Client addresses remembered at once (the oldest go first past this).
const MAX_CLIENTS: usize = 4096;

/// The admission rule of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    per_minute: u32,
    recent: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

fn refuse(status: StatusCode, message: &str, retry_s: u64) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": null,
        "error": { "code": -32000, "message": message },
    });
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::RETRY_AFTER, retry_s.to_string()),
        ],
        body.to_string(),
    )
        .into_response()
}

impl Admission {
    pub(crate) fn new(
        sessions: Arc<LocalSessionManager>,
        max_sessions: usize,
        per_minute: u32,
    ) -> Admission {
        Admission {
            sessions,
            max_sessions,
            per_minute,
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `client` may open one more session now (and count it if so).
    fn rate_ok(&self, client: IpAddr, now: Instant) -> bool {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let window = Duration::from_secs(60);
        if recent.len() >= MAX_CLIENTS && !recent.contains_key(&client) {
            recent.retain(|_, times| times.back().is_some_and(|t| now - *t < window));
            if recent.len() >= MAX_CLIENTS {
                return false;
            }
        }
        let times = recent.entry(client).or_default();
        while times.front().is_some_and(|t| now - *t >= window) {
            times.pop_front();
        }
        if times.len() >= self.per_minute as usize {
            return false;
        }
        times.push_back(now);
        true
    }

    /// The middleware.
    pub(crate) async fn check(self: Arc<Self>, req: Request, next: Next) -> Response {
        let opens = req.method() == axum::http::Method::POST
            && !req.headers().contains_key("mcp-session-id");
        if opens {
            let open = self.sessions.sessions.read().await.len();
            if open >= self.max_sessions {
                return refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the server has {open} sessions open, its maximum; try again later"),
                    5,
                );
            }
            let client = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
            if !self.rate_ok(client, Instant::now()) {
                return refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!(
                        "more than {} new sessions a minute from this address",
                        self.per_minute
                    ),
                    60,
                );
            }
        }
        next.run(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_gets_its_rate_and_old_creations_expire() {
        let a = Admission::new(Arc::new(LocalSessionManager::default()), 10, 3);
        let (one, two) = (IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 2]));
        let t = Instant::now();
        assert!(a.rate_ok(one, t) && a.rate_ok(one, t) && a.rate_ok(one, t));
        assert!(!a.rate_ok(one, t), "the fourth in a minute");
        assert!(a.rate_ok(two, t), "another client has its own budget");
        assert!(
            a.rate_ok(one, t + Duration::from_secs(61)),
            "a minute later"
        );
    }
}
