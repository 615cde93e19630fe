//! The legacy HTTP+SSE transport (MCP 2024-11-05), client side: `GET /sse` opens an event
//! stream whose first `endpoint` event names where to POST messages; every answer comes back
//! as a `message` event on that stream. rmcp has no client for it, so this is one, as an rmcp
//! [`Transport`].
//!
//! Bounded: an event larger than [`MAX_EVENT`] ends the stream; the endpoint must be on the
//! same host and port as the stream (a server cannot send the harness elsewhere); every POST
//! has a timeout. A stream that ends is the end of the session, as a closed pipe is for stdio.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, watch};

/// Largest event read from the stream.
pub const MAX_EVENT: usize = 8 << 20;

/// Why the SSE transport failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The stream or a POST failed.
    #[error("{0}")]
    Http(String),
    /// The server never said where to POST (no `endpoint` event).
    #[error("the server sent no endpoint event")]
    NoEndpoint,
}

/// The client side of one SSE session.
#[derive(Debug)]
pub struct SseClient {
    http: reqwest::Client,
    endpoint: watch::Receiver<Option<String>>,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

impl SseClient {
    /// Open the stream at `url` (`http://HOST:PORT/sse`); must be called inside a runtime.
    pub fn connect(url: &str) -> SseClient {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let (endpoint_tx, endpoint) = watch::channel(None);
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_stream(http.clone(), url.to_owned(), endpoint_tx, tx));
        SseClient {
            http,
            endpoint,
            incoming,
            reader,
        }
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The origin (`scheme://host:port`) of `url`.
fn origin(url: &str) -> &str {
    let rest = url.split_once("://").map_or(0, |(s, _)| s.len() + 3);
    let end = url[rest..].find('/').map_or(url.len(), |i| rest + i);
    &url[..end]
}

async fn read_stream(
    http: reqwest::Client,
    url: String,
    endpoint: watch::Sender<Option<String>>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) {
    let Ok(mut resp) = http
        .get(&url)
        .header("Accept", "text/event-stream")
        .send()
        .await
    else {
        return;
    };
    if !resp.status().is_success() {
        return;
    }
    let mut buf: Vec<u8> = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.extend_from_slice(&chunk);
        // Events end with a blank line (LF LF, or CR LF CR LF).
        while let Some((end, skip)) = event_end(&buf) {
            let raw: Vec<u8> = buf.drain(..end + skip).collect();
            let (kind, data) = parse_event(&String::from_utf8_lossy(&raw[..end]));
            match kind.as_str() {
                "endpoint" => {
                    let target = if data.starts_with('/') {
                        format!("{}{}", origin(&url), data)
                    } else {
                        data
                    };
                    // Only where the stream came from: never another host.
                    if origin(&target) == origin(&url) {
                        let _ = endpoint.send(Some(target));
                    }
                }
                "message" | "" => {
                    if let Ok(msg) = serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data)
                        && tx.send(msg).await.is_err()
                    {
                        return;
                    }
                }
                _ => {}
            }
        }
        if buf.len() > MAX_EVENT {
            return;
        }
    }
}

fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// An event's type and its data lines joined.
fn parse_event(text: &str) -> (String, String) {
    let mut kind = String::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            kind = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    (kind, data.join("\n"))
}

impl Transport<RoleClient> for SseClient {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let http = self.http.clone();
        let mut endpoint = self.endpoint.clone();
        async move {
            let target = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    if let Some(t) = endpoint.borrow().clone() {
                        return Some(t);
                    }
                    if endpoint.changed().await.is_err() {
                        return None;
                    }
                }
            })
            .await
            .ok()
            .flatten()
            .ok_or(SseError::NoEndpoint)?;
            let resp = http
                .post(&target)
                .timeout(Duration::from_secs(60))
                .json(&item)
                .send()
                .await
                .map_err(|e| SseError::Http(e.without_url().to_string()))?;
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(SseError::Http(format!("POST answered {}", resp.status())))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_origins() {
        assert_eq!(
            parse_event("event: endpoint\ndata: /messages/?session_id=1"),
            ("endpoint".into(), "/messages/?session_id=1".into())
        );
        assert_eq!(
            parse_event("data: a\ndata: b"),
            (String::new(), "a\nb".into())
        );
        assert_eq!(origin("http://127.0.0.1:9/sse"), "http://127.0.0.1:9");
        assert_eq!(origin("http://h:1"), "http://h:1");
        assert_eq!(event_end(b"a\n\nb"), Some((1, 2)));
        assert_eq!(event_end(b"a\r\n\r\nb"), Some((1, 4)));
        assert_eq!(event_end(b"a\n"), None);
    }
}
