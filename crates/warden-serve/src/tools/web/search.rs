//! `web_search`: one query to the configured backend — SearXNG's JSON API or the Brave Search
//! API — answered as `{title, url, snippet}` results.
//!
//! The backend is the operator's choice (often a SearXNG on the same host or network), so the
//! server queries it directly: it is the one address the web tools reach without `[web]
//! allow`, and only at the configured URL, with no redirects, a time limit and a bounded
//! answer that is parsed as JSON (never run). Snippets lose their markup in one linear pass
//! over at most [`MAX_FIELD`] bytes of each field (never an HTML parser in the server: a
//! backend's deeply nested markup made that quadratic and held the server), so reading an
//! answer costs time proportional to its bounded size; every result says whether its URL is
//! on the allowlist (what `web_fetch` could then read).

use serde::Deserialize;
use serde_json::{Value, json};

use super::super::{ToolError, parse};
use crate::config::{Backend, SearchFile};
use crate::state::CallContext;

/// Results a call may ask for, at most.
pub const MAX_COUNT: u64 = 20;
/// Largest backend answer read.
const MAX_ANSWER: usize = 4 << 20;
/// Characters of a title or snippet, at most.
const MAX_TEXT: usize = 1000;
/// Bytes of a title or snippet read, at most (markup included): the rest is not looked at.
const MAX_FIELD: usize = 16 << 10;

#[derive(Deserialize)]
struct Args {
    query: String,
    count: Option<u64>,
    timeout_s: Option<f64>,
}

/// Run a search.
pub async fn search(args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let a: Args = parse(args)?;
    let web = &cx.shared().config.settings.web;
    let s = web
        .search
        .as_ref()
        .ok_or_else(|| ToolError::Unavailable("no search backend is configured".into()))?;
    let count = a.count.unwrap_or(5).clamp(1, MAX_COUNT);
    let timeout = super::timeout(cx, a.timeout_s);
    let request = request(s, &a.query, count, timeout)?;
    let work = async {
        let resp = request
            .send()
            .await
            .map_err(|e| ToolError::Fetch(format!("search backend: {e}")))?;
        let status = resp.status();
        let body = bounded(resp).await?;
        if !status.is_success() {
            return Err(ToolError::Fetch(format!(
                "search backend answered HTTP {}",
                status.as_u16()
            )));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| ToolError::Fetch(format!("search backend sent no JSON: {e}")))?;
        Ok(v)
    };
    let answer = tokio::select! {
        r = work => r?,
        () = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
    };
    let results: Vec<Value> = results(s.backend, &answer, usize::try_from(count).unwrap_or(5))
        .into_iter()
        .map(|(title, url, snippet)| {
            let allowed = super::allow::check_str(&url, &web.allow).is_ok();
            json!({ "title": title, "url": url, "snippet": snippet, "allowed": allowed })
        })
        .collect();
    Ok(json!({
        "query": a.query,
        "backend": s.backend,
        "results": results,
        "untrusted": true,
    }))
}

fn request(
    s: &SearchFile,
    query: &str,
    count: u64,
    timeout: std::time::Duration,
) -> Result<reqwest::RequestBuilder, ToolError> {
    let mut url = s.endpoint().map_err(ToolError::Unavailable)?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .user_agent(concat!("warden-web/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ToolError::Internal(format!("HTTP client: {e}")))?;
    let key = match &s.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            ToolError::Unavailable(format!("the search API key variable {var} is not set"))
        })?),
        None => None,
    };
    let req = match s.backend {
        Backend::Searxng => {
            if !url.path().ends_with('/') {
                let path = format!("{}/", url.path());
                url.set_path(&path);
            }
            let mut url = url
                .join("search")
                .map_err(|e| ToolError::Unavailable(e.to_string()))?;
            url.query_pairs_mut()
                .append_pair("q", query)
                .append_pair("format", "json");
            let req = client.get(url);
            match key {
                Some(k) => req.bearer_auth(k),
                None => req,
            }
        }
        Backend::Brave => {
            url.query_pairs_mut()
                .append_pair("q", query)
                .append_pair("count", &count.to_string());
            client
                .get(url)
                .header("X-Subscription-Token", key.unwrap_or_default())
        }
    };
    Ok(req.header(reqwest::header::ACCEPT, "application/json"))
}

