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
//! install phase and the server. [`project`] plans the install of a source folder (a GitHub
//! clone, or a local folder given as the target).

mod github;
mod host;
mod npm;
pub mod project;
mod pypi;

pub use host::{WORKSPACE_BYTES, remove_workspaces};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    /// the package, else the only one; else `fallback`.
    PythonScript {
        /// The package's name.
        name: String,
        /// The command when no console script fits (a project's `server.py`…).
        fallback: Option<Vec<String>>,
    },
}

impl Entry {
    /// Whether the start command only exists once the Python install succeeded.
    pub fn needs_venv(&self) -> bool {
        matches!(self, Entry::PythonScript { fallback: None, .. })
    }

    /// The start command, once installed in `workspace` (the host view of `/workspace`).
    pub fn argv(&self, workspace: &Path) -> Result<Vec<String>> {
        match self {
            Entry::Argv(a) => Ok(a.clone()),
            Entry::PythonScript { name, fallback } => {
                match (python_script(workspace, name), fallback) {
                    (Ok(p), _) => Ok(vec![p.display().to_string()]),
                    (Err(_), Some(f)) => Ok(f.clone()),
                    (Err(e), None) => Err(e),
                }
            }
        }
    }
}

/// `s` single-quoted for `sh -c` (the jail is the boundary, not this quoting).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
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

/// The target prefixes that name a registry or GitHub.
pub const SCHEMES: [&str; 3] = ["npm:", "pypi:", "github:"];

/// Whether `target` is fetched (names a registry or GitHub) rather than local.
pub fn is_remote(target: &str) -> bool {
    SCHEMES.iter().any(|s| target.starts_with(s))
}

/// Fetch `target` if it names a registry or GitHub; `None` for anything else.
pub fn fetch(target: &str) -> Result<Option<Fetched>> {
    if let Some(s) = target.strip_prefix("npm:") {
        return npm::fetch(s).map(Some);
    }
    if let Some(s) = target.strip_prefix("pypi:") {
        return pypi::fetch(s).map(Some);
    }
    if let Some(s) = target.strip_prefix("github:") {
        return github::fetch(s).map(Some);
    }
    Ok(None)
}

/// The console script of an installed Python package (in the host view of the workspace).
pub fn python_script(workspace: &Path, name: &str) -> Result<PathBuf> {
    // The venv's own programs, by prefix (python3.11, pip3, activate.fish, Activate.ps1…).
    const STANDARD: &[&str] = &["python", "pip", "activate", "Activate"];
    let bin = workspace.join("venv/bin");
    // The install wrote this folder: never follow a link it planted out of the workspace.
    for dir in [workspace.join("venv"), bin.clone()] {
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            anyhow::bail!("{}: the install left a symbolic link there", dir.display());
        }
    }
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
}
