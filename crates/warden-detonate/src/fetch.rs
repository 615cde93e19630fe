//! `npm:`, `pypi:` and `github:` targets: fetched with the ecosystem's own client, so the
//! machine's configured mirrors apply, and without running any of the package's code on the
//! host (`npm install --ignore-scripts`, `pip download --only-binary=:all:`, `git clone`).
//! Everything that does run package code — npm lifecycle scripts, the Python install — runs
//! later inside the jail, in the `install` window.
//!
//! A Python package that is not all wheels (an sdist somewhere in its tree) cannot be
//! downloaded on the host without running its build backend, so it is fetched *and* built
//! inside the jail instead: pip there reaches the configured index through the jail's egress
//! allowlist (the index's host, and `files.pythonhosted.org` for PyPI), and nothing else.
//!
//! The package lands in a fresh host folder that the jail mounts at `/workspace` for both the
//! install phase and the server.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// A fetched package.
#[derive(Debug)]
pub struct Fetched {
    /// The host folder mounted at `/workspace` (its own tmpfs when we can mount one; unmounted
    /// before the folder is removed).
    pub workspace: tempfile::TempDir,
    /// The install phase's command inside the jail, if there is code to run.
    pub install: Option<Vec<String>>,
    /// `install.script` data: the lifecycle hooks that install phase runs.
    pub hooks: Vec<Value>,
    /// How to find the start command once installed.
    pub entry: Entry,
    /// The manifest, relative to the workspace (SARIF locations).
    pub location: Option<String>,
    /// Host names the install phase may reach (a package index), none by default.
    pub egress: Vec<String>,
}

/// How the start command is found.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Known now.
    Argv(Vec<String>),
    /// A console script of the venv at `/workspace/venv`, once installed: the one named like
    /// the package, else the only one.
    PythonScript(String),
}

/// A name or version: letters, digits, `.`, `_`, `-`; not starting with `-` or `.`.
fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 214
        && !s.starts_with(['-', '.'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// A package spec that cannot smuggle options, paths, URLs or git shorthands into a client's
/// command line: `NAME[@VERSION]`, and for npm `@SCOPE/NAME[@VERSION]`.
fn checked(spec: &str, scoped: bool) -> Result<&str> {
    let (name, version) = match spec.rfind('@') {
        Some(i) if i > 0 => (&spec[..i], Some(&spec[i + 1..])),
        _ => (spec, None),
    };
    let name_ok = match name.strip_prefix('@') {
        Some(rest) if scoped => rest
            .split_once('/')
            .is_some_and(|(s, n)| plain(s) && plain(n)),
        _ => plain(name),
    };
    if name_ok && version.is_none_or(plain) {
        Ok(spec)
    } else {
        bail!("package spec {spec:?} is not a plain name[@version]")
    }
}

/// The host environment for fetch clients: no git (a git dependency would be cloned and its
/// `prepare` script run even under `--ignore-scripts`), no prompts.
fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.env("npm_config_git", "/bin/false")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .env("PIP_NO_INPUT", "1")
}

/// Kill the process group a fetch step leads.
fn kill_group(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let group = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// How long one fetch step may take.
const FETCH_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = quiet(cmd)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("{what}: cannot start"))?;
    let group = i32::try_from(child.id()).unwrap_or(0);
    if let Ok(mut g) = GROUPS.lock() {
        g.push(group);
    }
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut text);
        }
        text
    });
    let deadline = std::time::Instant::now() + FETCH_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            kill_group(&child);
            let _ = child.wait();
            bail!(
                "{what}: no result after {} s (is the registry reachable?)",
                FETCH_LIMIT.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Whatever it left behind in its group goes too (a descendant holding stderr open would
    // otherwise keep the reader waiting).
    kill_group(&child);
    if let Ok(mut g) = GROUPS.lock() {
        g.retain(|p| *p != group);
    }
    let err = reader.join().unwrap_or_default();
    if !status.success() {
        bail!(
            "{what} failed: {}",
            err.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(())
}

/// Size of a fetched package's workspace (the package, its dependencies and what installing
/// them writes), so a hostile install cannot fill the host's disk.
pub const WORKSPACE_BYTES: u64 = 2 << 30;

impl Drop for Fetched {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.workspace.path(), nix::mount::MntFlags::MNT_DETACH);
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != self.workspace.path());
        }
    }
}