async fn bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, ToolError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| ToolError::Fetch(format!("search backend: {e}")))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(ToolError::Fetch(format!(
                "the search backend's answer is larger than {MAX_ANSWER} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `(title, url, snippet)` of the first `count` results in a backend's answer, markup removed.
fn results(backend: Backend, v: &Value, count: usize) -> Vec<(String, String, String)> {
    let (list, snippet) = match backend {
        Backend::Searxng => (&v["results"], "content"),
        Backend::Brave => (&v["web"]["results"], "description"),
    };
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let url = r["url"].as_str()?;
            let parsed = url::Url::parse(url).ok()?;
            matches!(parsed.scheme(), "http" | "https").then_some(())?;
            Some((parsed, r))
        })
        .take(count)
        .map(|(parsed, r)| {
            (
                plain(r["title"].as_str().unwrap_or("")),
                parsed.to_string(),
                plain(r[snippet].as_str().unwrap_or("")),
            )
        })
        .collect()
}

/// Text without markup, whitespace collapsed, at most [`MAX_TEXT`] characters: tags dropped
/// and the common entities decoded in one pass over the field's first [`MAX_FIELD`] bytes.
fn plain(html: &str) -> String {
    let mut end = html.len().min(MAX_FIELD);
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end);
    let mut in_tag = false;
    let mut rest = &html[..end];
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            _ if in_tag => in_tag = c != '>',
            '<' => in_tag = true,
            '&' => {
                let (decoded, used) = entity(rest);
                out.push_str(decoded.as_deref().unwrap_or("&"));
                rest = &rest[used..];
            }
            c => out.push(c),
        }
    }
    let text = super::page::collapse(&out);
    super::page::cut_chars(&text, MAX_TEXT).0
}

/// The entity after a `&` (`amp;`, `#39;`, `#x27;`…): its text and the bytes it took, or
/// `None` and 0 when it is not one (the `&` then stands as it is).
fn entity(after: &str) -> (Option<String>, usize) {
    let Some(semi) = after.get(..after.len().min(12)).and_then(|s| s.find(';')) else {
        return (None, 0);
    };
    let name = &after[..semi];
    let text = match name {
        "amp" => Some("&".to_owned()),
        "lt" => Some("<".to_owned()),
        "gt" => Some(">".to_owned()),
        "quot" => Some("\"".to_owned()),
        "apos" => Some("'".to_owned()),
        "nbsp" => Some(" ".to_owned()),
        _ => name
            .strip_prefix("#x")
            .or_else(|| name.strip_prefix("#X"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
            .and_then(char::from_u32)
            .filter(|c| !c.is_control())
            .map(String::from),
    };
    match text {
        Some(t) => (Some(t), semi + 1),
        None => (None, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_answer_shapes_are_read_and_cleaned() {
        let sx = json!({"results": [
            {"title": "A <b>page</b>", "url": "https://a.test/x", "content": "one\n two"},
            {"title": "bad", "url": "javascript:alert(1)", "content": ""},
            {"title": "no url"}
        ]});
        assert_eq!(
            results(Backend::Searxng, &sx, 5),
            vec![("A page".into(), "https://a.test/x".into(), "one two".into())]
        );
        let brave = json!({"web": {"results": [
            {"title": "B", "url": "https://b.test/", "description": "<strong>hit</strong> here"}
        ]}});
        assert_eq!(
            results(Backend::Brave, &brave, 5),
            vec![("B".into(), "https://b.test/".into(), "hit here".into())]
        );
        assert!(results(Backend::Brave, &json!({"error": 1}), 5).is_empty());
        assert_eq!(
            plain("Tom &amp; Jerry&#39;s &lt;b&gt; &#x41;&nbsp;x &bogus; a&b"),
            "Tom & Jerry's <b> A x &bogus; a&b"
        );
    }

    /// Issue #37: a backend answering a title of `<div>` nested 300,000 deep (1.5 MB) made the
    /// HTML parse quadratic inside the server (minutes, every other call starved). Only the
    /// first MAX_FIELD bytes of a field are read, in one pass: text past them is never seen.
    #[test]
    fn hostile_markup_is_read_in_one_bounded_pass() {
        let title = format!(
            "{}deep text{}",
            "<div>".repeat(300_000),
            "</div>".repeat(300_000)
        );
        assert_eq!(plain(&title), "", "the text lies past what is read");
        let late = format!("{}<b>{}</b> late", "x".repeat(MAX_FIELD - 3), "y");
        assert!(
            !plain(&late).contains("late"),
            "nothing past MAX_FIELD is read"
        );
        let sx = json!({"results": [{"title": title, "url": "https://a.test/", "content": "ok <i>fine</i>"}]});
        assert_eq!(
            results(Backend::Searxng, &sx, 5),
            vec![(String::new(), "https://a.test/".into(), "ok fine".into())]
        );
    }
}
