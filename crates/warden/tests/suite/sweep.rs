//! `warden sweep` through the real binary: 34 targets (every fixture server and the real
//! public servers `./setup.sh` installs) with `--jobs 2`, killed with SIGKILL half-way and
//! resumed without redoing work or leaving a detonation behind; four shards run as a Kubernetes
//! Indexed Job would run them (JOB_COMPLETION_INDEX, the container's masked /proc and the
//! securityContext's capabilities), merged, equal to one sweep; the manifests valid for two
//! Kubernetes versions. Everything runs in a network namespace of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{fixtures, host_processes_with, real_servers, sdk_python, the_binary};

/// The capabilities deploy/kubernetes/job.yaml grants, as setpriv's bounding set.
const POD_CAPS: &str = "-all,+sys_admin,+setuid,+setgid,+sys_ptrace,+net_admin,+net_bind_service,+net_raw,+kill,+dac_override,+sys_chroot";

/// Every fixture server (not the helper modules), the vulnerable-requirements server, and
/// the real public servers by their start commands: 34 targets.
fn full_list(dir: &Path) -> (PathBuf, usize) {
    let mut lines: Vec<String> = std::fs::read_dir(fixtures().join("mcp/servers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            !name.starts_with("mini.") && (name.ends_with(".py") || name.ends_with(".js"))
        })
        .map(|p| p.display().to_string())
        .collect();
    lines.sort();
    lines.push(
        fixtures()
            .join("scan/projects/vulnerable-server/server.py")
            .display()
            .to_string(),
    );
    let real = real_servers();
    let node = real.join("node/node_modules/.bin");
    for command in [
        real.join("py/bin/mcp-server-time").display().to_string(),
        real.join("py/bin/mcp-server-fetch").display().to_string(),
        node.join("mcp-server-everything").display().to_string(),
        format!(
            "{} /workspace",
            node.join("mcp-server-filesystem").display()
        ),
        node.join("mcp-server-memory").display().to_string(),
    ] {
        lines.push(serde_json::json!({ "command": command }).to_string());
    }
    lines.insert(0, "# the sweep test's list".into());
    let path = dir.join("targets.txt");
    std::fs::write(&path, lines.join("\n")).unwrap();
    (path, lines.len() - 1)
}

