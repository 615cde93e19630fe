//! The online OSV source: an OSV-compatible API (`--osv-url`, the public `api.osv.dev` by
//! default for `warden scan`). `POST /v1/querybatch` names the advisories for each component,
//! `GET /v1/vulns/{id}` fetches each one once; the ranges are then evaluated here as for the
//! offline source, which also gives the first fixed version.
//!
//! Bounded: 1,000 queries a batch (the API's limit), answers of at most [`MAX_BODY`] bytes,
//! [`MAX_ADVISORIES`] advisories, each request [`TIMEOUT`]. Any failure is an [`ApiError`]: the
//! caller reports the components as *unknown*, never as clean.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::Advisory;
use crate::component::Component;

/// The public OSV API.
pub const PUBLIC: &str = "https://api.osv.dev";

/// Largest answer read.
pub const MAX_BODY: usize = 32 << 20;

/// Most advisories fetched for one scan.
pub const MAX_ADVISORIES: usize = 5_000;

/// Time for one request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

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

/// The advisories naming each component (by purl), from the API at `base`.
pub fn query(
    base: &str,
    components: &[&Component],
) -> Result<BTreeMap<String, Vec<Advisory>>, ApiError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ApiError::Unreachable {
            url: base.to_owned(),
            why: format!("no runtime: {e}"),
        })?;
    rt.block_on(query_async(base.trim_end_matches('/'), components))
}

async fn query_async(
    base: &str,
    components: &[&Component],
) -> Result<BTreeMap<String, Vec<Advisory>>, ApiError> {
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::limited(3))
        .user_agent(concat!("warden-scan/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ApiError::Unreachable {
            url: base.to_owned(),
            why: e.to_string(),
        })?;
    let batch_url = format!("{base}/v1/querybatch");
    let mut ids_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for chunk in components.chunks(1000) {
        let queries: Vec<Value> = chunk
            .iter()
            .map(|c| {
                json!({
                    "package": { "name": c.name, "ecosystem": c.ecosystem.osv_name() },
                    "version": c.version,
                })
            })
            .collect();
        let answer = post(&http, &batch_url, &json!({ "queries": queries })).await?;
        let results = answer
            .get("results")
            .and_then(Value::as_array)
            .filter(|r| r.len() == chunk.len())
            .ok_or_else(|| ApiError::Malformed {
                url: batch_url.clone(),
                why: "no `results` array with one entry per query".into(),
            })?;
        for (c, r) in chunk.iter().zip(results) {
            let ids = r
                .get("vulns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.get("id").and_then(Value::as_str))
                .map(str::to_owned);
            ids_of.entry(c.purl.clone()).or_default().extend(ids);
        }
    }
    let wanted: BTreeSet<&String> = ids_of.values().flatten().collect();
    if wanted.len() > MAX_ADVISORIES {
        return Err(ApiError::Malformed {
            url: batch_url,
            why: format!(
                "{} advisories named, over the limit of {MAX_ADVISORIES}",
                wanted.len()
            ),
        });
    }
    let mut advisories: BTreeMap<String, Advisory> = BTreeMap::new();
    for id in wanted {
        // Ids are OSV's (`GHSA-…`, `PYSEC-…`): nothing else goes into the path.
        if !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            continue;
        }
        let url = format!("{base}/v1/vulns/{id}");
        let v = get(&http, &url).await?;
        let a: Advisory = serde_json::from_value(v).map_err(|e| ApiError::Malformed {
            url: url.clone(),
            why: e.to_string(),
        })?;
        advisories.insert(id.clone(), a);
    }
    Ok(ids_of
        .into_iter()
        .map(|(purl, ids)| {
            let list = ids
                .iter()
                .filter_map(|i| advisories.get(i).cloned())
                .collect();
            (purl, list)
        })
        .collect())
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
    let unreachable = |why: String| ApiError::Unreachable {
        url: url.to_owned(),
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
                url: url.to_owned(),
                why: format!("answer longer than {MAX_BODY} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::Malformed {
        url: url.to_owned(),
        why: e.to_string(),
    })
}
