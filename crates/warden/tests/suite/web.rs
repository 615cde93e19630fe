//! The web tools (`web_fetch`, `web_scrape`, `web_browse`, `web_search`), end to end through
//! the official MCP Python SDK, against a site in a network namespace the test creates
//! (`fixtures/web/lab.sh`: TEST-NET-2 behind a veth pair, names bound over `/etc/hosts` in the
//! test's own mount namespace; nothing else is reachable). The allowlist is attacked from every
//! side: redirects, a script's `fetch`, an `<img>` on a private address, an allowlisted name
//! whose answer points at loopback, a gibibyte body and a gzip bomb.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::common::{call_err as err, call_ok as ok, fixtures, names, sdk_python, the_binary};

/// The allowlist the tests serve with: the site, plus two names whose addresses point inward
/// (the sandbox must refuse those itself).
const ALLOW: &str = r#"allow = ["svc.test:8080", "priv.test:8080", "rebind.test:8080"]"#;

/// One `warden serve` session: its configuration (TOML), profile and calls.
struct Session<'a> {
    config: String,
    profile: &'a str,
    calls: Value,
}

/// Run `sessions` one after the other in one fresh lab, each through the SDK client; their
/// reports (tools, status, policy, each call's result or error, the audit).
fn in_lab(sessions: &[Session], env: &[(&str, &str)]) -> Vec<Value> {
    lab(sessions, env, false)
}

