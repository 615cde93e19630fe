//! Probe mode: a remote MCP server Warden cannot sandbox (`--mcp-url`). The harness speaks
//! Streamable HTTP to it from the host, with the operator's headers and bearer token, and
//! judges what can be judged from the outside: metadata, schema-synthesized benign calls, what
//! the model would read. It sends no adversarial payloads unless the operator allows it (never
//! attack someone else's server by accident), and since no behavioural evidence can exist the
//! verdict is never PASS (see [`crate::probe`]).
//!
//! TLS: rustls with the ring provider and the platform's roots; redirects only within the
//! same origin (rmcp's policy), so a token is never sent to another host.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The remote server and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// Its MCP endpoint (`https://host/mcp`).
    pub url: String,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// A bearer token (sent as `Authorization: Bearer …`).
    pub bearer: Option<String>,
}

impl Remote {
    /// Check the URL and the headers: `http` or `https`, no credentials in the URL, header
    /// names and values that HTTP accepts.
    pub fn check(&self) -> Result<()> {
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            bail!(
                "--mcp-url {}: an http or https URL",
                crate::llm::shown_url(&self.url)
            );
        }
        let authority = self
            .url
            .split("://")
            .nth(1)
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("");
        if authority.contains('@') {
            bail!("--mcp-url: give credentials with --header or --bearer-env, not in the URL");
        }
        for (k, v) in &self.headers {
            http::HeaderName::from_bytes(k.as_bytes())
                .with_context(|| format!("--header {k:?}: not a header name"))?;
            http::HeaderValue::from_str(v)
                .with_context(|| format!("--header {k}: not a header value"))?;
        }
        Ok(())
    }

    /// The transport's configuration (`StreamableHttpClientTransport::from_config` makes the
    /// transport, inside the runtime).
    pub fn config(&self) -> Result<StreamableHttpClientTransportConfig> {
        let mut headers = HashMap::new();
        for (k, v) in &self.headers {
            headers.insert(
                http::HeaderName::from_bytes(k.as_bytes())?,
                http::HeaderValue::from_str(v)?,
            );
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
            .custom_headers(headers);
        if let Some(token) = &self.bearer {
            config = config.auth_header(token.clone());
        }
        Ok(config)
    }
}