/// What every detonation of these tests gets.
fn detonate_options() -> Vec<String> {
    [
        "--no-payloads",
        "--timeout",
        "40s",
        "--call-timeout",
        "3s",
        "--osv-db",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([fixtures().join("osv").display().to_string()])
    .collect()
}

/// `warden sweep ARGS -- <detonate options>` under `unshare --net`, with `prefix` programs
/// before it (setpriv, the container wrapper) and `env`.
fn sweep_command(prefix: &[&str], args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.arg("--net");
    cmd.args(prefix);
    cmd.arg(the_binary()).arg("sweep").args(args).arg("--");
    cmd.args(detonate_options());
    cmd.envs(env.iter().copied()).stdin(Stdio::null());
    cmd
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn verdicts(results: &[Value]) -> BTreeMap<String, String> {
    results
        .iter()
        .map(|r| {
            (
                r["target"].as_str().unwrap().to_owned(),
                r["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn thirty_targets_two_at_a_time_killed_half_way_and_resumed() {
    let tmp = tempfile::tempdir().unwrap();
    let (list, n) = full_list(tmp.path());
    assert!(n >= 30, "{n} targets");
    let out = tmp.path().join("out");
    let (list_s, out_s) = (list.to_str().unwrap(), out.to_str().unwrap());
    let results = out.join("results.jsonl");

    // Killed (SIGKILL: no chance to clean up) once a few outcomes are recorded.
    let mut first = sweep_command(&[], &[list_s, "--out", out_s, "--jobs", "2"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    while lines(&results).len() < 6 && begun.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(100));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let before = lines(&results);
    assert!(
        before.len() >= 6 && before.len() < n,
        "{} recorded",
        before.len()
    );
    // Its detonations die with it (they carry the output folder in their command line).
    assert!(
        super::common::eventually(15, || host_processes_with(out_s).is_empty()),
        "detonations outlived the sweep: {:?}",
        host_processes_with(out_s)
    );

    // A new sweep into the same folder needs --resume.
    let refused = sweep_command(&[], &[list_s, "--out", out_s], &[])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--resume"));

    let resumed = sweep_command(
        &[],
        &[list_s, "--out", out_s, "--jobs", "2", "--resume"],
        &[],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("{} already recorded", before.len())),
        "{stderr}"
    );
    let all = lines(&results);
    let keys: BTreeSet<&str> = all.iter().map(|r| r["target"].as_str().unwrap()).collect();
    assert_eq!(all.len(), n, "every target recorded exactly once");
    assert_eq!(keys.len(), n);
    let v = verdicts(&all);
    let verdict_of = |name: &str| {
        v.iter()
            .find(|(k, _)| k.ends_with(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{name}: {v:?}"))
    };
    assert_eq!(verdict_of("/thief.py"), "CRITICAL");
    assert_eq!(verdict_of("/benign_echo.py"), "PASS");
    assert_eq!(verdict_of("/broken.py"), "INCONCLUSIVE");
    assert_eq!(verdict_of("bin/mcp-server-time"), "PASS");
    let vulnerable = all
        .iter()
        .find(|r| {
            r["target"]
                .as_str()
                .unwrap()
                .ends_with("vulnerable-server/server.py")
        })
        .unwrap();
    assert!(
        vulnerable["categories"]
            .as_array()
            .unwrap()
            .contains(&"vulnerable_dependency".into())
    );
    for r in &all {
        assert!(r["error"].is_null(), "{}: {}", r["target"], r["error"]);
        let report = out
            .join("reports")
            .join(format!("{}.json", r["slug"].as_str().unwrap()));
        assert!(report.is_file(), "{}", report.display());
    }

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["targets"], n);
    let inconclusive = summary["inconclusive"].as_array().unwrap();
    assert!(!inconclusive.is_empty());
    assert!(
        inconclusive
            .iter()
            .all(|i| i["why"].as_str().is_some_and(|w| !w.is_empty())),
        "every INCONCLUSIVE run says why: {inconclusive:?}"
    );
    assert!(!summary["top_findings"].as_array().unwrap().is_empty());
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("thief.py") && index.contains("<script>"));
    assert!(
        !index.contains("<img"),
        "nothing a server chose becomes markup"
    );
}

/// The summary without what differs between runs.
fn comparable(summary_file: &Path) -> Value {
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(summary_file).unwrap()).unwrap();
    s.as_object_mut().unwrap().remove("timing");
    s
}

#[test]
fn four_shards_run_as_kubernetes_runs_them_merge_into_one_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    // Targets whose verdicts do not depend on timing.
    let names = [
        "benign_echo.py",
        "thief.py",
        "thief.js",
        "broken.py",
        "poisoned.py",
        "poisoned.js",
        "vulnerable.py",
        "ordinary.py",
        "markup.py",
        "startup_shell.py",
        "fileless.py",
        "injecting.py",
    ];
    let list = tmp.path().join("targets.txt");
    let text: Vec<String> = names
        .iter()
        .map(|n| fixtures().join("mcp/servers").join(n).display().to_string())
        .collect();
    std::fs::write(&list, text.join("\n")).unwrap();
    let list_s = list.to_str().unwrap();

    let single = tmp.path().join("single");
    let r = sweep_command(
        &[],
        &[list_s, "--out", single.to_str().unwrap(), "--jobs", "2"],
        &[],
    )
    .output()
    .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );

    // The pod command of each index, as deploy/kubernetes/job.yaml runs it: the index from
    // JOB_COMPLETION_INDEX, the container's masked /proc, only the pod's capabilities.
    let masked = fixtures().join("containers/masked-proc.sh");
    let prefix = [
        "setpriv",
        "--bounding-set",
        POD_CAPS,
        "--inh-caps=-all",
        "--",
        masked.to_str().unwrap(),
    ];
    let shard_dirs: Vec<PathBuf> = (0..4)
        .map(|i| tmp.path().join(format!("shard-{i}")))
        .collect();
    for pair in [[0usize, 1], [2, 3]] {
        let children: Vec<_> = pair
            .iter()
            .map(|&i| {
                let index = i.to_string();
                sweep_command(
                    &prefix,
                    &[
                        list_s,
                        "--out",
                        shard_dirs[i].to_str().unwrap(),
                        "--shard",
                        "/4",
                        "--jobs",
                        "1",
                        "--resume",
                    ],
                    &[("JOB_COMPLETION_INDEX", index.as_str())],
                )
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let per_shard: Vec<Vec<Value>> = shard_dirs
        .iter()
        .map(|d| lines(&d.join("results.jsonl")))
        .collect();
    let total: usize = per_shard.iter().map(Vec::len).sum();
    let union: BTreeSet<String> = per_shard
        .iter()
        .flatten()
        .map(|r| r["target"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        total,
        names.len(),
        "each target judged by exactly one shard"
    );
    assert_eq!(union.len(), names.len());
    assert!(
        per_shard.iter().filter(|s| !s.is_empty()).count() >= 2,
        "the work was split"
    );

    let merged = tmp.path().join("merged");
    let mut args: Vec<&str> = vec!["sweep", "merge"];
    args.extend(shard_dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap()]);
    let r = Command::new(the_binary()).args(&args).output().unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        comparable(&merged.join("summary.json")),
        comparable(&single.join("summary.json")),
        "the merged shards say what one sweep says"
    );
    assert_eq!(
        verdicts(&lines(&merged.join("results.jsonl"))),
        verdicts(&lines(&single.join("results.jsonl")))
    );
    for r in lines(&merged.join("results.jsonl")) {
        let slug = r["slug"].as_str().unwrap();
        assert!(
            merged
                .join("reports")
                .join(format!("{slug}.json"))
                .is_file()
        );
    }
}

#[test]
fn the_kubernetes_manifests_are_valid_for_two_versions() {
    let dir = fixtures().join("../deploy/kubernetes");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    assert!(files.len() >= 4);
    let validator = sdk_python().with_file_name("kubernetes-validate");
    let validate = |version: &str, files: &[PathBuf]| {
        Command::new(&validator)
            .args(["--strict", "--quiet", "-k", version])
            .args(files)
            .output()
            .unwrap()
    };
    for version in ["1.33.0", "1.37.0"] {
        let r = validate(version, &files);
        assert!(
            r.status.success(),
            "{version}: {}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
    }
    // The check can fail: a misspelt field in the Job.
    let job = std::fs::read_to_string(dir.join("job.yaml")).unwrap();
    assert!(job.contains("completionMode: Indexed"));
    for cap in [
        "SYS_ADMIN",
        "SETUID",
        "SETGID",
        "SYS_PTRACE",
        "NET_ADMIN",
        "NET_BIND_SERVICE",
        "NET_RAW",
        "KILL",
        "DAC_OVERRIDE",
        "SYS_CHROOT",
    ] {
        assert!(job.contains(&format!("- {cap}")), "{cap}");
    }
    let broken = tempfile::tempdir().unwrap();
    let bad = broken.path().join("job.yaml");
    std::fs::write(
        &bad,
        job.replace("procMount: Default", "procMounts: Default"),
    )
    .unwrap();
    assert!(!validate("1.37.0", &[bad]).status.success());
}

#[test]
fn a_list_or_a_shard_that_makes_no_sense_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let list = tmp.path().join("l.txt");
    std::fs::write(&list, "{\"env\":{}}\n").unwrap();
    let out = tmp.path().join("o");
    let run = |args: &[&str]| {
        Command::new(the_binary())
            .arg("sweep")
            .args(args)
            .output()
            .unwrap()
    };
    let r = run(&[list.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("l.txt:1"));
    std::fs::write(&list, "fixtures/x.py\n").unwrap();
    for shard in ["4/4", "a/b", "1/0"] {
        let r = run(&[
            list.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--shard",
            shard,
        ]);
        assert_eq!(r.status.code(), Some(2), "{shard}");
    }
}

#[test]
fn the_target_timeout_and_the_memory_budget_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let list = tmp.path().join("l.txt");
    // Works 5.5 s before it answers initialize: longer than the sweep lets it live.
    std::fs::write(
        &list,
        fixtures()
            .join("mcp/servers/slow_start.py")
            .display()
            .to_string(),
    )
    .unwrap();
    let out = tmp.path().join("o");
    let r = Command::new(the_binary())
        .args([
            "sweep",
            list.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args([
            "--jobs",
            "2",
            "--memory-total",
            "1G",
            "--target-timeout",
            "1s",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 at once, not 2"), "{stderr}");
    let rec = lines(&out.join("results.jsonl"));
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0]["verdict"], "ERROR");
    assert!(
        rec[0]["error"]
            .as_str()
            .unwrap()
            .contains("killed after 1 s"),
        "{}",
        rec[0]
    );
}

/// Issue #31: `sweep merge` read `slug` from a shard's `results.jsonl` as it was, so
/// `"../../../victim/config"` read files outside the shard and wrote outside `--out`. A slug
/// that is not a sweep's is refused, naming the shard's file and line, and nothing outside is
/// touched.
#[test]
fn merge_refuses_a_slug_that_leaves_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("config.json"), "keep me").unwrap();
    let shard = tmp.path().join("a/b/shard");
    std::fs::create_dir_all(shard.join("reports")).unwrap();
    let good = outcome_line();
    let mut bad = good.clone();
    bad["target"] = "npm:evil".into();
    bad["slug"] = "../../../victim/config".into();
    std::fs::write(shard.join("results.jsonl"), format!("{good}\n{bad}\n")).unwrap();
    let out = tmp.path().join("a/b/out");
    let r = Command::new(the_binary())
        .args([
            "sweep",
            "merge",
            shard.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_ne!(r.status.code(), Some(0), "{err}");
    assert!(err.contains("results.jsonl:2"), "{err}");
    assert!(err.contains("victim/config"), "{err}");
    assert_eq!(
        std::fs::read_to_string(victim.join("config.json")).unwrap(),
        "keep me"
    );
    assert!(!tmp.path().join("victim/config.html").exists());
}

/// Issue #31: merging a folder into itself compared the two paths as strings; the same file
/// reached by another spelling was "copied" onto itself and truncated to nothing. Files are
/// compared by identity now, and a report that is the destination is left as it is.
#[test]
fn merge_into_the_same_folder_keeps_every_report() {
    let tmp = tempfile::tempdir().unwrap();
    let shard = tmp.path().join("shard");
    std::fs::create_dir_all(shard.join("reports")).unwrap();
    let line = outcome_line();
    std::fs::write(shard.join("results.jsonl"), format!("{line}\n")).unwrap();
    std::fs::write(
        shard.join("reports/npm_ok-0123abcd.json"),
        "{\"verdict\":\"PASS\"}",
    )
    .unwrap();
    // The same folder, spelled another way.
    let other = format!("{}/./", shard.display());
    let r = merge(&shard, &other);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(shard.join("reports/npm_ok-0123abcd.json")).unwrap(),
        "{\"verdict\":\"PASS\"}"
    );
}

/// A results line as a sweep writes it, for `npm:ok`.
fn outcome_line() -> Value {
    serde_json::json!({
        "target": "npm:ok", "version": "1", "slug": "npm_ok-0123abcd", "verdict": "PASS",
        "score": 0, "categories": [], "duration_ms": 1,
    })
}

/// `warden sweep merge SHARD --out OUT`.
fn merge(shard: &Path, out: &str) -> std::process::Output {
    Command::new(the_binary())
        .args(["sweep", "merge", shard.to_str().unwrap(), "--out", out])
        .output()
        .unwrap()
}
