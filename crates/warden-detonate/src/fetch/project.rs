//! A source folder's install lifecycle, planned for the jail: what npm would run (the
//! dependencies' install hooks, then the package's own `preinstall`, `install`, `postinstall`,
//! `prepare`, in that order) and what pip would run (the project's build: `setup.py` or its
//! PEP 517 backend). Nothing here runs package code; it only writes the command the jail runs
//! in the `install` window, lists the hooks for `install.script` events, and names the hosts
//! that install may reach (the package index, when pip has to fetch build requirements).
//!
//! A fetched folder (a GitHub clone in the package workspace) is installed for real: Python
//! into `/workspace/venv`, whose programs the server then finds on its `PATH`. A local folder
//! is the operator's own and stays untouched (it is mounted read-only): its Node hooks run in
//! place, and a Python project is built from a scratch copy in the jail's `/tmp`, the wheel
//! thrown away — the build is the code that runs at install time.

use std::path::Path;

use serde_json::{Value, json};

use super::npm::{hooks_of, npm_hooks};
use super::pypi::PipIndex;
use super::sh_quote;

/// Which kind of folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Fetched into the package workspace: writable, installed for real.
    Fetched,
    /// The operator's own folder, mounted read-only.
    Local,
}

/// What installing a folder runs in the jail.
#[derive(Debug, Default)]
pub struct Plan {
    /// The command (`sh -c …` in the folder), if there is anything to run.
    pub command: Option<Vec<String>>,
    /// `install.script` data for each hook or build.
    pub hooks: Vec<Value>,
    /// Hosts the install may reach (the package index), if it needs any.
    pub egress: Vec<String>,
    /// Whether it installs into `/workspace/venv`.
    pub venv: bool,
}

/// pip builds through PEP 517 (an isolated build environment from the index), as new pips do.
const PIP: &str = "--quiet --disable-pip-version-check --use-pep517";
/// Scratch places of a local Python build, in the jail's own `/tmp`, under names any build
/// could use (a build that looks around sees nothing of Warden's).
const BUILD: &str = "/tmp/build-src";
pub(crate) const BUILD_VENV: &str = "/tmp/build-venv";
const WHEELS: &str = "/tmp/wheelhouse";

/// The lifecycle hooks of a local package (`package.json` in `dir`), in npm's order.
pub fn local_hooks(dir: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return Vec::new();
    };
    let Ok(pkg) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    hooks_of(&pkg, &["preinstall", "install", "postinstall", "prepare"])
}

/// Plan the install of the folder `host`, which the jail sees at `inside`. The host's pip is
/// asked for its index only when there is Python to install.
pub fn plan(host: &Path, inside: &Path, mode: Mode) -> Plan {
    plan_with(host, inside, mode, || {
        PipIndex::configured(Path::new("pip3"))
    })
}

