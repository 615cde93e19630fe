//! `warden scan` through the real binary: every inventory source against its expected
//! components, vulnerabilities from the fixture OSV folder and from a fake OSV API on loopback,
//! *unknown* when neither answers, the OSV edge cases, CycloneDX validated by the official
//! schema, SARIF by the official schema, capabilities and typosquats, and the scan inside a
//! detonation. Never a network beyond loopback (every scan names its OSV source).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::common::{fixtures, real_servers, sdk_python, warden};
use super::detonate::{assert_valid, sarif_schema, schema_errors};

fn projects() -> PathBuf {
    fixtures().join("scan/projects")
}

fn osv_db() -> String {
    fixtures().join("osv").display().to_string()
}

/// `warden scan ARGS… --output json`, its exit status and the report (schema-checked).
fn scan_json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["scan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let r = warden(&all);
    let report: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: status {} {}\n{}", r.status, r.stderr, r.stdout));
    let errors = scan_schema_errors(&report);
    assert!(errors.is_empty(), "{errors:#?}");
    (r.status, report)
}

/// What warden.scan.v1.json finds wrong (the report schema registered for its `$ref`).
fn scan_schema_errors(doc: &Value) -> Vec<String> {
    let read = |name: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(fixtures().join("../schemas").join(name)).unwrap(),
        )
        .unwrap()
    };
    let registry = jsonschema::Registry::new()
        .add(
            "https://github.com/warden-sandbox/warden/schemas/warden.report.v1.json",
            read("warden.report.v1.json"),
        )
        .unwrap()
        .prepare()
        .unwrap();
    let validator = jsonschema::options()
        .with_registry(&registry)
        .build(&read("warden.scan.v1.json"))
        .unwrap();
    validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(10)
        .collect()
}