/// [`in_lab`], with the server where a container runtime would leave it (a masked `/proc`:
/// `fixtures/containers/masked-proc.sh`) when `container`.
fn lab(sessions: &[Session], env: &[(&str, &str)], container: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let mut script = String::from("set -e\n");
    for (i, s) in sessions.iter().enumerate() {
        let cfg = dir.path().join(format!("web{i}.toml"));
        std::fs::write(&cfg, &s.config).unwrap();
        let calls = dir.path().join(format!("calls{i}.json"));
        std::fs::write(&calls, s.calls.to_string()).unwrap();
        script.push_str(&format!(
            "{} {} {} {} {} < {}\n",
            sdk_python().display(),
            fixtures().join("recon/client.py").display(),
            the_binary(),
            cfg.display(),
            s.profile,
            calls.display()
        ));
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--mount"])
        .arg(fixtures().join("web/lab.sh"));
    if container {
        cmd.arg(fixtures().join("containers/masked-proc.sh"));
    }
    cmd.args(["sh", "-c", &script]).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("unshare runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn call(tool: &str, args: Value) -> Value {
    json!({ "tool": tool, "args": args })
}

#[test]
fn fetch_and_scrape_reach_the_allowlist_and_nothing_else() {
    let calls = json!([
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/page.html"})
        ),
        call(
            "web_scrape",
            json!({"url": "http://svc.test:8080/redirect-ok"})
        ),
        call(
            "web_scrape",
            json!({"url": "http://svc.test:8080/page.html",
                                  "selector": "main p", "format": "text"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/redirect-out"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://other.test:8080/page.html"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://priv.test:8080/page.html"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://rebind.test:8080/page.html"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/big", "max_bytes": 100_000})
        ),
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/bomb", "max_bytes": 100_000})
        ),
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/redirect-loop"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://198.51.100.2:8080/page.html"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/image.png"})
        ),
        call(
            "web_scrape",
            json!({"url": "http://svc.test:8080/page.html", "selector": "p["})
        ),
    ]);
    let reports = in_lab(
        &[Session {
            config: format!("[web]\n{ALLOW}\n"),
            profile: "code",
            calls,
        }],
        &[],
    );
    let r = &reports[0];
    // The code profile lists the page tools once `[web] allow` is set (no backend: no search).
    let listed = names(&r["tools"]);
    assert!(
        listed.contains(&"web_fetch") && listed.contains(&"run_command"),
        "{listed:?}"
    );
    assert!(!listed.contains(&"web_search"), "{listed:?}");

    let page = ok(r, 0);
    assert_eq!(page["status"], 200);
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .contains("<h1>Hello from svc</h1>")
    );
    assert_eq!(page["untrusted"], true);
    assert!(
        page["headers"].get("set-cookie").is_none(),
        "{}",
        page["headers"]
    );
    assert_eq!(page["network"]["requests"][0]["host"], "svc.test", "{page}");
    assert_eq!(page["network"]["refused_total"], 0);

    let scraped = ok(r, 1);
    assert_eq!(scraped["final_url"], "http://svc.test:8080/page.html");
    assert_eq!(scraped["title"], "Warden test page");
    let md = scraped["content"].as_str().unwrap();
    assert!(md.contains("First **bold** paragraph."), "{md}");
    assert!(
        !md.contains("document.write") && !md.contains("color: red"),
        "{md}"
    );
    assert_eq!(
        scraped["redirects"][0]["to"],
        "http://svc.test:8080/page.html"
    );
    let links = scraped["links"].as_array().unwrap();
    let other = links
        .iter()
        .find(|l| l["url"] == "http://other.test:8080/secret")
        .unwrap();
    assert_eq!(other["allowed"], false);
    let selected = ok(r, 2);
    assert_eq!(selected["matched"], 2);
    assert_eq!(
        selected["content"],
        "First bold paragraph.\n\nSee elsewhere."
    );

    // A redirect off the list stops at the hop, naming it.
    let e = err(r, 3);
    assert_eq!(e["kind"], "target_not_allowed", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("other.test:8080"),
        "{e}"
    );
    // A name off the list is refused before a sandbox starts.
    assert_eq!(err(r, 4)["kind"], "target_not_allowed");
    assert!(err(r, 4).get("network").is_none());
    // Allowlisted names that resolve to a private or loopback address: the sandbox refuses.
    for i in [5, 6] {
        let e = err(r, i);
        assert_eq!(e["kind"], "target_not_allowed", "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("sandbox refused"),
            "{e}"
        );
        assert_eq!(e["network"]["refused_total"], 1, "{e}");
        assert_eq!(e["network"]["requests_total"], 0, "{e}");
    }
    // A gibibyte and a gzip bomb (a gibibyte of zeros) are both cut at max_bytes.
    for i in [7, 8] {
        let f = ok(r, i);
        assert_eq!(
            (f["bytes"].as_u64(), &f["truncated"]),
            (Some(100_000), &json!(true))
        );
        let received = f["network"]["requests"][0]["bytes_received"]
            .as_u64()
            .unwrap();
        assert!(received < 64 << 20, "read {received} bytes off the wire");
    }
    assert!(
        err(r, 9)["message"]
            .as_str()
            .unwrap()
            .contains("more than 10 redirects")
    );
    assert_eq!(err(r, 10)["kind"], "target_not_allowed");
    let png = ok(r, 11);
    assert_eq!(
        (&png["base64"], &png["text"]),
        (&json!("iVBORw0KGgo="), &Value::Null)
    );
    assert_eq!(err(r, 12)["kind"], "invalid_arguments");

    // Every call is in the audit log, a fetch with what its sandbox did.
    let audit = r["audit"].as_array().unwrap();
    let web: Vec<&Value> = audit.iter().filter(|a| a["tool"] == "web_fetch").collect();
    assert_eq!(web.len(), 10, "{audit:?}");
    assert_eq!(
        web[0]["outcome"]["network"]["requests"][0]["request"],
        "GET /page.html HTTP/1.1"
    );
    let private = web
        .iter()
        .find(|a| a["arguments"]["url"] == "http://priv.test:8080/page.html");
    assert_eq!(private.unwrap()["outcome"]["network"]["refused_total"], 1);
}

