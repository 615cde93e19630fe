//! One HTTP fetch, inside the worker: redirects followed by hand, each hop checked against the
//! allowlist before it is requested; the body decompressed as it streams (gzip, brotli,
//! deflate, zstd) and read to `max_bytes` at most, so neither a huge response nor a
//! decompression bomb costs more than that; only harmless response headers kept.

use base64::Engine as _;
use serde_json::{Value, json};
use url::Url;

use super::allow;
use super::worker::{Failure, Job};

/// Redirects followed, at most.
pub const MAX_REDIRECTS: usize = 10;
/// Longest URL a redirect may lead to (and that a browse reports).
pub const MAX_URL: usize = 8192;
/// Response headers a result carries (the rest, cookies first, are dropped).
const KEPT_HEADERS: &[&str] = &[
    "age",
    "cache-control",
    "content-encoding",
    "content-language",
    "content-length",
    "content-type",
    "date",
    "etag",
    "expires",
    "last-modified",
    "link",
    "location",
    "retry-after",
    "server",
    "vary",
    "x-robots-tag",
];
/// Bytes of one kept header value, at most.
const MAX_HEADER_VALUE: usize = 1024;

/// A fetched response.
#[derive(Debug)]
pub struct Fetched {
    /// The URL asked for.
    pub url: String,
    /// The URL that answered (after redirects).
    pub final_url: Url,
    /// The HTTP status.
    pub status: u16,
    /// Kept headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body (decompressed), at most `max_bytes`.
    pub body: Vec<u8>,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
    /// Each redirect: from, status, to.
    pub redirects: Vec<Value>,
}

impl Fetched {
    /// Whether the body is text (returned as such rather than base64): its type says so, it
    /// is valid UTF-8, and it escapes cheaply into JSON ([`cheap_in_json`]), so the reply stays
    /// within a small factor of `max_bytes`.
    pub fn is_text(&self) -> bool {
        self.type_says_text() && cheap_in_json(&self.body)
    }

    fn type_says_text(&self) -> bool {
        let ct = self
            .content_type
            .as_deref()
            .unwrap_or("")
            .to_ascii_lowercase();
        let essence = ct.split(';').next().unwrap_or("").trim();
        if essence.is_empty() {
            return std::str::from_utf8(&self.body).is_ok();
        }
        essence.starts_with("text/")
            || essence.ends_with("+json")
            || essence.ends_with("+xml")
            || matches!(
                essence,
                "application/json"
                    | "application/xml"
                    | "application/javascript"
                    | "application/x-javascript"
                    | "application/ecmascript"
            )
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `web_fetch`'s result (before the server adds the network summary).
    pub fn to_json(&self) -> Value {
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let (text, base64) = if self.is_text() {
            (Value::String(self.text()), Value::Null)
        } else {
            (
                Value::Null,
                Value::String(base64::engine::general_purpose::STANDARD.encode(&self.body)),
            )
        };
        json!({
            "url": self.url,
            "final_url": self.final_url.as_str(),
            "status": self.status,
            "headers": headers,
            "content_type": self.content_type,
            "text": text,
            "base64": base64,
            "bytes": self.body.len(),
            "truncated": self.truncated,
            "redirects": self.redirects,
        })
    }
}

/// Whether `body` is UTF-8 whose JSON form stays small: at most one byte in eight needs an
/// escape (a control character other than tab, newline and return, `"` or `\\`). A result is
/// written twice in an MCP reply (`structuredContent`, and the same JSON as text), so a NUL,
/// six bytes in JSON, costs thirteen in the reply; such bodies come back as base64 (4/3 each
/// time) instead. With this rule a reply is at most about 4 × the body, whatever it holds.
pub fn cheap_in_json(body: &[u8]) -> bool {
    if std::str::from_utf8(body).is_err() {
        return false;
    }
    let costly = body
        .iter()
        .filter(|b| {
            (**b < 0x20 && !matches!(**b, b'\t' | b'\n' | b'\r')) || **b == b'"' || **b == b'\\'
        })
        .count();
    costly.saturating_mul(8) <= body.len()
}

/// Fetch `job.url`.
pub async fn fetch(job: &Job) -> Result<Fetched, Failure> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .user_agent(concat!("warden-web/", env!("CARGO_PKG_VERSION")))
        .gzip(true)
        .brotli(true)
        .deflate(true)
        .zstd(true)
        .build()
        .map_err(|e| Failure::Fetch(format!("HTTP client: {e}")))?;
    let mut url = allow::check_str(&job.url, &job.allow).map_err(not_allowed)?;
    let mut redirects = Vec::new();
    let response = loop {
        let mut req = client.get(url.clone());
        if let Some(a) = &job.accept {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        let resp = req.send().await.map_err(|e| fetch_error(&url, &e))?;
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok());
        let next = match location {
            Some(l) if resp.status().is_redirection() => url
                .join(l)
                .map_err(|_| Failure::Fetch(format!("{url} redirects to a bad URL {l:?}")))?,
            _ => break resp,
        };
        if next.as_str().len() > MAX_URL {
            return Err(Failure::Fetch(format!(
                "{url} redirects to a URL longer than {MAX_URL} bytes"
            )));
        }
        if redirects.len() >= MAX_REDIRECTS {
            return Err(Failure::Fetch(format!(
                "more than {MAX_REDIRECTS} redirects (last: {next})"
            )));
        }
        redirects.push(json!({
            "from": url.as_str(), "status": resp.status().as_u16(), "to": next.as_str()
        }));
        allow::check(&next, &job.allow).map_err(|e| {
            Failure::NotAllowed(format!("{url} redirects to {next}, which is refused: {e}"))
        })?;
        url = next;
    };
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(k, _)| KEPT_HEADERS.contains(&k.as_str()))
        .filter_map(|(k, v)| {
            let v = v.to_str().ok()?;
            Some((k.as_str().to_owned(), cut(v, MAX_HEADER_VALUE)))
        })
        .collect();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| cut(v, MAX_HEADER_VALUE));
    let (body, truncated) = read_bounded(response, job.max_bytes, &url).await?;
    Ok(Fetched {
        url: job.url.clone(),
        final_url: url,
        status,
        headers,
        content_type,
        body,
        truncated,
        redirects,
    })
}

