//! Install lifecycles of source folders: a local Python project's build (`setup.py`) runs in
//! the jail, with the package index as its only egress; `github:` clones are installed as
//! projects (npm hooks, pip install into the workspace venv). GitHub is not reachable from
//! here, so git's own `url.<base>.insteadOf` (in a `GIT_CONFIG_GLOBAL` of the test's own)
//! points `https://github.com/warden-fixtures/` at bare repositories made from the fixtures.

use serde_json::Value;

use super::common::*;

fn rows(r: &Value) -> Vec<(String, String)> {
    finding_rows(r, &[])
        .into_iter()
        .map(|(rule, sev, _)| (rule, sev))
        .collect()
}

fn expect_build_hook_findings(r: &Value, hook: &str) {
    let f = rows(r);
    for (rule, sev) in [
        ("install-script", "medium"),
        ("install-writes-outside", "medium"),
        ("sensitive-file-read", "medium"),
        // The consequence the verdict rests on: a shell start-up file rewritten.
        ("persistence-write", "high"),
    ] {
        assert!(f.contains(&(rule.into(), sev.into())), "{rule}: {f:?}");
    }
    assert_eq!(r["verdict"], "HIGH");
    let events = r["events"].as_array().unwrap();
    let key = format!("{}/.ssh/id_rsa", chamber_home(r));
    let read = events
        .iter()
        .find(|e| e["kind"] == "file.open" && e["data"]["path"] == key.as_str())
        .expect("the key was read");
    assert_eq!(
        read["triggered_by"], "install",
        "by the build, not the server"
    );
    let script = events
        .iter()
        .find(|e| e["kind"] == "install.script")
        .unwrap();
    assert_eq!(script["data"]["hook"], hook);
}

#[test]
pub fn a_local_python_projects_build_runs_in_the_jail_and_is_judged() {
    let folder = fixtures().join("mcp/py-build-hook");
    let before = std::fs::read_dir(&folder).unwrap().count();
    let r = json_of(
        warden_bin(),
        &[
            "detonate",
            "--output",
            "json",
            "--no-payloads",
            folder.to_str().unwrap(),
        ],
    );
    expect_build_hook_findings(&r, "setup.py");
    assert_eq!(r["harness"]["install_exit_code"], 0, "the build succeeded");
    // The build reached the index for its build requirements, and nothing else.
    let events = r["events"].as_array().unwrap();
    let sends: Vec<&Value> = events.iter().filter(|e| e["kind"] == "net.send").collect();
    assert!(!sends.is_empty());
    assert!(
        sends.iter().all(|e| e["data"]["captured"] == "forwarded"
            && ["pypi.org", "files.pythonhosted.org"]
                .contains(&e["data"]["host"].as_str().unwrap())
            && e["triggered_by"] == "install"),
        "{sends:?}"
    );
    // The operator's folder is untouched: the build ran on a copy.
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), before);
    assert!(!folder.join("build").exists());
}

/// A change made to a fixture's copy before it is committed.
type Patch = fn(&std::path::Path);

/// Bare repositories of the given fixture folders (each changed by its patch), and a git
/// configuration that makes `https://github.com/warden-fixtures/NAME.git` clone them.
fn fake_github(repos: &[(&str, &str, Patch)]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str], cwd: &std::path::Path| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
            .args(args)
            .current_dir(cwd)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    for (name, fixture, patch) in repos {
        let work = dir.path().join(format!("{name}-work"));
        copy_dir(&fixtures().join(fixture), &work);
        patch(&work);
        git(&["init", "-q", "-b", "main"], &work);
        git(&["add", "-A"], &work);
        git(&["commit", "-qm", "fixture"], &work);
        let bare = format!("{}/{name}.git", dir.path().display());
        git(&["clone", "-q", "--bare", ".", &bare], &work);
    }
    let config = dir.path().join("gitconfig");
    std::fs::write(
        &config,
        format!(
            "[url \"file://{}/\"]\n\tinsteadOf = https://github.com/warden-fixtures/\n",
            dir.path().display()
        ),
    )
    .unwrap();
    (dir, config)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
pub fn github_clones_are_installed_as_projects() {
    // The Node repository needs a registry dependency (its server requires it), and carries
    // what would steer a host-side npm run inside it: a project .npmrc pointing the registry
    // nowhere.
    let node: Patch = |w| {
        let pkg = w.join("package.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&pkg).unwrap()).unwrap();
        v["dependencies"] = serde_json::json!({ "is-number": "7.0.0" });
        std::fs::write(&pkg, v.to_string()).unwrap();
        let server = w.join("server.js");
        let code = std::fs::read_to_string(&server).unwrap();
        std::fs::write(&server, format!("require(\"is-number\");\n{code}")).unwrap();
        std::fs::write(w.join(".npmrc"), "registry=http://127.0.0.1:9/\n").unwrap();
    };
    let (_keep, config) = fake_github(&[
        ("left-clock", "mcp/npm-hook", node),
        ("left-calendar", "mcp/py-build-hook", |_| {}),
    ]);
    let env = [("GIT_CONFIG_GLOBAL", config.to_str().unwrap())];
    let detonate = |target: &str, wrap: &[&str]| {
        let mut args: Vec<&str> = wrap.to_vec();
        args.extend([
            warden_bin(),
            "detonate",
            "--output",
            "json",
            "--no-payloads",
        ]);
        args.push(target);
        let (program, rest) = args.split_first().unwrap();
        json_of_with(program, rest, &env)
    };
    // Node: the dependency comes from the registry (the clone's .npmrc is not consulted).
    let r = detonate("github:warden-fixtures/left-clock", &[]);
    let f = rows(&r);
    assert!(
        f.contains(&("install-script".into(), "medium".into())),
        "{f:?}"
    );
    assert!(
        f.contains(&("sensitive-file-read".into(), "medium".into())),
        "{f:?}"
    );
    assert!(
        f.contains(&("persistence-write".into(), "high".into())),
        "{f:?}"
    );
    assert_eq!(r["harness"]["argv"][1], "/workspace/src/server.js");
    assert_eq!(
        r["tools"][0]["name"], "now",
        "the server found its dependency"
    );

    // Python: pip installs the clone into the workspace venv (its build requirements come from
    // the index); with no console script, the project's server.py runs on the venv's Python.
    let r = detonate("github:warden-fixtures/left-calendar", &[]);
    expect_build_hook_findings(&r, "setup.py");
    assert_eq!(r["harness"]["install_exit_code"], 0);
    assert_eq!(
        r["harness"]["argv"],
        serde_json::json!(["python3", "/workspace/src/server.py"])
    );
    let started = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "process.spawn" && e["triggered_by"] == "startup")
        .expect("the server started");
    assert_eq!(started["data"]["path"], "/workspace/venv/bin/python3");
    assert_eq!(r["tools"][0]["name"], "today");
}