fn plan_with(host: &Path, inside: &Path, mode: Mode, index: impl FnOnce() -> PipIndex) -> Plan {
    let mut plan = Plan::default();
    let mut steps = Vec::new();
    // A fetched folder's dependencies were installed one level up (the workspace root).
    if mode == Mode::Fetched
        && let (Some(root), Some(inside_root)) = (host.parent(), inside.parent())
    {
        let deps = npm_hooks(&root.join("node_modules"));
        if !deps.is_empty() {
            steps.push(format!(
                "npm rebuild --foreground-scripts --prefix {}",
                sh_quote(&inside_root.display().to_string())
            ));
            plan.hooks.extend(deps);
        }
    }
    let own = local_hooks(host);
    steps.extend(
        own.iter()
            .filter_map(|h| h["command"].as_str())
            .map(|c| format!("sh -c {}", sh_quote(c))),
    );
    plan.hooks.extend(own);
    let inside_q = sh_quote(&inside.display().to_string());
    let project = ["pyproject.toml", "setup.py"]
        .iter()
        .any(|m| host.join(m).is_file());
    let requirements = host.join("requirements.txt").is_file();
    let index = match mode {
        Mode::Fetched if project || requirements => Some(index()),
        Mode::Local if project => Some(index()),
        _ => None,
    };
    let index_opts = index.as_ref().map(PipIndex::options).unwrap_or_default();
    let venv = "python3 -m venv /workspace/venv && /workspace/venv/bin/pip install";
    let python = match mode {
        Mode::Fetched if project => Some(format!("{venv} {PIP} {index_opts} {inside_q}")),
        Mode::Fetched if requirements => Some(format!(
            "{venv} {PIP} {index_opts} -r {inside_q}/requirements.txt"
        )),
        Mode::Local if project => Some(format!(
            "rm -rf {BUILD} && cp -r {inside_q}/. {BUILD} && python3 -m venv {BUILD_VENV} && \
             {BUILD_VENV}/bin/pip wheel {PIP} --no-deps -w {WHEELS} {index_opts} {BUILD}"
        )),
        _ => None,
    };
    if let Some(step) = python {
        if host.join("setup.py").is_file() {
            let name = host.file_name().map(|n| n.to_string_lossy().into_owned());
            plan.hooks.push(json!({
                "package": name,
                "hook": "setup.py",
                "command": "python setup.py (run by pip to build the project)",
                "ecosystem": "pypi",
            }));
        }
        steps.push(format!("{{ {step}; }}"));
        plan.egress = index.as_ref().map(PipIndex::hosts).unwrap_or_default();
        plan.venv = mode == Mode::Fetched;
    }
    if !steps.is_empty() {
        plan.command = Some(vec![
            "sh".into(),
            "-c".into(),
            format!("cd {inside_q} && {{ {}; }}", steps.join("; ")),
        ]);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn plan_of(host: &Path, inside: &str, mode: Mode) -> Plan {
        plan_with(host, Path::new(inside), mode, PipIndex::pypi)
    }

    #[test]
    fn node_hooks_run_in_npm_order_after_the_dependencies() {
        let d = folder(&[
            (
                "src/package.json",
                r#"{"name":"x","scripts":{"prepare":"node p.js","postinstall":"node it's.js"}}"#,
            ),
            (
                "node_modules/dep/package.json",
                r#"{"name":"dep","scripts":{"install":"node-gyp rebuild"}}"#,
            ),
        ]);
        let src = d.path().join("src");
        let p = plan_of(&src, "/workspace/src", Mode::Fetched);
        let cmd = &p.command.unwrap()[2];
        assert_eq!(
            cmd,
            "cd '/workspace/src' && { npm rebuild --foreground-scripts --prefix '/workspace'; sh -c 'node it'\\''s.js'; sh -c 'node p.js'; }"
        );
        let hooks: Vec<&str> = p
            .hooks
            .iter()
            .map(|h| h["hook"].as_str().unwrap())
            .collect();
        assert_eq!(hooks, ["install", "postinstall", "prepare"]);
        assert!(p.egress.is_empty());
        // A local folder's dependencies were installed by its owner: only its own hooks run.
        let p = plan_of(&src, "/src", Mode::Local);
        assert!(!p.command.unwrap()[2].contains("rebuild"));
    }

    #[test]
    fn python_projects_are_built_with_the_index_reachable() {
        let d = folder(&[("setup.py", "from setuptools import setup; setup()")]);
        let p = plan_of(d.path(), "/workspace/src", Mode::Fetched);
        let cmd = &p.command.unwrap()[2];
        assert!(cmd.contains("/workspace/venv/bin/pip install"), "{cmd}");
        assert!(cmd.ends_with("'/workspace/src'; }; }"), "{cmd}");
        assert_eq!(p.egress, ["pypi.org", "files.pythonhosted.org"]);
        assert_eq!(p.hooks[0]["hook"], "setup.py");

        let p = plan_of(d.path(), "/home/me/srv", Mode::Local);
        let cmd = &p.command.unwrap()[2];
        assert!(
            cmd.contains("cp -r '/home/me/srv'/. /tmp/build-src"),
            "{cmd}"
        );
        assert!(cmd.contains("pip wheel"), "{cmd}");

        let r = folder(&[("requirements.txt", "mcp\n"), ("server.py", "")]);
        let p = plan_of(r.path(), "/workspace/src", Mode::Fetched);
        assert!(p.command.unwrap()[2].contains("-r '/workspace/src'/requirements.txt"));
        assert!(p.hooks.is_empty(), "requirements run no project code");
        let p = plan_of(r.path(), "/src", Mode::Local);
        assert!(
            p.command.is_none(),
            "a local folder's requirements are its owner's business"
        );
    }
}