/// The body, decompressed, to `max` bytes; whether there was more.
async fn read_bounded(
    mut resp: reqwest::Response,
    max: u64,
    url: &Url,
) -> Result<(Vec<u8>, bool), Failure> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| fetch_error(url, &e))? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn not_allowed(e: allow::Refused) -> Failure {
    Failure::NotAllowed(e.to_string())
}

/// A fetch error with its causes (reqwest's own message is only the outermost one).
fn fetch_error(url: &Url, e: &reqwest::Error) -> Failure {
    let mut msg = format!("{url}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    Failure::Fetch(msg)
}

fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(ct: Option<&str>, body: &[u8]) -> Fetched {
        Fetched {
            url: "http://a.test/".into(),
            final_url: Url::parse("http://a.test/").unwrap(),
            status: 200,
            headers: Vec::new(),
            content_type: ct.map(str::to_owned),
            body: body.to_vec(),
            truncated: false,
            redirects: Vec::new(),
        }
    }

    #[test]
    fn text_types_are_text_and_the_rest_base64() {
        for ct in [
            "text/html; charset=utf-8",
            "application/json",
            "application/ld+json",
        ] {
            let v = fetched(Some(ct), b"hi").to_json();
            assert_eq!(v["text"], "hi", "{ct}");
            assert!(v["base64"].is_null());
        }
        let png = fetched(Some("image/png"), &[0x89, b'P', b'N', b'G']).to_json();
        assert!(png["text"].is_null());
        assert_eq!(png["base64"], "iVBORw==");
        assert!(fetched(None, b"plain").is_text());
        assert!(!fetched(None, &[0xff, 0xfe, 0]).is_text());
    }

    /// Issue #37: a 10 MiB body of NUL bytes served as text/plain became a 136 MB JSON-RPC
    /// reply (each NUL six bytes in JSON, and the result is in the reply twice). Such bodies
    /// come back as base64; the reply is bounded by a small factor of the body.
    #[test]
    fn a_reply_is_bounded_by_a_small_factor_of_the_body() {
        let n = 1 << 20;
        for (ct, body) in [
            ("text/plain", vec![0u8; n]),
            ("text/html", vec![b'"'; n]),
            ("application/json", vec![b'\\'; n]),
            ("text/plain", vec![0x1b; n]),
            ("text/plain", "é<p>\"x\"</p>\n".repeat(n / 16).into_bytes()),
        ] {
            let v = fetched(Some(ct), &body).to_json();
            // What the server sends: the result as structuredContent and again as text.
            let reply = serde_json::to_string(&json!({
                "structuredContent": v, "content": [{"type": "text", "text": v.to_string()}]
            }))
            .unwrap();
            assert!(
                reply.len() <= body.len() * 4 + 4096,
                "{ct}: {} bytes for a body of {}",
                reply.len(),
                body.len()
            );
        }
        assert!(fetched(Some("text/plain"), &[0u8; 10]).to_json()["base64"].is_string());
        assert!(fetched(Some("text/html"), b"<p>fine</p>").to_json()["text"].is_string());
    }

    #[test]
    fn header_values_are_cut_on_a_character_boundary() {
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut("abc", 10), "abc");
    }
}