#[test]
fn browse_runs_the_page_inside_the_allowlist() {
    let calls = json!([
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/page.html", "screenshot": true})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/js-redirect.html"})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/js-other.html", "wait_ms": 1000})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/redirect-out"})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/forged.html"})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/frames.html", "wait_ms": 1000})
        ),
    ]);
    let reports = in_lab(
        &[Session {
            config: format!("[web]\n{ALLOW}\n"),
            profile: "web",
            calls,
        }],
        &[],
    );
    let r = &reports[0];
    assert!(
        names(&r["tools"]).contains(&"web_browse"),
        "no browser found: ./setup.sh installs Chromium"
    );
    let page = ok(r, 0);
    assert_eq!(page["title"], "Warden test page");
    assert_eq!(page["status"], 200);
    // Scripts ran: the text has what document.write added.
    assert!(
        page["text"].as_str().unwrap().contains("scripted"),
        "{}",
        page["text"]
    );
    let png = base64_decode(page["screenshot_png_base64"].as_str().unwrap());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1280, 800));

    assert_eq!(
        ok(r, 1)["final_url"],
        "http://svc.test:8080/page.html?after=js"
    );

    let js = ok(r, 2);
    let reqs = js["requests"].as_array().unwrap();
    let beacon = reqs
        .iter()
        .find(|q| q["url"] == "http://other.test:8080/beacon?from=js");
    assert_eq!(beacon.unwrap()["allowed"], false, "{reqs:?}");
    assert_eq!(js["blocked_total"], 1);
    // The image's name is allowlisted but private: the browser asked, the sandbox refused.
    let refused = js["network"]["refused"].as_array().unwrap();
    assert!(refused.iter().any(|x| x["host"] == "priv.test"), "{js}");
    assert_eq!(js["network"]["requests_total"], 1, "{js}");

    let e = err(r, 3);
    assert_eq!(e["kind"], "target_not_allowed");
    assert!(
        e["message"].as_str().unwrap().contains("other.test:8080"),
        "{e}"
    );

    // The page's scripts cannot rewrite what Warden reads of it.
    let forged = ok(r, 4);
    assert_eq!(forged["title"], "real title", "{forged}");
    assert_eq!(forged["final_url"], "http://svc.test:8080/forged.html");
    assert!(forged["text"].as_str().unwrap().contains("real text"));

    // A frame from another site and a worker's fetch are checked like the page's own requests.
    let frames = ok(r, 5);
    let reqs = frames["requests"].as_array().unwrap();
    let refused = |url: &str| {
        reqs.iter()
            .any(|q| q["url"] == url && q["allowed"] == false)
    };
    assert!(refused("http://other.test:8080/framed.html"), "{reqs:?}");
    assert!(refused("http://other.test:8080/from-worker"), "{reqs:?}");
    assert!(refused("http://other.test:8080/popup.html"), "{reqs:?}");
}

/// Issue #37: a navigation to an off-list site by script, meta refresh or `Refresh:` header was
/// blocked but reported as the loaded page (`final_url` off the list, `status: 200`,
/// `loaded: true`). The refused navigation is listed with its reason and never reported as
/// loaded; `final_url` and `status` are the last document that really loaded. WebSockets are
/// in `requests` too.
#[test]
fn blocked_navigations_are_never_reported_as_loaded() {
    let mut calls = Vec::new();
    for page in ["js-out.html", "meta-out.html", "refresh-out"] {
        calls.push(call(
            "web_browse",
            json!({"url": format!("http://svc.test:8080/{page}"), "wait_ms": 1500}),
        ));
    }
    calls.push(call(
        "web_browse",
        json!({"url": "http://svc.test:8080/ws.html", "wait_ms": 1000}),
    ));
    let reports = in_lab(
        &[Session {
            config: format!("[web]\n{ALLOW}\n"),
            profile: "web",
            calls: json!(calls),
        }],
        &[],
    );
    let r = &reports[0];
    for (i, page) in ["js-out.html", "meta-out.html", "refresh-out"]
        .iter()
        .enumerate()
    {
        let v = ok(r, i);
        assert_eq!(v["loaded"], false, "{page}: {v}");
        assert_eq!(
            v["final_url"],
            format!("http://svc.test:8080/{page}"),
            "{page}: {v}"
        );
        assert_eq!(v["status"], 200, "{page}");
        let blocked = v["blocked_navigation"].as_array().unwrap();
        assert!(
            blocked
                .iter()
                .any(|b| b["url"] == "http://other.test:8080/page.html" && b["refused"].is_string()),
            "{page}: {v}"
        );
        assert_eq!(
            v["text"], "",
            "{page}: the error page is not the site's text"
        );
    }
    let ws = ok(r, 3);
    let reqs = ws["requests"].as_array().unwrap();
    let socket = |url: &str| {
        reqs.iter()
            .find(|q| q["url"] == url && q["type"] == "WebSocket")
    };
    assert_eq!(
        socket("ws://svc.test:8080/socket").map(|q| q["allowed"].clone()),
        Some(json!(true)),
        "{reqs:?}"
    );
    assert_eq!(
        socket("ws://other.test:8080/socket").map(|q| q["allowed"].clone()),
        Some(json!(false)),
        "{reqs:?}"
    );
    assert_eq!(ws["loaded"], true, "{ws}");
    assert!(ws["blocked_navigation"].as_array().unwrap().is_empty());
}

