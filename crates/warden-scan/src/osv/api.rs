//! The online OSV source: an OSV-compatible API (`--osv-url`, the public `api.osv.dev` by
//! default for `warden scan`). `POST /v1/querybatch` names every advisory of each *package*
//! (asked without a version, following `next_page_token`), `GET /v1/vulns/{id}` fetches each
//! one once, and the ranges are evaluated here exactly as for the offline source: a version the
//! API cannot order is then *unknown* here, never silently clean, and the first fixed version
//! is known.
//!
//! Bounded: 1,000 queries a batch (the API's limit), [`MAX_PAGES`] pages, answers of at most
//! [`MAX_BODY`] bytes, [`MAX_ADVISORIES`] advisories, each request [`TIMEOUT`]; no redirect is
//! followed (the inventory goes to the configured host only), and errors name the endpoint
//! without credentials. Any failure is an [`ApiError`]: the caller reports the components as
//! *unknown*, never as clean.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::Advisory;
use crate::component::{Component, Ecosystem};

/// The public OSV API.
pub const PUBLIC: &str = "https://api.osv.dev";

/// Largest answer read.
pub const MAX_BODY: usize = 32 << 20;

/// Most advisories fetched for one scan.
pub const MAX_ADVISORIES: usize = 5_000;

/// Time for one request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Most result pages followed for one batch.
pub const MAX_PAGES: usize = 20;

/// The advisories the API names, by package.
#[derive(Debug, Default)]
pub struct Answer {
    /// Advisories by (ecosystem, normalised name).
    pub by_package: BTreeMap<(Ecosystem, String), Vec<Advisory>>,
    /// Ids that were not OSV ids, or advisories that did not parse.
    pub skipped: usize,
}

/// Why the API could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No connection, a timeout, a TLS failure.
    #[error("{url}: {why}")]
    Unreachable {
        /// The endpoint (without credentials or query).
        url: String,
        /// Why.
        why: String,
    },
    /// An answer that is not OSV's.
    #[error("{url}: {why}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// Why.
        why: String,
    },
}

/// Every advisory of each component's package, from the API at `base`.
pub fn query(base: &str, components: &[&Component]) -> Result<Answer, ApiError> {
    let shown = crate::report::shown_url(base);
    if base.contains(['?', '#']) {
        return Err(ApiError::Malformed {
            url: shown,
            why: "give the API's base URL, without a query or fragment".into(),
        });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ApiError::Unreachable {
            url: shown,
            why: format!("no runtime: {e}"),
        })?;
    rt.block_on(query_async(base.trim_end_matches('/'), components))
}

async fn query_async(base: &str, components: &[&Component]) -> Result<Answer, ApiError> {
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("warden-scan/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ApiError::Unreachable {
            url: crate::report::shown_url(base),
            why: e.to_string(),
        })?;
    let batch_url = format!("{base}/v1/querybatch");
    let packages: Vec<(Ecosystem, String)> = components
        .iter()
        .map(|c| (c.ecosystem, c.name.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut ids_of: BTreeMap<(Ecosystem, String), BTreeSet<String>> = BTreeMap::new();
    for chunk in packages.chunks(1000) {
        let mut pending: Vec<(usize, Option<String>)> =
            (0..chunk.len()).map(|i| (i, None)).collect();
        for _ in 0..MAX_PAGES {
            if pending.is_empty() {
                break;
            }
            let queries: Vec<Value> = pending
                .iter()
                .map(|(i, token)| {
                    let (eco, name) = &chunk[*i];
                    let mut q = json!({ "package": { "name": name, "ecosystem": eco.osv_name() } });
                    if let Some(t) = token {
                        q["page_token"] = json!(t);
                    }
                    q
                })
                .collect();
            let answer = post(&http, &batch_url, &json!({ "queries": queries })).await?;
            let results = answer
                .get("results")
                .and_then(Value::as_array)
                .filter(|r| r.len() == pending.len())
                .ok_or_else(|| ApiError::Malformed {
                    url: crate::report::shown_url(&batch_url),
                    why: "no `results` array with one entry per query".into(),
                })?;
            let mut next = Vec::new();
            for ((i, _), r) in pending.iter().zip(results) {
                let ids = r
                    .get("vulns")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.get("id").and_then(Value::as_str))
                    .map(str::to_owned);
                ids_of.entry(chunk[*i].clone()).or_default().extend(ids);
                if let Some(t) = r.get("next_page_token").and_then(Value::as_str) {
                    next.push((*i, Some(t.to_owned())));
                }
            }
            pending = next;
        }
        if !pending.is_empty() {
            return Err(ApiError::Malformed {
                url: crate::report::shown_url(&batch_url),
                why: format!("still more pages after {MAX_PAGES}"),
            });
        }
    }
    let wanted: BTreeSet<&String> = ids_of.values().flatten().collect();
    if wanted.len() > MAX_ADVISORIES {
        return Err(ApiError::Malformed {
            url: crate::report::shown_url(&batch_url),
            why: format!(
                "{} advisories named, over the limit of {MAX_ADVISORIES}",
                wanted.len()
            ),
        });
    }
    let mut out = Answer::default();
    let mut advisories: BTreeMap<String, Advisory> = BTreeMap::new();
    for id in wanted {
        // Ids are OSV's (`GHSA-…`, `PYSEC-…`): nothing else goes into the path.
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            out.skipped += 1;
            continue;
        }
        let url = format!("{base}/v1/vulns/{id}");
        let v = get(&http, &url).await?;
        match serde_json::from_value::<Advisory>(v) {
            Ok(a) => {
                advisories.insert(id.clone(), a);
            }
            Err(_) => out.skipped += 1,
        }
    }
    out.by_package = ids_of
        .into_iter()
        .map(|(package, ids)| {
            let list = ids
                .iter()
                .filter_map(|i| advisories.get(i).cloned())
                .collect();
            (package, list)
        })
        .collect();
    Ok(out)
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<Value, ApiError> {
    let resp = http.post(url).json(body).send().await;
    answer(url, resp).await
}

async fn get(http: &reqwest::Client, url: &str) -> Result<Value, ApiError> {
    let resp = http.get(url).send().await;
    answer(url, resp).await
}

async fn answer(
    url: &str,
    resp: Result<reqwest::Response, reqwest::Error>,
) -> Result<Value, ApiError> {
    let shown = crate::report::shown_url(url);
    let unreachable = |why: String| ApiError::Unreachable {
        url: shown.clone(),
        why,
    };
    let mut resp = resp.map_err(|e| unreachable(e.without_url().to_string()))?;
    if !resp.status().is_success() {
        return Err(unreachable(format!("HTTP {}", resp.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| unreachable(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(ApiError::Malformed {
                url: shown,
                why: format!("answer longer than {MAX_BODY} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::Malformed {
        url: shown,
        why: e.to_string(),
    })
}
