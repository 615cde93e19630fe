//! `web_browse` inside the worker: a headless Chromium started in the call's sandbox, driven
//! over its DevTools pipe ([`super::cdp`]), loads the page with JavaScript on and returns the
//! final URL, the title, the rendered HTML and text (capped) and, if asked, a PNG screenshot.
//!
//! Chromium runs with `--no-sandbox` because Warden is the sandbox: the browser, its renderers
//! and its network service all live in the call's jail, whose network reaches only the
//! allowlisted names. On top of that, every request the page makes (navigations, redirects,
//! sub-resources, `fetch`) is paused by the DevTools `Fetch` domain and continued only if its
//! URL is on the allowlist; the rest fail as blocked and are listed in the result.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::cdp::{Browser, CdpError};
use super::fetch::MAX_URL;
use super::page::MAX_TITLE;
use super::worker::{Failure, Job};

/// Requests listed in a result, at most (the rest are counted).
const MAX_REQUESTS: usize = 500;
/// The viewport.
const WIDTH: u32 = 1280;
const HEIGHT: u32 = 800;
/// What the page's DOM is read with, in a world of Warden's own (the page's scripts cannot
/// replace the functions it calls).
const READ_PAGE: &str = "JSON.stringify({title: document.title, \
    html: document.documentElement ? document.documentElement.outerHTML : '', \
    text: document.body ? document.body.innerText : ''})";

/// What `web_browse` asks of the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrowseJob {
    /// The browser executable.
    pub browser: String,
    /// Time to let scripts run after the load, ms.
    pub wait_ms: u64,
    /// Whether to take a screenshot.
    pub screenshot: bool,
    /// Characters of text returned, at most (HTML: `max_bytes`).
    pub max_chars: usize,
}