fn pinned(report: &Value) -> BTreeSet<(String, bool)> {
    report["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("version").is_some())
        .map(|c| (c["purl"].as_str().unwrap().to_owned(), c["direct"] == true))
        .collect()
}

fn vuln_ids(report: &Value) -> BTreeSet<(String, String, String)> {
    report["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_owned(),
                v["component"].as_str().unwrap().to_owned(),
                v["fixed"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn component<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

fn rules(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_inventory_source_gives_its_expected_components() {
    let mut seen = 0;
    for entry in std::fs::read_dir(projects()).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("expected.json")) else {
            continue;
        };
        seen += 1;
        let expected: Value = serde_json::from_str(&text).unwrap();
        let (_, report) = scan_json(&[
            dir.to_str().unwrap(),
            "--osv-db",
            &osv_db(),
            "--allow-unknown",
        ]);
        let want: BTreeSet<(String, bool)> = expected["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["purl"].as_str().unwrap().to_owned(), c["direct"] == true))
            .collect();
        assert_eq!(pinned(&report), want, "{}", dir.display());
        for u in expected["unpinned"].as_array().into_iter().flatten() {
            let name = u["purl_name"].as_str().unwrap();
            let hit = report["components"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["purl"] == name);
            let hit = hit.unwrap_or_else(|| panic!("{}: {name} missing", dir.display()));
            assert!(hit.get("version").is_none(), "{name}");
            assert_eq!(hit["requirement"], u["requirement"], "{name}");
            assert_eq!(
                hit["osv"]["status"], "unknown",
                "no exact version: not checked"
            );
        }
        assert!(
            report["unreadable"].as_array().unwrap().is_empty(),
            "{}: {:#?}",
            dir.display(),
            report["unreadable"]
        );
    }
    assert!(seen >= 10, "only {seen} fixture projects");
}

#[test]
fn vulnerable_pins_are_found_offline_and_through_an_osv_api() {
    let dir = projects().join("py-requirements");
    let want: BTreeSet<(String, String, String)> = [
        ("GHSA-v845-jxx5-vc9f", "pkg:pypi/urllib3@1.26.5", "1.26.17"),
        ("GHSA-j8r2-6x86-q33q", "pkg:pypi/requests@2.28.0", "2.31.0"),
        ("GHSA-h5c8-rqwp-cp95", "pkg:pypi/jinja2@3.1.2", "3.1.3"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    let (code, offline) = scan_json(&[dir.to_str().unwrap(), "--osv-db", &osv_db()]);
    assert_eq!(code, 0);
    assert_eq!(vuln_ids(&offline), want);
    assert_eq!(
        offline["vulnerability_check"]["status"], "partial",
        "httpx>=0.27 has no exact version"
    );
    let urllib3 = offline["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "GHSA-v845-jxx5-vc9f")
        .unwrap();
    assert!(
        urllib3["aliases"]
            .as_array()
            .unwrap()
            .contains(&"CVE-2023-43804".into())
    );
    assert!(
        urllib3["rating"]["vector"]
            .as_str()
            .unwrap()
            .starts_with("CVSS:3")
    );
    let finding = offline["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "GHSA-v845-jxx5-vc9f")
        .unwrap();
    assert_eq!(finding["category"], "vulnerable_dependency");
    assert_eq!(finding["location"]["component"], "pkg:pypi/urllib3@1.26.5");
    assert_eq!(finding["location"]["file"], "requirements.txt");

    let api = FakeOsv::start(&[]);
    let (code, online) = scan_json(&[dir.to_str().unwrap(), "--osv-url", &api.url]);
    assert_eq!(code, 0);
    assert_eq!(vuln_ids(&online), want, "the API gives the same answer");
    // One advisory a page: every page is followed.
    let paged = FakeOsv::start(&["--page-size=1"]);
    let (_, r) = scan_json(&[dir.to_str().unwrap(), "--osv-url", &paged.url]);
    assert_eq!(vuln_ids(&r), want);
    // A query string or a redirect never carries the inventory elsewhere.
    let (code, r) = scan_json(&[
        dir.to_str().unwrap(),
        "--osv-url",
        &format!("{}/?key=x", api.url),
    ]);
    assert_eq!(code, 3);
    let urllib3 = component(&r, "urllib3");
    assert!(
        urllib3["osv"]["why"]
            .as_str()
            .unwrap()
            .contains("without a query")
    );
    let creds = api.url.replace("http://", "http://user:secret@");
    let (_, r) = scan_json(&[dir.to_str().unwrap(), "--osv-url", &creds]);
    assert!(
        !r.to_string().contains("secret"),
        "credentials never reach the report"
    );
    assert!(
        online["vulnerability_check"]["source"]
            .as_str()
            .unwrap()
            .starts_with("api: http://127.0.0.1:")
    );

    // The gate, and the environment variable in place of the flag.
    let r = Command::new(super::common::warden_bin())
        .args(["scan", dir.to_str().unwrap(), "--fail-on", "medium"])
        .env("WARDEN_OSV_DB", osv_db())
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(String::from_utf8_lossy(&r.stdout).contains("GHSA-v845-jxx5-vc9f"));
}

#[test]
fn no_vulnerability_source_means_unknown_never_clean() {
    let dir = projects().join("py-requirements");
    let dir = dir.to_str().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        format!("http://127.0.0.1:{port}")
    };
    let failing = FakeOsv::start(&["--fail"]);
    let missing = fixtures().join("osv/no-such-folder");
    let empty = tempfile::tempdir().unwrap();
    for args in [
        vec!["--osv-url", closed.as_str()],
        vec!["--osv-url", failing.url.as_str()],
        vec!["--osv-db", missing.to_str().unwrap()],
        vec!["--osv-db", empty.path().to_str().unwrap()],
    ] {
        let mut all = vec![dir];
        all.extend(args.iter().copied());
        let (code, report) = scan_json(&all);
        assert_eq!(code, 3, "{args:?}: unknown is not a pass");
        assert_eq!(
            report["vulnerability_check"]["status"], "unknown",
            "{args:?}"
        );
        assert_eq!(report["vulnerability_check"]["checked"], 0);
        assert!(report["vulnerabilities"].as_array().unwrap().is_empty());
        for c in report["components"].as_array().unwrap() {
            assert_eq!(c["osv"]["status"], "unknown", "{args:?} {c}");
            assert!(!c["osv"]["why"].as_str().unwrap().is_empty());
        }
        all.push("--allow-unknown");
        let (code, _) = scan_json(&all);
        assert_eq!(code, 0, "{args:?}");
    }
    let r = warden(&["scan", dir, "--osv-url", &closed]);
    assert!(r.stdout.contains("UNKNOWN"), "{}", r.stdout);
    assert!(r.stderr.contains("UNKNOWN"), "{}", r.stderr);
}

#[test]
fn osv_edge_cases_are_evaluated_as_the_schema_says() {
    let project = |py: &[&str], npm: &[(&str, &str)]| {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("requirements.txt"), py.join("\n")).unwrap();
        let deps: serde_json::Map<String, Value> = npm
            .iter()
            .map(|(n, v)| ((*n).to_owned(), Value::from(*v)))
            .collect();
        std::fs::write(
            d.path().join("package.json"),
            serde_json::json!({ "name": "edge", "dependencies": deps }).to_string(),
        )
        .unwrap();
        d
    };
    let affected = project(
        &[
            "warden-test-last==1.4.2",
            "warden-test-withdrawn==1.0.0",
            "warden-test-pep440==1.0rc1",
            "warden-test-alias==1.0",
        ],
        &[
            ("warden-test-semver", "1.0.0-beta.10"),
            ("warden-test-versions", "2.0.1"),
        ],
    );
    let (_, r) = scan_json(&[
        affected.path().to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let hit: BTreeSet<String> = r["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["component"].as_str().unwrap().to_owned())
        .collect();
    let want: BTreeSet<String> = [
        "pkg:pypi/warden-test-last@1.4.2",
        "pkg:pypi/warden-test-pep440@1.0rc1",
        "pkg:pypi/warden-test-alias@1.0",
        "pkg:npm/warden-test-semver@1.0.0-beta.10",
        "pkg:npm/warden-test-versions@2.0.1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(hit, want, "withdrawn never matches; the rest do");
    let alias: Vec<&Value> = r["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["component"] == "pkg:pypi/warden-test-alias@1.0")
        .collect();
    assert_eq!(
        alias.len(),
        1,
        "advisories sharing an alias merge: {alias:#?}"
    );
    assert_eq!(alias[0]["ids"].as_array().unwrap().len(), 2);
    assert_eq!(alias[0]["aliases"], serde_json::json!(["CVE-0000-0001"]));

    let clean = project(
        &[
            "warden-test-last==1.4.3",
            "warden-test-pep440==1.0.post1",
            "warden-test-pep440==1.0.dev0",
        ],
        &[
            ("warden-test-semver", "1.0.0-beta.1"),
            ("warden-test-versions", "2.0.2"),
        ],
    );
    let (code, r) = scan_json(&[clean.path().to_str().unwrap(), "--osv-db", &osv_db()]);
    assert_eq!(code, 0);
    assert!(
        r["vulnerabilities"].as_array().unwrap().is_empty(),
        "{:#?}",
        r["vulnerabilities"]
    );
    assert_eq!(r["vulnerability_check"]["status"], "complete");
}

#[test]
fn the_sbom_is_valid_cyclonedx_1_6_and_sarif_is_valid_sarif() {
    let dir = projects().join("npm-lock");
    let r = warden(&[
        "scan",
        dir.to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--output",
        "cyclonedx",
    ]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let bom: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(bom["specVersion"], "1.6");
    let vulns = bom["vulnerabilities"].as_array().unwrap();
    let minimist = vulns
        .iter()
        .find(|v| v["id"] == "GHSA-xvch-5gv4-984h")
        .unwrap();
    assert_eq!(minimist["affects"][0]["ref"], "pkg:npm/minimist@1.2.5");
    let root = &bom["dependencies"][0];
    assert!(
        root["dependsOn"]
            .as_array()
            .unwrap()
            .contains(&"pkg:npm/minimist@1.2.5".into())
    );
    let tmp = tempfile::tempdir().unwrap();
    let validate = |doc: &Value| {
        let f = tmp.path().join("bom.json");
        std::fs::write(&f, doc.to_string()).unwrap();
        Command::new(sdk_python())
            .arg(fixtures().join("scan/validate_cyclonedx.py"))
            .arg(&f)
            .output()
            .unwrap()
    };
    let ok = validate(&bom);
    assert!(
        ok.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    let mut broken = bom.clone();
    broken["components"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(
        !validate(&broken).status.success(),
        "the schema check can fail"
    );

    let r = warden(&[
        "scan",
        dir.to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--output",
        "sarif",
    ]);
    let sarif: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_valid(&sarif_schema(), &sarif);
    let mut bad = sarif.clone();
    bad["version"] = "9".into();
    assert!(!schema_errors(&sarif_schema(), &bad).is_empty());
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "GHSA-xvch-5gv4-984h")
        .unwrap();
    let loc = &result["locations"][0];
    assert_eq!(
        loc["physicalLocation"]["artifactLocation"]["uri"],
        "package-lock.json"
    );
    assert_eq!(
        loc["logicalLocations"][0]["fullyQualifiedName"],
        "pkg:npm/minimist@1.2.5"
    );
}

#[test]
fn manifests_say_what_they_ask_for_and_typosquats_are_named() {
    let (_, r) = scan_json(&[
        projects().join("npm-manifest").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let found = rules(&r);
    for want in [
        "npm-lifecycle-script",
        "native-addon",
        "bin-entry",
        "non-registry-dependency",
        "bundled-dependencies",
    ] {
        assert!(found.iter().any(|f| f == want), "{want} in {found:?}");
    }
    let scripts: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "npm-lifecycle-script")
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        scripts.iter().any(|m| m.contains("preinstall")),
        "{scripts:?}"
    );
    assert!(
        scripts.iter().any(|m| m.contains("postinstall")),
        "{scripts:?}"
    );
    let git = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "non-registry-dependency")
        .count();
    assert!(git >= 2, "the git and the tarball dependency");

    let (_, r) = scan_json(&[
        projects().join("py-manifest").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let found = rules(&r);
    for want in ["setup-py", "entry-points", "build-backend"] {
        assert!(found.iter().any(|f| f == want), "{want} in {found:?}");
    }

    let (_, r) = scan_json(&[
        projects().join("typosquat").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let squats: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["category"] == "typosquat")
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert_eq!(squats.len(), 2, "{squats:?}");
    assert!(
        squats
            .iter()
            .any(|m| m.contains("@modelcontextprotocol/server-filesystem"))
    );
    assert!(squats.iter().any(|m| m.contains("mcp-server-fetch")));
    // A popular package itself is no typosquat.
    let (_, r) = scan_json(&[
        real_servers().join("node").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    assert!(
        !r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["category"] == "typosquat")
    );
}

#[test]
fn real_installed_trees_and_a_registry_package() {
    let (_, py) = scan_json(&[
        real_servers().join("py").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let direct: BTreeSet<String> = py["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["direct"] == true)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        direct.contains("mcp-server-time") && direct.contains("mcp-server-git"),
        "{direct:?}"
    );
    let mcp = py["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp")
        .unwrap();
    assert_eq!(
        mcp["direct"], false,
        "the SDK is what the servers depend on"
    );
    assert_eq!(mcp["evidence"], "installed");
    assert!(mcp["license"].is_string(), "{mcp}");

    let (_, node) = scan_json(&[
        real_servers().join("node").to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let everything = node["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "@modelcontextprotocol/server-everything")
        .unwrap();
    assert_eq!(everything["direct"], true);
    assert!(node["components"].as_array().unwrap().len() > 50);

    // Fetched from the registry the way detonate fetches it, no code run.
    let (code, r) = scan_json(&["npm:minimist@1.2.5", "--osv-db", &osv_db()]);
    assert_eq!(code, 0);
    assert!(
        vuln_ids(&r)
            .iter()
            .any(|(id, c, fixed)| id == "GHSA-xvch-5gv4-984h"
                && c == "pkg:npm/minimist@1.2.5"
                && fixed == "1.2.6")
    );
}

#[test]
fn a_detonation_reports_its_servers_vulnerable_dependencies() {
    let server = projects().join("vulnerable-server/server.py");
    let detonate = |args: &[&str], env: &[(&str, &str)]| -> Value {
        let out = Command::new(super::common::warden_bin())
            .arg("detonate")
            .args(args)
            .args(["--output", "json", "--no-payloads", "--allow-inconclusive"])
            .env_remove("WARDEN_OSV_DB")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let schema = fixtures().join("../schemas/warden.report.v1.json");
    let db = osv_db();
    let command = format!("python3 {}", server.display());
    for report in [
        detonate(&[server.to_str().unwrap(), "--osv-db", &db], &[]),
        detonate(&["--mcp-command", &command], &[("WARDEN_OSV_DB", &db)]),
    ] {
        assert_valid(&schema, &report);
        assert_ne!(report["verdict"], "INCONCLUSIVE", "{}", report["why"]);
        let vuln = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["category"] == "vulnerable_dependency")
            .unwrap_or_else(|| panic!("{:#?}", report["scan"]));
        assert_eq!(vuln["rule"], "GHSA-v845-jxx5-vc9f");
        assert_eq!(vuln["location"]["component"], "pkg:pypi/urllib3@1.26.5");
        assert!(report["scan"]["components"].as_u64().unwrap() >= 1);
        assert_eq!(report["scan"]["vulnerability_check"]["status"], "complete");
    }
    // Without a source a detonation asks no one, and says so.
    let report = detonate(&[server.to_str().unwrap()], &[]);
    assert_eq!(report["scan"]["vulnerability_check"]["status"], "unknown");
    assert!(
        !report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["category"] == "vulnerable_dependency")
    );
    // SARIF: the vulnerable component is the location.
    let out = Command::new(super::common::warden_bin())
        .args([
            "detonate",
            server.to_str().unwrap(),
            "--osv-db",
            &db,
            "--no-payloads",
            "--output",
            "sarif",
        ])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&sarif_schema(), &sarif);
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "GHSA-v845-jxx5-vc9f")
        .unwrap();
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "requirements.txt"
    );
    assert_eq!(
        result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
        "pkg:pypi/urllib3@1.26.5"
    );
}

/// `fixtures/osv/fake_api.py` on a loopback port, stopped on drop.
struct FakeOsv {
    child: Child,
    url: String,
}

impl FakeOsv {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new("/usr/bin/python3")
            .arg(fixtures().join("osv/fake_api.py"))
            .arg("0")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("port? {line:?}"));
        FakeOsv {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for FakeOsv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_offline_layout_is_read_and_a_missing_ecosystem_is_unknown() {
    let dir = projects().join("py-requirements");
    let dir = dir.to_str().unwrap();
    let (_, reference) = scan_json(&[dir, "--osv-db", &osv_db()]);
    let want = vuln_ids(&reference);
    assert_eq!(want.len(), 3);
    let tmp = tempfile::tempdir().unwrap();
    for prefix in ["osv-scanner", "osv-scalibr"] {
        for eco in ["PyPI", "npm"] {
            let to = tmp.path().join(prefix).join(eco);
            std::fs::create_dir_all(&to).unwrap();
            std::fs::copy(
                fixtures().join("osv").join(eco).join("all.zip"),
                to.join("all.zip"),
            )
            .unwrap();
        }
    }
    let unpacked = fixtures().join("osv/src");
    for db in [
        unpacked.clone(),
        tmp.path().to_path_buf(),
        tmp.path().join("osv-scalibr"),
    ] {
        let (_, r) = scan_json(&[dir, "--osv-db", db.to_str().unwrap()]);
        assert_eq!(vuln_ids(&r), want, "{}", db.display());
    }
    // npm data only: the PyPI components are unknown, and say why.
    let npm_only = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(npm_only.path().join("npm")).unwrap();
    std::fs::copy(
        fixtures().join("osv/npm/all.zip"),
        npm_only.path().join("npm/all.zip"),
    )
    .unwrap();
    let (code, r) = scan_json(&[dir, "--osv-db", npm_only.path().to_str().unwrap()]);
    assert_eq!(code, 3);
    let urllib3 = component(&r, "urllib3");
    assert!(
        urllib3["osv"]["why"]
            .as_str()
            .unwrap()
            .contains("no PyPI data"),
        "{urllib3}"
    );
}

#[test]
fn what_the_inventory_could_not_read_keeps_the_check_from_complete() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("requirements.txt"), "urllib3==2.2.2\n").unwrap();
    // Over the 4 MiB manifest cap: unreadable, so its components are missing.
    let padding = " ".repeat(5 << 20);
    std::fs::write(
        d.path().join("package.json"),
        format!("{{\"dependencies\":{{\"minimist\":\"1.2.5\"}}{padding}}}"),
    )
    .unwrap();
    let (code, r) = scan_json(&[d.path().to_str().unwrap(), "--osv-db", &osv_db()]);
    assert_eq!(code, 0);
    assert_eq!(
        r["vulnerability_check"]["status"], "partial",
        "{:#}",
        r["vulnerability_check"]
    );
    assert!(r["vulnerability_check"]["incomplete"].is_string());
    assert_eq!(r["unreadable"][0]["file"], "package.json");
    // Nothing readable at all: unknown, not "nothing to check".
    std::fs::remove_file(d.path().join("requirements.txt")).unwrap();
    let (code, r) = scan_json(&[d.path().to_str().unwrap(), "--osv-db", &osv_db()]);
    assert_eq!(code, 3);
    assert_eq!(r["vulnerability_check"]["status"], "unknown");
}

#[test]
fn an_aliased_package_cannot_hide_its_install_hook() {
    let d = tempfile::tempdir().unwrap();
    let pkg = d.path().join("node_modules/helper");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"evil","version":"1.0.0","scripts":{"postinstall":"node steal.js"}}"#,
    )
    .unwrap();
    std::fs::write(
        d.path().join("package.json"),
        r#"{"name":"app","dependencies":{"helper":"npm:evil@1.0.0"}}"#,
    )
    .unwrap();
    let (_, r) = scan_json(&[
        d.path().to_str().unwrap(),
        "--osv-db",
        &osv_db(),
        "--allow-unknown",
    ]);
    let hook = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "npm-lifecycle-script")
        .unwrap_or_else(|| panic!("{:#}", r["findings"]));
    assert!(hook["message"].as_str().unwrap().contains("node steal.js"));
}

/// Issue #31: a symbolic link where `requirements.txt` would be (pointing inside the tree) was
/// skipped without a word, a dangling `-r` include dropped with a bare `continue`, the check
/// said `complete` and `--fail-on high` exited 0 over a vulnerable pin it never read. Now the
/// check is `partial`, `unreadable` says why for each, and the gate exits 3.
#[test]
fn a_scan_that_did_not_read_everything_never_passes_a_gate() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("pins")).unwrap();
    std::fs::write(d.path().join("pins/all.txt"), "urllib3==1.26.5\n").unwrap();
    std::os::unix::fs::symlink("pins/all.txt", d.path().join("requirements.txt")).unwrap();
    std::fs::write(
        d.path().join("requirements-dev.txt"),
        "-r missing.txt\nrequests==2.31.0\n",
    )
    .unwrap();
    let dir = d.path().to_str().unwrap();
    let (code, r) = scan_json(&[dir, "--osv-db", &osv_db(), "--fail-on", "high"]);
    assert_eq!(code, 3, "{:#}", r["vulnerability_check"]);
    assert_eq!(r["vulnerability_check"]["status"], "partial");
    let unreadable: Vec<(String, String)> = r["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["file"].as_str().unwrap().to_owned(),
                u["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        unreadable
            .iter()
            .any(|(f, w)| f == "requirements.txt" && w.contains("symbolic link")),
        "{unreadable:?}"
    );
    assert!(
        unreadable
            .iter()
            .any(|(f, w)| f == "requirements-dev.txt" && w.contains("missing.txt")),
        "{unreadable:?}"
    );
    // Said in so many words, and --allow-unknown lets the operator accept it.
    let (code, _) = scan_json(&[
        dir,
        "--osv-db",
        &osv_db(),
        "--fail-on",
        "high",
        "--allow-unknown",
    ]);
    assert_eq!(code, 0);
    // Without a gate the exit stays 0: the report says partial.
    let (code, _) = scan_json(&[dir, "--osv-db", &osv_db()]);
    assert_eq!(code, 0);
}

/// Issue #34: the sinks each tool's handler reaches, found with a parser, listed per tool in
/// the JSON and on the terminal; low context, never a verdict.
#[test]
fn sinks_are_listed_per_tool() {
    let file = fixtures().join("mcp/servers/desk.py").display().to_string();
    let (_, r) = scan_json(&[&file]);
    let sinks: Vec<(String, String)> = r["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["tool"].as_str().unwrap().to_owned(),
                s["family"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        sinks.contains(&("calculate".into(), "evaluator".into())),
        "{sinks:?}"
    );
    assert!(
        sinks.contains(&("report".into(), "shell".into())),
        "{sinks:?}"
    );
    assert!(!sinks.iter().any(|(t, _)| t == "shout"), "{sinks:?}");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "dangerous-sink")
            .all(|f| f["severity"] == "low"),
        "static context only"
    );
    let text = warden(&["scan", &file]);
    assert!(text.stdout.contains("sinks by tool"), "{}", text.stdout);
    assert!(text.stdout.contains("eval(expression)"), "{}", text.stdout);
}