/// Package workspaces that exist right now, for [`remove_workspaces`].
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// Process groups of fetch clients running right now.
static GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Kill every fetch client still running and remove every package workspace that still
/// exists (unmounted, then deleted). For a process that is about to exit on a signal, when
/// destructors will not run; the jails themselves go with their lifelines.
pub fn remove_workspaces() {
    let groups = GROUPS
        .lock()
        .map(|mut g| std::mem::take(&mut *g))
        .unwrap_or_default();
    for g in groups.into_iter().filter(|g| *g > 1) {
        let pgid = nix::unistd::Pid::from_raw(g);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let live = LIVE
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    for dir in live {
        let _ = nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn workspace() -> Result<tempfile::TempDir> {
    // Not under /tmp: the jail owns that path.
    let base = Path::new("/var/tmp");
    let dir = tempfile::Builder::new()
        .prefix("warden-detonate-")
        .tempdir_in(if base.is_dir() { base } else { Path::new(".") })
        .context("creating the package folder")?;
    let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
    let opts = format!("size={WORKSPACE_BYTES},mode=0755");
    let mounted = nix::mount::mount(
        Some("tmpfs"),
        dir.path(),
        Some("tmpfs"),
        flags,
        Some(opts.as_str()),
    );
    match mounted {
        Ok(()) => {
            let private = nix::mount::MsFlags::MS_PRIVATE;
            let none = None::<&str>;
            let _ = nix::mount::mount(none, dir.path(), none, private, none);
        }
        Err(e) => tracing::warn!(error = %e, "the package workspace is not size-limited"),
    }
    if let Ok(mut live) = LIVE.lock() {
        live.push(dir.path().to_path_buf());
    }
    eprintln!("warden detonate: fetching into {}", dir.path().display());
    // The jail's user (id-mapped from the owner) installs into it.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    Ok(dir)
}

/// Lifecycle hooks of every package under `node_modules` (two levels, for scopes).
fn npm_hooks(modules: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut dirs = Vec::new();
    for e in std::fs::read_dir(modules).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('@') {
            dirs.extend(
                std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else {
            dirs.push(p);
        }
    }
    dirs.sort();
    for d in dirs.iter().take(5000) {
        let Ok(text) = std::fs::read_to_string(d.join("package.json")) else {
            continue;
        };
        let Ok(pkg) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        for hook in ["preinstall", "install", "postinstall"] {
            if let Some(cmd) = pkg["scripts"][hook].as_str() {
                out.push(json!({
                    "package": pkg["name"].as_str().unwrap_or("?"),
                    "version": pkg["version"],
                    "hook": hook,
                    "command": cmd.chars().take(500).collect::<String>(),
                    "ecosystem": "npm",
                }));
            }
        }
    }
    out
}

fn npm(spec: &str) -> Result<Fetched> {
    let spec = checked(spec, true)?;
    let ws = workspace()?;
    run(
        Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
            ])
            .arg(ws.path())
            .arg(spec),
        "npm install --ignore-scripts",
    )?;
    // The package's own name: a version suffix after the last `@` that is not the scope's.
    let name = match spec.rfind('@') {
        Some(i) if i > 0 => &spec[..i],
        _ => spec,
    };
    let dir = ws.path().join("node_modules").join(name);
    let pkg: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("package.json")).context("the package's package.json")?,
    )?;
    let short = name.rsplit('/').next().unwrap_or(name);
    let bin = match &pkg["bin"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => m
            .get(short)
            .or_else(|| m.values().next())
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
    .or_else(|| pkg["main"].as_str().map(str::to_owned))
    .with_context(|| format!("{name}: no bin or main in its package.json"))?;
    let inside = Path::new("/workspace/node_modules").join(name).join(bin);
    let hooks = npm_hooks(&ws.path().join("node_modules"));
    let install = (!hooks.is_empty()).then(|| {
        [
            "npm",
            "rebuild",
            "--foreground-scripts",
            "--prefix",
            "/workspace",
        ]
        .map(str::to_owned)
        .to_vec()
    });
    Ok(Fetched {
        location: Some(format!("node_modules/{name}/package.json")),
        workspace: ws,
        install,
        hooks,
        entry: Entry::Argv(vec!["node".into(), inside.display().to_string()]),
        egress: Vec::new(),
    })
}

fn pypi(spec: &str) -> Result<Fetched> {
    let spec = checked(spec, false)?;
    let (name, requirement) = match spec.split_once('@') {
        Some((n, v)) => (n, format!("{n}=={v}")),
        None => (spec, spec.to_owned()),
    };
    let ws = workspace()?;
    // A pip of our own (the system's may be absent), used only to download wheels.
    let tool = ws.path().join(".fetch");
    run(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&tool),
        "python3 -m venv",
    )?;
    let pip = tool.join("bin/pip");
    let wheels = run(
        Command::new(&pip)
            .args([
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--dest",
            ])
            .arg(ws.path().join("dist"))
            .arg(&requirement),
        "pip download (wheels only: building an sdist would run its code)",
    );
    let index = PipIndex::configured(&pip);
    let _ = std::fs::remove_dir_all(&tool);
    let venv = "python3 -m venv /workspace/venv && /workspace/venv/bin/pip install --quiet \
                --disable-pip-version-check";
    let (install, egress) = match wheels {
        Ok(()) => (
            format!("{venv} --no-index --find-links /workspace/dist '{requirement}'"),
            Vec::new(),
        ),
        Err(e) => {
            tracing::info!(error = %e, "not all wheels: fetching and building inside the jail");
            let _ = std::fs::remove_dir_all(ws.path().join("dist"));
            (
                format!("{venv} {} '{requirement}'", index.options()),
                index.hosts(),
            )
        }
    };
    Ok(Fetched {
        workspace: ws,
        install: Some(vec!["sh".into(), "-c".into(), install]),
        hooks: Vec::new(),
        entry: Entry::PythonScript(name.to_owned()),
        location: None,
        egress,
    })
}

