//! What to detonate: a start command (`--mcp-command`), or a local file or folder whose start
//! command is worked out from its manifest. The server's source folder (the Python virtual
//! environment the program lives in, or the nearest folder with a manifest above the script) is
//! mounted read-only in the jail at its own path, so shebangs and absolute paths keep working;
//! where that path belongs to the jail itself (`/tmp`, `/workspace`…) it goes to
//! [`SOURCE_MOUNT`] instead and the command's paths are rewritten to point there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the server's source folder appears inside the jail.
pub const SOURCE_MOUNT: &str = "/srv/target";

const MANIFESTS: &[&str] = &[
    "package.json",
    "pyproject.toml",
    "setup.py",
    "requirements.txt",
];

/// A resolved target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// How the report names it.
    pub display: String,
    /// The command inside the jail.
    pub argv: Vec<String>,
    /// The host folder mounted at [`SOURCE_MOUNT`].
    pub source: Option<PathBuf>,
    /// The manifest or entry file (for SARIF locations), relative to `source`.
    pub location: Option<String>,
    /// A server that is one file, in a folder no manifest or venv makes a project of (a script
    /// in `~/Downloads`): the static phase reads this file alone, never its neighbours.
    pub lone_file: Option<PathBuf>,
}

fn interpreter(file: &Path) -> Vec<String> {
    match file.extension().and_then(|e| e.to_str()) {
        Some("py") => vec!["python3".into()],
        Some("js" | "mjs" | "cjs") => vec!["node".into()],
        _ => Vec::new(),
    }
}

/// `path` made absolute, with `.` and `..` resolved lexically (the jail refuses symlinks in
/// mount sources, so a lexical answer that is wrong would fail loudly, not bind elsewhere).
pub fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(path)?;
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Ok(out)
}

/// The virtual environment holding `start` (a folder with `pyvenv.cfg`), else the nearest
/// folder at or above `start` with a manifest, else `start` itself.
fn source_root(start: &Path) -> PathBuf {
    project_root(start).unwrap_or_else(|| start.to_path_buf())
}

/// The venv or the nearest folder with a manifest that `start` lies in, if any.
fn project_root(start: &Path) -> Option<PathBuf> {
    let ancestors = || start.ancestors().filter(|p| p.parent().is_some());
    if let Some(venv) = ancestors().find(|d| d.join("pyvenv.cfg").is_file()) {
        return Some(venv.to_path_buf());
    }
    ancestors()
        .find(|d| MANIFESTS.iter().any(|m| d.join(m).is_file()))
        .map(Path::to_path_buf)
}

/// Paths the jail mounts itself: a source folder there cannot keep its own path. `/home` too:
/// the chamber's user has its home there, and a host user's folder beside it would name them.
const JAIL_OWNED: &[&str] = &[
    "/tmp",
    "/workspace",
    "/proc",
    "/dev",
    "/home",
    warden_jail::TOOLS_MOUNT,
    "/srv/target",
    "/etc",
    "/usr",
    "/bin",
    "/lib",
];

/// Where the source folder appears inside the jail.
pub fn mount_point(source: &Path) -> PathBuf {
    if JAIL_OWNED.iter().any(|o| source.starts_with(o)) || source == Path::new("/") {
        PathBuf::from(SOURCE_MOUNT)
    } else {
        source.to_path_buf()
    }
}

fn entry_of_folder(dir: &Path) -> Result<PathBuf> {
    if let Ok(text) = std::fs::read_to_string(dir.join("package.json"))
        && let Ok(pkg) = serde_json::from_str::<serde_json::Value>(&text)
    {
        let bin = match &pkg["bin"] {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(m) => m.values().find_map(|v| v.as_str().map(str::to_owned)),
            _ => None,
        };
        if let Some(entry) = bin.or_else(|| pkg["main"].as_str().map(str::to_owned)) {
            // The manifest names a file inside the package, nowhere else.
            let path = absolute(&dir.join(&entry))?;
            if !path.starts_with(dir) {
                bail!(
                    "{}: its entry {entry:?} points outside the package",
                    dir.display()
                );
            }
            return Ok(path);
        }
    }
    for name in [
        "server.py",
        "main.py",
        "__main__.py",
        "index.js",
        "server.js",
        "main.js",
    ] {
        if dir.join(name).is_file() {
            return Ok(dir.join(name));
        }
    }
    bail!(
        "{}: no start command found (no package.json bin/main, no server.py, main.py, index.js…); give one with --mcp-command",
        dir.display()
    )
}

