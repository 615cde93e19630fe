//! Testkit: drive the real `warden` binary, compile attack programs, plant canaries.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The `warden` the tests run: the binary itself, or, on a thread inside [`in_a_container`],
/// a wrapper that starts it where a container runtime would (a masked `/proc`).
pub fn warden_bin() -> &'static str {
    if IN_CONTAINER.with(std::cell::Cell::get) {
        container_wrapper()
    } else {
        the_binary()
    }
}

/// The `warden` binary itself.
pub fn the_binary() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

thread_local! {
    static IN_CONTAINER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `body` with every `warden` it starts (through [`warden_bin`]) inside the simulated
/// container of `fixtures/containers/masked-proc.sh`.
pub fn in_a_container(body: impl FnOnce()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_CONTAINER.with(|c| c.set(false));
        }
    }
    IN_CONTAINER.with(|c| c.set(true));
    let _reset = Reset;
    body();
}

/// A script that runs the binary under `masked-proc.sh` (made once per test process).
fn container_wrapper() -> &'static str {
    static WRAPPER: OnceLock<String> = OnceLock::new();
    WRAPPER.get_or_init(|| {
        // Next to the binary (one per build, removed with `target/`), written whole then renamed
        // into place: concurrent test processes write the same text.
        let path = Path::new(the_binary()).with_file_name("warden-in-a-container");
        let script = format!(
            "#!/bin/sh\nexec {} {} \"$@\"\n",
            fixtures().join("containers/masked-proc.sh").display(),
            the_binary()
        );
        let partial = path.with_extension(std::process::id().to_string());
        std::fs::write(&partial, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&partial, &path).unwrap();
        path.display().to_string()
    })
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Where `./setup.sh` installed the public MCP servers and the SDK.
pub fn real_servers() -> PathBuf {
    std::env::var_os("WARDEN_REAL_SERVERS")
        .map_or_else(|| PathBuf::from("/opt/warden-real-servers"), PathBuf::from)
}

/// The Python of the official MCP SDK's virtual environment (made by `./setup.sh`).
pub fn sdk_python() -> PathBuf {
    real_servers().join("sdk/bin/python")
}

/// Run the SDK client `fixtures/mcp/<script>` with `args`: it must exit 0 with a last line
/// `N passed, 0 failed` where N is at least `min`.
pub fn assert_sdk_script(script: &str, args: &[&str], min: usize) {
    let out = std::process::Command::new(sdk_python())
        .arg(fixtures().join("mcp").join(script))
        .args(args)
        .output()
        .expect("the SDK's python runs (./setup.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    let passed: usize = last
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        out.status.success() && last.ends_with(" 0 failed") && passed >= min,
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn attacks() -> PathBuf {
    fixtures().join("attacks")
}

/// A unique token for canaries and process names.
pub fn nonce() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}{:09}{}",
        std::process::id(),
        t,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[derive(Debug)]
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `warden ARGS...` to completion.
pub fn warden(args: &[&str]) -> Run {
    let out = Command::new(warden_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("warden runs");
    Run {
        status: out.status.code().unwrap_or(128 + 9),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The JSON lines of a `--trace` file (none if it is missing).
pub fn read_events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `warden run --json OPTIONS -- CMD` and parse the outcome.
pub fn run_json(options: &[&str], cmd: &[&str]) -> serde_json::Value {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(options);
    args.push("--");
    args.extend_from_slice(cmd);
    let r = warden(&args);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {r:?}"))
}

/// Compile `fixtures/attacks/NAME.c` once per test run; returns the binary.
pub fn compiled(name: &str) -> PathBuf {
    compiled_from(&attacks(), name)
}

/// Compile `DIR/NAME.c` once per test run; returns the binary.
pub fn compiled_from(dir: &Path, name: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let out = DIR
        .get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .join(name);
    // Tests compile concurrently; each name is compiled by whoever gets there first.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap();
    if !out.exists() {
        let src = dir.join(format!("{name}.c"));
        let st = Command::new("cc")
            .args(["-O1", "-Wall", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("cc runs (install gcc)");
        assert!(st.success(), "compiling {src:?}");
    }
    out
}

/// A fresh workspace holding a copy of attack `NAME` (compiled C, or a script).
pub fn workspace_with(name: &str) -> tempfile::TempDir {
    let ws = tempfile::Builder::new()
        .prefix("warden-test-ws-")
        .tempdir()
        .unwrap();
    let src = if name.contains('.') {
        attacks().join(name)
    } else {
        compiled(name)
    };
    std::fs::copy(&src, ws.path().join(name)).unwrap();
    ws
}

/// Run attack `NAME` in the jail with its own workspace.
pub fn attack(name: &str, args: &[&str]) -> Run {
    let ws = workspace_with(name);
    let prog = format!("./{name}");
    let mut argv = vec![
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--timeout",
        "60",
        "--",
    ];
    if name.ends_with(".py") {
        argv.push("python3");
    } else if name.ends_with(".sh") {
        argv.push("sh");
    }
    argv.push(&prog);
    argv.extend_from_slice(args);
    warden(&argv)
}

/// The oracle of the battery: every check stopped as expected, and at least `min_ok` checks ran.
pub fn assert_blocked(r: &Run, min_ok: usize) {
    let oks = r.stdout.lines().filter(|l| l.starts_with("ok ")).count();
    let bad: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("ESCAPE") || l.starts_with("UNEXPECTED"))
        .collect();
    assert!(
        bad.is_empty(),
        "attack not stopped as expected: {bad:#?}\n{r:?}"
    );
    assert!(oks >= min_ok, "only {oks} of {min_ok} checks ran: {r:?}");
    assert_eq!(r.status, 0, "{r:?}");
}

/// Host processes whose command line contains `needle`.
pub fn host_processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmd).contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

/// [`host_processes_with`], and the jail's init above each of them: the init shows
/// `/sbin/init` (never the host's command line), so it is found as the parent named `init`.
pub fn host_processes_and_inits_with(needle: &str) -> Vec<i32> {
    let mut found = host_processes_with(needle);
    let inits: Vec<i32> = found
        .iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let ppid: i32 = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))?
                .trim()
                .parse()
                .ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{ppid}/comm")).ok()?;
            (comm.trim() == "init").then_some(ppid)
        })
        .collect();
    for pid in inits {
        if !found.contains(&pid) {
            found.push(pid);
        }
    }
    found
}