/// The package index the host's pip is configured for, handed to the pip inside the jail.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PipIndex {
    url: String,
    /// A CA bundle the jail can see (under `/etc/ssl`), if the host's pip uses one.
    cert: Option<String>,
}

/// PyPI's simple index; its files come from another host.
const PYPI: &str = "https://pypi.org/simple";
const PYPI_FILES: &str = "files.pythonhosted.org";

impl PipIndex {
    /// `PIP_INDEX_URL`, else `pip config get global.index-url`, else PyPI; the CA bundle from
    /// `PIP_CERT` or pip's configuration when it lies under `/etc/ssl` (bound into the jail).
    fn configured(pip: &Path) -> PipIndex {
        let config = |key: &str| {
            Command::new(pip)
                .args(["config", "get", key])
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let url = from_env("PIP_INDEX_URL")
            .or_else(|| config("global.index-url"))
            .unwrap_or_else(|| PYPI.to_owned());
        let cert = from_env("PIP_CERT")
            .or_else(|| config("global.cert"))
            .filter(|c| c.starts_with("/etc/ssl/") && !c.contains(".."));
        PipIndex { url, cert }
    }

    /// The index's host, and PyPI's file host when the index is PyPI.
    fn hosts(&self) -> Vec<String> {
        let host = self
            .url
            .split_once("://")
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.split(['/', '?', '#']).next())
            .map(|h| h.rsplit('@').next().unwrap_or(h))
            .map(|h| h.split(':').next().unwrap_or(h).to_ascii_lowercase())
            .filter(|h| warden_trace::hosts::valid_pattern(h));
        let mut out: Vec<String> = host.into_iter().collect();
        if out.iter().any(|h| h == "pypi.org") {
            out.push(PYPI_FILES.to_owned());
        }
        out
    }

    /// pip's options for this index (single-quoted for `sh -c`).
    fn options(&self) -> String {
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        let mut o = format!("--index-url {}", quote(&self.url));
        if let Some(c) = &self.cert {
            o.push_str(&format!(" --cert {}", quote(c)));
        }
        o
    }
}

fn github(spec: &str) -> Result<Fetched> {
    let (repo, reference) = match spec.split_once('@') {
        Some((r, f)) if plain(f) => (r, Some(f)),
        Some(_) => bail!("github:{spec}: the ref must be a plain name"),
        None => (spec, None),
    };
    let ok = repo
        .split_once('/')
        .is_some_and(|(o, r)| plain(o) && plain(r));
    if !ok {
        bail!("github:{spec}: expected github:OWNER/REPO[@REF]");
    }
    let ws = workspace()?;
    let mut git = Command::new("git");
    git.args(["clone", "--quiet", "--depth", "1"]);
    if let Some(r) = reference {
        git.args(["--branch", r]);
    }
    git.arg(format!("https://github.com/{repo}.git"))
        .arg(ws.path().join("src"));
    run(&mut git, "git clone")?;
    let entry = crate::target::resolve(Some(&ws.path().join("src").display().to_string()), &[])?;
    let rewrite = |a: &String| a.replace(&ws.path().display().to_string(), "/workspace");
    Ok(Fetched {
        entry: Entry::Argv(entry.argv.iter().map(rewrite).collect()),
        install: None,
        hooks: Vec::new(),
        location: entry.location.map(|l| format!("src/{l}")),
        workspace: ws,
        egress: Vec::new(),
    })
}