/// Resolve `target` or `command` (one of them).
pub fn resolve(target: Option<&str>, command: &[String]) -> Result<Resolved> {
    if let Some(t) = target {
        for scheme in crate::fetch::SCHEMES {
            if t.starts_with(scheme) {
                bail!(
                    "{scheme} targets are not supported yet: install the server and give its start command with --mcp-command"
                );
            }
        }
    }
    let (argv, script) = match (target, command.is_empty()) {
        (_, false) => {
            // The first argument that names an existing file is the server's script.
            // The first argument that names an existing file is the server's script; else the
            // program itself, unless it is a system program.
            let system = |p: &Path| {
                ["/usr", "/bin", "/sbin", "/lib", "/etc"]
                    .iter()
                    .any(|s| p.starts_with(s))
            };
            let script = command
                .iter()
                .skip(1)
                .chain(command.first())
                .map(Path::new)
                .filter(|p| p.is_file())
                .map(absolute)
                .filter_map(Result::ok)
                .find(|p| !system(p));
            (command.to_vec(), script)
        }
        (Some(t), true) => {
            let path = absolute(Path::new(t)).with_context(|| format!("target {t:?}"))?;
            let file = if path.is_dir() {
                entry_of_folder(&path)?
            } else if path.is_file() {
                path
            } else {
                bail!("target {t:?} is neither a file nor a folder");
            };
            let mut argv = interpreter(&file);
            argv.push(file.display().to_string());
            (argv, Some(file))
        }
        (None, true) => bail!("nothing to detonate: give a TARGET or --mcp-command"),
    };
    // A folder that would show too much (a home, `/etc`…) is never the source: the script
    // alone is (a config file named in the command must not bring the home along).
    let source = script.as_deref().and_then(|s| {
        let root = source_root(s.parent()?);
        if warden_jail::runtime::source_too_broad(&root) {
            Some(s.to_path_buf())
        } else {
            Some(root)
        }
    });
    let rewrite = |arg: &String| -> String {
        let Some(src) = &source else {
            return arg.clone();
        };
        let abs = absolute(Path::new(arg)).unwrap_or_else(|_| PathBuf::from(arg));
        match abs.strip_prefix(src) {
            Ok(rest) if Path::new(arg).exists() && rest.as_os_str().is_empty() => {
                mount_point(src).display().to_string()
            }
            Ok(rest) if Path::new(arg).exists() => {
                mount_point(src).join(rest).display().to_string()
            }
            _ => arg.clone(),
        }
    };
    let location = match (&source, &script) {
        (Some(src), Some(script)) => MANIFESTS
            .iter()
            .find(|m| src.join(m).is_file())
            .map(|m| (*m).to_owned())
            .or_else(|| {
                script
                    .strip_prefix(src)
                    .ok()
                    .filter(|p| !p.as_os_str().is_empty())
                    .or_else(|| script.file_name().map(Path::new))
                    .map(|p| p.display().to_string())
            }),
        _ => None,
    };
    // A script outside any project is a server of one file: its neighbours are not its.
    let lone_file = script
        .as_deref()
        .filter(|s| s.parent().is_some_and(|p| project_root(p).is_none()))
        .map(Path::to_path_buf);
    Ok(Resolved {
        display: target.map_or_else(|| command.join(" "), str::to_owned),
        argv: argv.iter().map(rewrite).collect(),
        source,
        location,
        lone_file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_folders_and_schemes() {
        let d = tempfile_dir();
        std::fs::write(d.join("pyproject.toml"), "[project]\nname='x'\n").unwrap();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/server.py"), "print()").unwrap();
        let script = d.join("src/server.py").display().to_string();
        let r = resolve(None, &["python3".into(), script]).unwrap();
        // Under /tmp, which the jail owns: moved to /srv/target.
        assert_eq!(r.argv, vec!["python3", "/srv/target/src/server.py"]);
        assert_eq!(
            mount_point(Path::new("/opt/servers/x")),
            Path::new("/opt/servers/x")
        );
        assert_eq!(mount_point(Path::new("/tmp/x")), Path::new(SOURCE_MOUNT));
        assert_eq!(r.source.as_deref(), Some(d.as_path()));
        assert_eq!(r.location.as_deref(), Some("pyproject.toml"));
        assert_eq!(r.lone_file, None, "inside a project");
        let r = resolve(Some(d.join("src").to_str().unwrap()), &[]).unwrap();
        assert_eq!(r.argv, vec!["python3", "/srv/target/src/server.py"]);
        assert!(
            resolve(Some("npm:left-pad"), &[])
                .unwrap_err()
                .to_string()
                .contains("not supported yet")
        );
        assert!(resolve(None, &[]).is_err());
        let r = resolve(None, &["/bin/cat".into()]).unwrap();
        assert_eq!(r.argv, vec!["/bin/cat"]);
        // Review finding: a file named in the command that sits directly in a home made the
        // whole home the source folder. Only the file is shown then.
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let config = Path::new(&home).join(format!(".warden-target-test-{}", std::process::id()));
        std::fs::write(&config, "{}").unwrap();
        let r = resolve(None, &["srv".into(), config.display().to_string()]).unwrap();
        let _ = std::fs::remove_file(&config);
        assert_eq!(r.source.as_deref(), Some(config.as_path()), "{r:?}");
        assert_eq!(r.argv[1], config.display().to_string());
        let _ = std::fs::remove_dir_all(&d);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("warden-target-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