/// The command line a browser is started with (besides the DevTools pipe).
pub fn browser_args() -> Vec<String> {
    [
        "--headless",
        // Warden is the sandbox: the browser's own needs namespaces the jail does not give.
        "--no-sandbox",
        "--no-zygote",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
        "--user-data-dir=/tmp/warden-browser",
        "--window-size=1280,800",
        "about:blank",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// What the page did on the network, seen from the browser.
#[derive(Debug, Default)]
struct Requests {
    list: Vec<Value>,
    total: u64,
    blocked: u64,
    /// The status of the main document's last response.
    status: Option<u64>,
    /// The URL of the main document's last response (the last document that really loaded).
    document_url: Option<String>,
    /// Navigations of the main frame the allowlist refused, each with why.
    blocked_navigation: Vec<Value>,
    /// Whether the main frame's latest navigation was refused (the tab then shows the
    /// browser's error page, not a document of the site).
    last_navigation_refused: bool,
    main_frame: Option<String>,
    /// The list entry of each network request id.
    by_network_id: std::collections::HashMap<String, usize>,
}

impl Requests {
    fn push(&mut self, network_id: Option<&str>, v: Value) {
        self.total += 1;
        if self.list.len() < MAX_REQUESTS {
            if let Some(id) = network_id {
                self.by_network_id.insert(id.to_owned(), self.list.len());
            }
            self.list.push(v);
        }
    }
}

/// Load the page and read it.
pub async fn browse(job: &Job, b: &BrowseJob) -> Result<Value, Failure> {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(job.timeout_ms);
    let mut browser =
        Browser::start(&b.browser, &browser_args()).map_err(|e| Failure::Browser(e.to_string()))?;
    let allow = job.allow.clone();
    let mut reqs = Requests::default();
    let result = drive(&mut browser, job, b, &allow, &mut reqs, deadline).await;
    let _ = browser.send(None, "Browser.close", json!({}));
    drop(browser);
    let mut v = result?;
    v["requests"] = json!(reqs.list);
    v["requests_total"] = json!(reqs.total);
    v["blocked_total"] = json!(reqs.blocked);
    v["status"] = json!(reqs.status);
    // `final_url`, `status` and `loaded` describe the last document that really loaded; a
    // navigation the allowlist refused is listed, never reported as loaded, and the error
    // page the browser shows for it is not returned as the site's content.
    if let Some(u) = &reqs.document_url {
        v["final_url"] = json!(super::page::cut_chars(u, MAX_URL).0);
    }
    v["blocked_navigation"] = json!(reqs.blocked_navigation);
    if reqs.last_navigation_refused {
        v["loaded"] = json!(false);
        v["html"] = json!("");
        v["text"] = json!("");
        v["title"] = Value::Null;
        v["screenshot_png_base64"] = Value::Null;
    }
    v["duration_ms"] = json!(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    Ok(v)
}

fn browser_error(e: CdpError) -> Failure {
    Failure::Browser(e.to_string())
}

/// Handle an event that cannot wait: a paused request (continued if allowed, failed if not),
/// and the bookkeeping of requests. Returns whether the event was consumed.
fn handle(browser: &mut Browser, ev: &Value, allow: &[String], reqs: &mut Requests) -> bool {
    let p = &ev["params"];
    let session = ev["sessionId"].as_str().map(str::to_owned);
    match ev["method"].as_str() {
        Some("Fetch.requestPaused") => {
            let url = p["request"]["url"].as_str().unwrap_or("");
            let verdict = url::Url::parse(url)
                .map_err(|_| "not a URL".to_owned())
                .and_then(|u| super::allow::check(&u, allow).map_err(|e| e.to_string()));
            let id = p["requestId"].clone();
            let mut entry = json!({
                "url": super::page::cut_chars(url, 2048).0,
                "method": p["request"]["method"],
                "type": p["resourceType"],
                "allowed": verdict.is_ok(),
            });
            // A navigation of the main frame (a script's, a meta refresh's, a Refresh header's).
            let navigation = p["resourceType"] == "Document"
                && p["frameId"].as_str().is_some()
                && p["frameId"].as_str() == reqs.main_frame.as_deref();
            if navigation {
                reqs.last_navigation_refused = verdict.is_err();
                if let Err(why) = &verdict
                    && reqs.blocked_navigation.len() < MAX_REQUESTS
                {
                    reqs.blocked_navigation.push(json!({
                        "url": super::page::cut_chars(url, 2048).0,
                        "refused": why,
                    }));
                }
            }
            // (A pipe that is gone ends the session at the next read.)
            let _ = match &verdict {
                Ok(()) => browser.send(
                    session.as_deref(),
                    "Fetch.continueRequest",
                    json!({ "requestId": id }),
                ),
                Err(why) => {
                    reqs.blocked += 1;
                    entry["refused"] = json!(why);
                    browser.send(
                        session.as_deref(),
                        "Fetch.failRequest",
                        json!({ "requestId": id, "errorReason": "BlockedByClient" }),
                    )
                }
            };
            reqs.push(p["networkId"].as_str(), entry);
            true
        }
        // A frame in a process of its own, a worker, a popup: attached paused, so that its
        // requests are checked like the page's before it runs.
        Some("Target.attachedToTarget") => {
            if let Some(child) = p["sessionId"].as_str() {
                let child = Some(child);
                let _ = browser.send(child, "Fetch.enable", intercept_all());
                let _ = browser.send(child, "Network.enable", json!({}));
                let _ = browser.send(child, "Target.setAutoAttach", auto_attach());
                let _ = browser.send(child, "Runtime.runIfWaitingForDebugger", json!({}));
            }
            true
        }
        Some("Network.responseReceived") => {
            if p["type"] == "Document" && p["frameId"].as_str() == reqs.main_frame.as_deref() {
                reqs.status = p["response"]["status"].as_u64();
                reqs.document_url = p["response"]["url"].as_str().map(str::to_owned);
            }
            true
        }
        // WebSockets are not paused by the Fetch domain: listed with what the allowlist says
        // of them (the jail's network refuses them the same way: see `network`).
        Some("Network.webSocketCreated") => {
            let url = p["url"].as_str().unwrap_or("");
            let verdict = url::Url::parse(url)
                .map_err(|_| "not a URL".to_owned())
                .and_then(|mut u| {
                    let scheme = match u.scheme() {
                        "ws" => "http",
                        "wss" => "https",
                        other => other,
                    }
                    .to_owned();
                    let _ = u.set_scheme(&scheme);
                    super::allow::check(&u, allow).map_err(|e| e.to_string())
                });
            let mut entry = json!({
                "url": super::page::cut_chars(url, 2048).0,
                "method": "GET",
                "type": "WebSocket",
                "allowed": verdict.is_ok(),
            });
            if let Err(why) = verdict {
                entry["refused"] = json!(why);
            }
            reqs.push(p["requestId"].as_str(), entry);
            true
        }
        Some("Network.loadingFailed") => {
            // Recorded against the request (a refusal of ours is already there).
            let err = p["errorText"].as_str().unwrap_or("failed");
            if let Some(i) = p["requestId"]
                .as_str()
                .and_then(|id| reqs.by_network_id.get(id))
                && let Some(entry) = reqs.list.get_mut(*i)
                && entry.get("refused").is_none()
            {
                entry["error"] = json!(err);
            }
            true
        }
        _ => false,
    }
}

async fn drive(
    browser: &mut Browser,
    job: &Job,
    b: &BrowseJob,
    allow: &[String],
    reqs: &mut Requests,
    deadline: Instant,
) -> Result<Value, Failure> {
    let target = call(
        browser,
        None,
        "Target.createTarget",
        json!({ "url": "about:blank" }),
        allow,
        reqs,
    )
    .await?;
    let attached = call(
        browser,
        None,
        "Target.attachToTarget",
        json!({ "targetId": target["targetId"], "flatten": true }),
        allow,
        reqs,
    )
    .await?;
    let session = attached["sessionId"].as_str().unwrap_or("").to_owned();
    // A page target's main frame has the target's id.
    reqs.main_frame = target["targetId"].as_str().map(str::to_owned);
    let s = Some(session.as_str());
    // New pages (popups) anywhere in the browser, then the page's own frames and workers.
    call(
        browser,
        None,
        "Target.setAutoAttach",
        auto_attach(),
        allow,
        reqs,
    )
    .await?;
    for (method, params) in [
        ("Fetch.enable", intercept_all()),
        ("Network.enable", json!({})),
        ("Target.setAutoAttach", auto_attach()),
        ("Page.enable", json!({})),
        (
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": false }),
        ),
    ] {
        call(browser, s, method, params, allow, reqs).await?;
    }
    let nav = call(
        browser,
        s,
        "Page.navigate",
        json!({ "url": job.url }),
        allow,
        reqs,
    )
    .await?;
    if let Some(f) = nav["frameId"].as_str() {
        reqs.main_frame = Some(f.to_owned());
    }
    if let Some(err) = nav["errorText"].as_str() {
        return Err(if err.contains("BLOCKED_BY_CLIENT") {
            let why = reqs
                .list
                .iter()
                .rev()
                .find_map(|r| {
                    Some(format!(
                        "{} is refused: {}",
                        r["url"].as_str()?,
                        r["refused"].as_str()?
                    ))
                })
                .unwrap_or_else(|| err.to_owned());
            Failure::NotAllowed(format!("{}: the navigation was stopped: {why}", job.url))
        } else {
            Failure::Fetch(format!("{}: {err}", job.url))
        });
    }
    // Wait for the load, then let scripts run for `wait_ms`; a script redirect starts another
    // load, which is waited for too (all within the deadline).
    let end = deadline
        .checked_sub(Duration::from_millis(300))
        .filter(|e| *e > Instant::now())
        .unwrap_or(deadline);
    let mut settle: Option<Instant> = None;
    let mut loaded = false;
    loop {
        let until = settle.map_or(end, |t| t.min(end));
        let now = Instant::now();
        if now >= until {
            break;
        }
        let ev = match tokio::time::timeout(until - now, browser.event()).await {
            Ok(ev) => ev.map_err(browser_error)?,
            Err(_) => break,
        };
        if handle(browser, &ev, allow, reqs) {
            continue;
        }
        match ev["method"].as_str() {
            Some("Page.loadEventFired") => {
                loaded = true;
                settle = Some(Instant::now() + Duration::from_millis(b.wait_ms));
            }
            Some("Page.frameStartedLoading")
                if ev["params"]["frameId"].as_str() == reqs.main_frame.as_deref() =>
            {
                // Another document is on its way: wait for its load.
                settle = None;
            }
            _ => {}
        }
    }
    // The DOM is read in an isolated world, and the final URL comes from the browser's own
    // history, never from anything the page's scripts could have redefined.
    let world = call(
        browser,
        s,
        "Page.createIsolatedWorld",
        json!({ "frameId": reqs.main_frame, "worldName": "warden" }),
        allow,
        reqs,
    )
    .await?;
    let read = call(
        browser,
        s,
        "Runtime.evaluate",
        json!({ "expression": READ_PAGE, "returnByValue": true,
                "contextId": world["executionContextId"] }),
        allow,
        reqs,
    )
    .await?;
    let history = call(
        browser,
        s,
        "Page.getNavigationHistory",
        json!({}),
        allow,
        reqs,
    )
    .await?;
    let final_url = history["currentIndex"]
        .as_u64()
        .and_then(|i| history["entries"].get(usize::try_from(i).ok()?))
        .and_then(|e| e["url"].as_str())
        .map(|u| super::page::cut_chars(u, MAX_URL).0);
    let page: Value = read["result"]["value"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    let max_html = usize::try_from(job.max_bytes).unwrap_or(usize::MAX);
    let (html, html_truncated) =
        super::page::cut_chars(page["html"].as_str().unwrap_or(""), max_html);
    let (text, text_truncated) =
        super::page::cut_chars(page["text"].as_str().unwrap_or(""), b.max_chars);
    let title = page["title"]
        .as_str()
        .map(|t| super::page::cut_chars(t, MAX_TITLE).0);
    let mut out = json!({
        "url": job.url,
        "final_url": final_url,
        "title": title,
        "loaded": loaded,
        "html": html,
        "html_truncated": html_truncated,
        "text": text,
        "text_truncated": text_truncated,
        "screenshot_png_base64": null,
    });
    if b.screenshot {
        let shot = call(
            browser,
            s,
            "Page.captureScreenshot",
            json!({ "format": "png" }),
            allow,
            reqs,
        )
        .await?;
        out["screenshot_png_base64"] = shot["data"].clone();
    }
    Ok(out)
}

/// Every request paused before it is sent.
fn intercept_all() -> Value {
    json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] })
}

/// Attach to every new target (frames in processes of their own, workers, popups), each paused
/// until its requests are intercepted too.
fn auto_attach() -> Value {
    json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true })
}

/// A command whose meanwhile events are handled (paused requests answered at once).
async fn call(
    browser: &mut Browser,
    session: Option<&str>,
    method: &str,
    params: Value,
    allow: &[String],
    reqs: &mut Requests,
) -> Result<Value, Failure> {
    browser
        .call(session, method, params, &mut |br, ev| {
            handle(br, ev, allow, reqs)
        })
        .await
        .map_err(browser_error)
}