/// The lifecycle hooks of a local package (`package.json` in `dir`), in npm's order.
pub fn local_hooks(dir: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return Vec::new();
    };
    let Ok(pkg) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    ["preinstall", "install", "postinstall", "prepare"]
        .iter()
        .filter_map(|hook| {
            pkg["scripts"][*hook].as_str().map(|cmd| {
                json!({
                    "package": pkg["name"].as_str().unwrap_or("?"),
                    "version": pkg["version"],
                    "hook": hook,
                    "command": cmd.chars().take(500).collect::<String>(),
                    "ecosystem": "npm",
                })
            })
        })
        .collect()
}

/// The command that runs `hooks` in the package folder `inside` the jail, one after the other
/// as npm does (each through `sh -c`; the jail is the boundary, not this quoting).
pub fn local_install(inside: &Path, hooks: &[Value]) -> Vec<String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let steps: Vec<String> = hooks
        .iter()
        .filter_map(|h| h["command"].as_str())
        .map(|c| format!("sh -c {}", quote(c)))
        .collect();
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "cd {} && {{ {}; }}",
            quote(&inside.display().to_string()),
            steps.join("; ")
        ),
    ]
}

/// Fetch `target` if it names a registry or GitHub; `None` for anything else.
pub fn fetch(target: &str) -> Result<Option<Fetched>> {
    if let Some(s) = target.strip_prefix("npm:") {
        return npm(s).map(Some);
    }
    if let Some(s) = target.strip_prefix("pypi:") {
        return pypi(s).map(Some);
    }
    if let Some(s) = target.strip_prefix("github:") {
        return github(s).map(Some);
    }
    Ok(None)
}

/// The console script of an installed Python package (in the host view of the workspace).
pub fn python_script(workspace: &Path, name: &str) -> Result<PathBuf> {
    // The venv's own programs, by prefix (python3.11, pip3, activate.fish, Activate.ps1…).
    const STANDARD: &[&str] = &["python", "pip", "activate", "Activate"];
    let bin = workspace.join("venv/bin");
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    let mut scripts: Vec<String> = std::fs::read_dir(&bin)
        .with_context(|| format!("{}: the install did not create a venv", bin.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !STANDARD.iter().any(|s| n.starts_with(s)))
        .collect();
    scripts.sort();
    let pick = scripts
        .iter()
        .find(|s| norm(s) == norm(name))
        .or_else(|| (scripts.len() == 1).then(|| &scripts[0]))
        .with_context(|| {
            format!("{name}: which console script starts the server? found {scripts:?}")
        })?;
    Ok(Path::new("/workspace/venv/bin").join(pick))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_cannot_carry_options_or_paths() {
        assert!(checked("mcp-server-time@2026.10.19", false).is_ok());
        assert!(checked("@modelcontextprotocol/server-memory@1.0.0", true).is_ok());
        assert!(checked("@scope/name", false).is_err(), "scopes are npm's");
        for bad in [
            "--index-url=http://x",
            "-e.",
            "../../etc",
            "a b",
            "x;rm",
            "",
            "a$(id)",
            ".",
            "a/b",
            "owner/repo",
            "github:x/y",
            "x@../y",
            "x@-rf",
            "@a/b/c",
        ] {
            assert!(checked(bad, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_index_decides_the_egress() {
        let index = |url: &str| PipIndex {
            url: url.into(),
            cert: None,
        };
        assert_eq!(index(PYPI).hosts(), ["pypi.org", PYPI_FILES]);
        assert_eq!(
            index("https://user:pw@Mirror.example.test:8443/simple/").hosts(),
            ["mirror.example.test"]
        );
        assert!(index("file:///srv/wheels").hosts().is_empty());
        assert!(
            index("https://10.0.0.1/simple").hosts().is_empty(),
            "names only"
        );
        let o = PipIndex {
            url: "https://x.test/s'imple".into(),
            cert: Some("/etc/ssl/certs/ca.crt".into()),
        }
        .options();
        assert_eq!(
            o,
            "--index-url 'https://x.test/s'\\''imple' --cert '/etc/ssl/certs/ca.crt'"
        );
    }
}
