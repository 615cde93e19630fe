//! `github:OWNER/REPO[@REF]`: a shallow `git clone` on the host (no hooks run: a clone runs
//! none), then installed as a project ([`super::project`]).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::host::{run, workspace};
use super::project::{self, Mode};
use super::{Entry, Fetched, plain};

pub(super) fn fetch(spec: &str) -> Result<Fetched> {
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
    let src = ws.path().join("src");
    // The clone's manifests are read on the host: none may lead out of it.
    for m in [
        "package.json",
        "pyproject.toml",
        "setup.py",
        "requirements.txt",
    ] {
        if std::fs::symlink_metadata(src.join(m)).is_ok_and(|md| md.file_type().is_symlink()) {
            bail!("github:{spec}: its {m} is a symbolic link");
        }
    }
    if npm_dependencies(&src)?.is_some_and(|n| n > 0) {
        super::npm::install_without_scripts(&src, None)?;
    }
    let inside = Path::new("/workspace/src");
    let plan = project::plan(&src, inside, Mode::Fetched);
    let host_ws = ws.path().display().to_string();
    let resolved = crate::target::resolve(Some(&src.display().to_string()), &[]);
    let argv = resolved.as_ref().ok().map(|r| {
        r.argv
            .iter()
            .map(|a| a.replace(&host_ws, "/workspace"))
            .collect()
    });
    let location = resolved
        .as_ref()
        .ok()
        .and_then(|r| r.location.clone())
        .map(|l| format!("src/{l}"));
    let entry = if plan.venv {
        let name = repo.rsplit('/').next().unwrap_or(repo).to_owned();
        Entry::PythonScript {
            name,
            fallback: argv,
        }
    } else {
        Entry::Argv(
            resolved?
                .argv
                .iter()
                .map(|a| a.replace(&host_ws, "/workspace"))
                .collect(),
        )
    };
    Ok(Fetched {
        entry,
        install: plan.command,
        hooks: plan.hooks,
        location,
        workspace: ws,
        egress: plan.egress,
    })
}

/// How many dependencies the folder's `package.json` declares (`None` without one); an error
/// for a dependency that points into the host's file system (`file:`, `link:`, a path), which
/// the host-side install would read or link.
fn npm_dependencies(dir: &Path) -> Result<Option<usize>> {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return Ok(None);
    };
    let pkg: serde_json::Value = serde_json::from_str(&text).context("its package.json")?;
    let mut n = 0;
    for section in ["dependencies", "optionalDependencies"] {
        for (name, spec) in pkg[section].as_object().into_iter().flatten() {
            let spec = spec.as_str().unwrap_or_default();
            let local = ["file:", "link:", "portal:", "/", "./", "../", "~"]
                .iter()
                .any(|p| spec.starts_with(p));
            if local {
                bail!("dependency {name} = {spec:?} points into the file system");
            }
            n += 1;
        }
    }
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_may_not_point_into_the_file_system() {
        let d = tempfile::tempdir().unwrap();
        let write = |text: &str| std::fs::write(d.path().join("package.json"), text).unwrap();
        assert_eq!(npm_dependencies(d.path()).unwrap(), None);
        write(r#"{"dependencies":{"a":"^1.0.0","b":"npm:c@2"}}"#);
        assert_eq!(npm_dependencies(d.path()).unwrap(), Some(2));
        for bad in ["file:../x", "link:/etc", "../up", "/abs", "~/home"] {
            write(&format!(r#"{{"optionalDependencies":{{"a":"{bad}"}}}}"#));
            assert!(npm_dependencies(d.path()).is_err(), "{bad}");
        }
    }
}
