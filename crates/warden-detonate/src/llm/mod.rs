//! Full mode's model: a language model that plays a user's agent against the server, the way
//! a hijacked agent would use it. This module holds what is the model's side — the provider
//! (`openai`: any OpenAI-compatible `/v1/chat/completions` with tools; `anthropic`:
//! `/v1/messages`; `ollama`: `/api/chat`), the conversation in a provider-neutral form, the
//! budgets, and the task library ([`tasks`]). The harness runs the model's tool calls through
//! the same path as its own (`harness/agent.rs`).
//!
//! Guarantees: the API key is read from the environment at start and is never written to the
//! report, a log or an error message; every request has a timeout; a reply that cannot be
//! understood is an error of that turn, never a panic; nothing here reaches the sandbox.

pub mod tasks;
pub mod wire;

use std::time::Duration;

use serde_json::Value;

/// A provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI's chat completions with tools (OpenAI, vLLM, LM Studio, llama.cpp, Groq…).
    OpenAi,
    /// Anthropic's messages API.
    Anthropic,
    /// Ollama's chat API.
    Ollama,
}

impl Provider {
    /// The provider named `name`.
    pub fn parse(name: &str) -> Option<Provider> {
        match name {
            "openai" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            "ollama" => Some(Provider::Ollama),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Ollama => "ollama",
        }
    }

    /// Where it answers by default.
    pub fn default_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com",
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Ollama => "http://127.0.0.1:11434",
        }
    }

    /// The environment variable its key is read from by default (none for Ollama).
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::Ollama => None,
        }
    }
}

/// The model and its budgets.
#[derive(Clone)]
pub struct Settings {
    /// The wire format.
    pub provider: Provider,
    /// The model's name, as the provider knows it.
    pub model: String,
    /// The provider's base URL (no path).
    pub url: String,
    /// The API key, if any.
    pub key: Option<String>,
    /// Tool calls the model may make in all.
    pub max_calls: u32,
    /// Tokens (prompt and completion) it may use in all.
    pub max_tokens: u64,
    /// Time the whole phase may take.
    pub max_time: Duration,
    /// Time for one model request.
    pub request_timeout: Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never shown.
        f.debug_struct("Settings")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "(set)"))
            .field("max_calls", &self.max_calls)
            .field("max_tokens", &self.max_tokens)
            .field("max_time", &self.max_time)
            .finish()
    }
}

/// A tool as the client shows it to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// Its description, as listed.
    pub description: String,
    /// Its input schema, as listed.
    pub input_schema: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id for it (made up where the provider gives none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments, or the text the model wrote when that is not a JSON object.
    pub arguments: Result<serde_json::Map<String, Value>, String>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// The user's request.
    User(String),
    /// The model's reply: text and tool calls.
    Assistant {
        /// Its text.
        text: String,
        /// Its tool calls.
        calls: Vec<ToolCall>,
    },
    /// What a tool call returned (or why it was not made).
    ToolResult {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result as the model reads it.
        content: String,
    },
}

/// A model's answer to one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    /// Its text.
    pub text: String,
    /// The tool calls it asks for.
    pub calls: Vec<ToolCall>,
    /// Prompt tokens used.
    pub prompt_tokens: u64,
    /// Completion tokens used.
    pub completion_tokens: u64,
}

/// Why a model request failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The request could not be sent or timed out.
    #[error("the model could not be reached: {0}")]
    Unreachable(String),
    /// The provider answered with an error status.
    #[error("the provider answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// The answer was not in the provider's format.
    #[error("the model's answer could not be read: {0}")]
    Malformed(String),
}

impl LlmError {
    /// Whether no further request can succeed (bad key, unknown model, wrong URL).
    pub fn is_fatal(&self) -> bool {
        matches!(self, LlmError::Status { status, .. } if matches!(status, 400 | 401 | 403 | 404))
    }
}

/// The model's client.
#[derive(Debug)]
pub struct Model {
    settings: Settings,
    http: reqwest::Client,
}

/// Largest answer read from a provider.
pub const MAX_BODY: usize = 8 << 20;

/// The response's body, at most [`MAX_BODY`] bytes (a longer one is an error, not a hang).
async fn read_body(mut resp: reqwest::Response) -> Result<String, LlmError> {
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?
    {
        if out.len() + chunk.len() > MAX_BODY {
            return Err(LlmError::Malformed(format!(
                "the answer is longer than {MAX_BODY} bytes"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `url` as the report shows it: no user, password, query or fragment.
pub use warden_scan::report::shown_url;

/// Whether `url` names this machine (loopback), where plain http cannot leak a key.
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.split(']').next())
        .unwrap_or_else(|| host.split(':').next().unwrap_or(host));
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The system prompt: the model is a user's agent with these tools.
pub const SYSTEM: &str = "You are an AI agent working for a user on their computer. You have the \
tools listed. Use them to do what the user asks: call a tool whenever it helps, read its result, \
and continue until the request is done. Answer briefly when you are finished.";

impl Model {
    /// A client for `settings`.
    pub fn new(settings: Settings) -> Result<Model, LlmError> {
        // No redirects: a redirect would carry the key (Anthropic's `x-api-key` is not a
        // header reqwest strips across hosts) wherever the endpoint points.
        let http = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| LlmError::Unreachable(e.to_string()))?;
        Ok(Model { settings, http })
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// One request: the conversation so far and the tools; the model's reply.
    pub async fn chat(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Reply, LlmError> {
        let s = &self.settings;
        let (path, body) = wire::request(s.provider, &s.model, SYSTEM, messages, tools);
        let url = format!("{}{path}", s.url.trim_end_matches('/'));
        let mut req = self.http.post(&url).json(&body);
        match (s.provider, &s.key) {
            (Provider::Anthropic, Some(k)) => {
                req = req
                    .header("x-api-key", k)
                    .header("anthropic-version", "2023-06-01");
            }
            (Provider::Anthropic, None) => req = req.header("anthropic-version", "2023-06-01"),
            (_, Some(k)) => req = req.bearer_auth(k),
            (_, None) => {}
        }
        // Errors never carry the request (and so never the key).
        let resp = req
            .send()
            .await
            .map_err(|e| LlmError::Unreachable(e.without_url().to_string()))?;
        let status = resp.status().as_u16();
        let text = read_body(resp).await?;
        if !(200..300).contains(&status) {
            // An error body may echo the request's headers: never the key.
            let mut shown: String = text.chars().take(300).collect();
            if let Some(k) = s.key.as_deref().filter(|k| !k.is_empty()) {
                shown = shown.replace(k, "(key)");
            }
            return Err(LlmError::Status {
                status,
                body: crate::secrets::redacted(&shown),
            });
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| LlmError::Malformed(e.to_string()))?;
        wire::reply(s.provider, &v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials_and_loopback_is_told_apart() {
        assert_eq!(
            shown_url("https://user:pw@api.example.test/v1?api-key=x#f"),
            "https://api.example.test/v1"
        );
        assert_eq!(shown_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert!(is_loopback("http://127.0.0.1:8080"));
        assert!(is_loopback("http://[::1]:11434/"));
        assert!(is_loopback("http://localhost:1234"));
        assert!(!is_loopback("http://10.0.0.5:8000"));
        assert!(!is_loopback("http://127.0.0.1.evil.test/"));
    }
}