/// Wait up to `secs` for `cond`.
pub fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cond()
}

/// A report's findings as (rule, severity, tool), those of the given severities only (all when
/// The decoy home of a detonation report: `/home/` and the persona's user the run drew (its
/// `sandbox.user`), after checking that it is a developer's name and never `sandbox`.
pub fn chamber_home(r: &serde_json::Value) -> String {
    let user = r["sandbox"]["user"]
        .as_str()
        .expect("the report names its user");
    assert!(
        warden_jail::persona::POOL.iter().any(|p| p.user == user),
        "{user} is not one of the persona pool's"
    );
    format!("/home/{user}")
}

/// `severities` is empty).
pub fn finding_rows(
    report: &serde_json::Value,
    severities: &[&str],
) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| severities.is_empty() || severities.contains(&f["severity"].as_str().unwrap()))
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
                f["tool"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Run `program ARGS` (stdin closed), insist on exit status 0 and parse stdout as JSON.
pub fn json_of(program: &str, args: &[&str]) -> serde_json::Value {
    json_of_with(program, args, &[])
}

/// [`json_of`] with extra environment variables.
pub fn json_of_with(program: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    json_exiting(0, program, args, env)
}

/// `program args` must exit with `code`; its standard output, parsed as JSON.
pub fn json_exiting(
    code: i32,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> serde_json::Value {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The result of call `i` in an SDK client's report (`fixtures/recon/client.py`), which must
/// have succeeded.
pub fn call_ok(report: &serde_json::Value, i: usize) -> &serde_json::Value {
    let c = &report["calls"][i];
    assert_eq!(c["is_error"], false, "call {i}: {c}");
    &c["result"]
}

/// The error of call `i` in an SDK client's report, which must have failed.
pub fn call_err(report: &serde_json::Value, i: usize) -> &serde_json::Value {
    let c = &report["calls"][i];
    assert_eq!(c["is_error"], true, "call {i}: {c}");
    &c["error"]
}

/// The `name` of each object in the JSON array `list` (tools as listed by a server or a report).
pub fn names(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// Whether the report `r` holds an event of `kind` whose data has every `(field, value)` of
/// `fields`.
pub fn has_event(r: &serde_json::Value, kind: &str, fields: &[(&str, serde_json::Value)]) -> bool {
    r["events"].as_array().is_some_and(|events| {
        events
            .iter()
            .any(|e| e["kind"] == kind && fields.iter().all(|(k, v)| e["data"][*k] == *v))
    })
}