#[test]
fn search_goes_to_the_configured_backend_only() {
    let searx = Session {
        config: "[web.search]\nbackend = \"searxng\"\nurl = \"http://searx.test:8081\"\n".into(),
        profile: "web",
        calls: json!([call(
            "web_search",
            json!({"query": "warden sandbox", "count": 3})
        )]),
    };
    let brave = |var: &str| Session {
        config: format!(
            "[web]\n{ALLOW}\n[web.search]\nbackend = \"brave\"\n\
             url = \"http://brave.test:8082/res/v1/web/search\"\napi_key_env = \"{var}\"\n"
        ),
        profile: "web",
        calls: json!([call("web_search", json!({"query": "rust"}))]),
    };
    let reports = in_lab(
        &[
            searx,
            brave("WARDEN_TEST_BRAVE_KEY"),
            brave("WARDEN_TEST_WRONG_KEY"),
        ],
        &[
            ("WARDEN_TEST_BRAVE_KEY", "test-brave-key"),
            ("WARDEN_TEST_WRONG_KEY", "nope"),
        ],
    );
    // Only search is configured: only search is listed.
    assert_eq!(names(&reports[0]["tools"]), vec!["web_search"]);
    let s = ok(&reports[0], 0);
    let results = s["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["title"], "Result 0 for warden sandbox");
    assert_eq!(results[0]["snippet"], "snippet 0");
    assert_eq!(
        results[0]["allowed"], false,
        "no [web] allow: nothing is fetchable"
    );
    assert_eq!(s["untrusted"], true);

    let b = ok(&reports[1], 0);
    let results = b["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["snippet"], "rust hit 0");
    let e = err(&reports[2], 0);
    assert_eq!(e["kind"], "fetch_failed");
    assert!(e["message"].as_str().unwrap().contains("401"), "{e}");
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// In a container (a masked `/proc`, no fresh procfs for the sandbox): a fetch, the sandbox's
/// refusal of an allowlisted name that points inward, and a browser, as on a bare machine.
#[test]
fn the_web_tools_work_in_a_container() {
    let calls = json!([
        call(
            "web_fetch",
            json!({"url": "http://svc.test:8080/page.html"})
        ),
        call(
            "web_fetch",
            json!({"url": "http://priv.test:8080/page.html"})
        ),
        call(
            "web_browse",
            json!({"url": "http://svc.test:8080/js-redirect.html"})
        ),
    ]);
    let session = Session {
        config: format!("[web]\n{ALLOW}\n"),
        profile: "web",
        calls,
    };
    let reports = lab(&[session], &[], true);
    let r = &reports[0];
    assert_eq!(ok(r, 0)["status"], 200);
    let e = err(r, 1);
    assert_eq!(e["kind"], "target_not_allowed", "{e}");
    assert_eq!(e["network"]["refused_total"], 1, "{e}");
    assert_eq!(
        ok(r, 2)["final_url"],
        "http://svc.test:8080/page.html?after=js"
    );
}
