//! The `[web]` table: what the web tools may reach and how much they may bring back.
//!
//! `allow` is the only way the web tools reach anything: host names with optional ports, in
//! `warden run --egress`'s syntax (`docs.rs` is port 443, `*.python.org` every name below it,
//! `svc.test:8080`). Without it, `web_fetch`, `web_scrape` and `web_browse` are not listed;
//! without `[web.search]`, `web_search` is not. A profile made only of web tools with
//! nothing configured is an error at start rather than a server with no tools.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Profile};
use crate::tools::WEB_TOOLS;

/// Largest `max_bytes` a configuration may allow per call.
const MAX_BODY_LIMIT: u64 = 256 << 20;

/// The web tools' settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebFile {
    /// Host names (optionally `:PORT`, default 443) the web tools and their sandboxes may reach.
    pub allow: Vec<String>,
    /// Bytes of a response body read when a call does not say (decompressed).
    pub default_bytes: u64,
    /// Largest `max_bytes` a call may ask for.
    pub max_bytes: u64,
    /// The browser of `web_browse` (default: `chromium-headless-shell`, else `chromium`, in the
    /// system's PATH directories).
    pub browser: Option<PathBuf>,
    /// Memory of a `web_browse` sandbox (a browser needs more than a command).
    pub browser_memory_bytes: u64,
    /// Processes of a `web_browse` sandbox.
    pub browser_pids: u32,
    /// The search backend of `web_search`.
    pub search: Option<SearchFile>,
}

impl Default for WebFile {
    fn default() -> Self {
        WebFile {
            allow: Vec::new(),
            default_bytes: 1 << 20,
            max_bytes: 10 << 20,
            browser: None,
            browser_memory_bytes: 2 << 30,
            browser_pids: 512,
            search: None,
        }
    }
}

/// A search backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchFile {
    /// Which API.
    pub backend: Backend,
    /// The API's address: a SearXNG instance's base URL (required), or the Brave endpoint
    /// (default `https://api.search.brave.com/res/v1/web/search`).
    pub url: Option<String>,
    /// The environment variable holding the API key (Brave: required; never written in the
    /// file itself).
    pub api_key_env: Option<String>,
}

/// Search APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// SearXNG's JSON API (`/search?q=…&format=json`).
    Searxng,
    /// The Brave Search API (`X-Subscription-Token`).
    Brave,
}

/// The Brave Search API's endpoint.
pub const BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";

impl SearchFile {
    /// The endpoint to query.
    pub fn endpoint(&self) -> Result<url::Url, String> {
        let text = match (self.backend, &self.url) {
            (_, Some(u)) => u.as_str(),
            (Backend::Brave, None) => BRAVE_URL,
            (Backend::Searxng, None) => {
                return Err("a SearXNG backend needs `url` (its base URL)".into());
            }
        };
        let url = url::Url::parse(text).map_err(|e| format!("url {text:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(format!("url {text:?} must be an http or https URL"));
        }
        Ok(url)
    }
}

impl WebFile {
    /// Whether the page tools (`web_fetch`, `web_scrape`, `web_browse`) have anywhere to go.
    pub fn pages(&self) -> bool {
        !self.allow.is_empty()
    }
}

/// Check the table against the profile in force.
pub(super) fn validate(w: &WebFile, profile: &Profile) -> Result<(), ConfigError> {
    let bad = |m: String| Err(ConfigError::Web(m));
    if w.allow.len() > 64 {
        return bad("allow: at most 64 entries".into());
    }
    for a in &w.allow {
        if !warden_trace::hosts::valid_pattern(a) {
            return bad(format!(
                "allow entry {a:?} must be a host name such as docs.rs, *.python.org or \
                 svc.example:8080 (addresses are never allowed)"
            ));
        }
    }
    if !(1024..=MAX_BODY_LIMIT).contains(&w.max_bytes) {
        return bad(format!(
            "max_bytes must be between 1024 and {MAX_BODY_LIMIT}"
        ));
    }
    if !(1..=w.max_bytes).contains(&w.default_bytes) {
        return bad("default_bytes must be between 1 and max_bytes".into());
    }
    if !(256 << 20..=64 << 30).contains(&w.browser_memory_bytes) {
        return bad("browser_memory_bytes must be between 256 MiB and 64 GiB".into());
    }
    if !(16..=65_536).contains(&w.browser_pids) {
        return bad("browser_pids must be between 16 and 65536".into());
    }
    if let Some(s) = &w.search {
        s.endpoint().map_err(ConfigError::Web)?;
        match (&s.api_key_env, s.backend) {
            (None, Backend::Brave) => {
                return bad("search: the Brave backend needs `api_key_env`".into());
            }
            (Some(var), _) if std::env::var_os(var).is_none() => {
                return bad(format!(
                    "search: the variable {var:?} (api_key_env) is not set"
                ));
            }
            _ => {}
        }
    }
    let only_web = !profile.tools.is_empty() && profile.tools.iter().all(|t| WEB_TOOLS.contains(t));
    if only_web && !w.pages() && w.search.is_none() {
        return bad(format!(
            "profile {:?} offers only web tools but nothing is configured for them \
             (add `[web] allow = [\"docs.rs\"]` or a `[web.search]` backend)",
            profile.name
        ));
    }
    Ok(())
}
