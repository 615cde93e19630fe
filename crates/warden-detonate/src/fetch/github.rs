//! `github:OWNER/REPO[@REF]`: a shallow `git clone` on the host (no hooks run: a clone runs
//! none; symbolic links are checked out as plain files, so nothing in the clone leads out of
//! it), then installed as a project ([`super::project`]).
//!
//! No host tool ever runs *in* the clone (its own `.npmrc`, lockfile or `node_modules` would
//! steer it): the registry dependencies of its `package.json`, each checked to be a plain
//! registry spec, are copied into a fresh `package.json` at the workspace root and installed
//! there without scripts, where Node finds them from `/workspace/src`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::host::{run, workspace};
use super::project::{self, Mode};
use super::{Entry, Fetched, checked, plain};

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
    git.args([
        "-c",
        "core.symlinks=false",
        "clone",
        "--quiet",
        "--depth",
        "1",
    ]);
    if let Some(r) = reference {
        git.args(["--branch", r]);
    }
    git.arg(format!("https://github.com/{repo}.git"))
        .arg(ws.path().join("src"));
    run(&mut git, "git clone")?;
    let src = ws.path().join("src");
    if let Some(deps) = npm_dependencies(&src)? {
        std::fs::write(ws.path().join("package.json"), deps.to_string())?;
        super::npm::install_without_scripts(ws.path(), None)?;
    }
    let inside = Path::new("/workspace/src");
    let plan = project::plan(&src, inside, Mode::Fetched);
    let host_ws = ws.path().display().to_string();
    // The project's own entry, as the jail sees it.
    let resolved = crate::target::resolve(Some(&src.display().to_string()), &[]).map(|r| {
        let argv: Vec<String> = r
            .argv
            .iter()
            .map(|a| a.replace(&host_ws, "/workspace"))
            .collect();
        (argv, r.location.map(|l| format!("src/{l}")))
    });
    let location = resolved.as_ref().ok().and_then(|(_, l)| l.clone());
    let entry = if plan.venv {
        let name = repo.rsplit('/').next().unwrap_or(repo).to_owned();
        Entry::PythonScript {
            name,
            fallback: resolved.ok().map(|(argv, _)| argv),
        }
    } else {
        Entry::Argv(resolved?.0)
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

/// A `package.json` holding only the registry dependencies the folder's `package.json`
/// declares (`None` when it declares none); an error for any other kind of dependency (a path,
/// `file:`, `link:`, a URL, a git or GitHub reference), which the host-side install would read,
/// link or fetch.
fn npm_dependencies(dir: &Path) -> Result<Option<serde_json::Value>> {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return Ok(None);
    };
    let pkg: serde_json::Value = serde_json::from_str(&text).context("its package.json")?;
    let mut out = serde_json::json!({ "name": "warden-fetched-deps", "private": true });
    let mut any = false;
    for section in ["dependencies", "optionalDependencies"] {
        let mut kept = serde_json::Map::new();
        for (name, spec) in pkg[section].as_object().into_iter().flatten() {
            let spec = spec.as_str().unwrap_or_default();
            if checked(name, true).is_err() || !registry_spec(spec) {
                bail!("dependency {name:?} = {spec:?} is not a plain registry dependency");
            }
            kept.insert(name.clone(), spec.into());
        }
        any |= !kept.is_empty();
        out[section] = kept.into();
    }
    Ok(any.then_some(out))
}

/// A version, range or tag (`^1.2.0`, `>=1 <3 || 4.x`, `latest`), or an alias to one
/// (`npm:name@^1`): nothing that names a path, a URL or a repository.
fn registry_spec(spec: &str) -> bool {
    let range = |r: &str| {
        r.len() <= 200
            && r.chars()
                .all(|c| c.is_ascii_alphanumeric() || " .*^~<>=|-+_".contains(c))
    };
    match spec.strip_prefix("npm:") {
        Some(alias) => {
            let (name, version) = match alias.rfind('@') {
                Some(i) if i > 0 => (&alias[..i], &alias[i + 1..]),
                _ => (alias, ""),
            };
            checked(name, true).is_ok() && range(version)
        }
        None => range(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_registry_dependencies_reach_the_host_side_install() {
        let d = tempfile::tempdir().unwrap();
        let write = |text: &str| std::fs::write(d.path().join("package.json"), text).unwrap();
        assert_eq!(npm_dependencies(d.path()).unwrap(), None);
        write(r#"{"name":"x","devDependencies":{"evil":"file:/etc"}}"#);
        assert_eq!(
            npm_dependencies(d.path()).unwrap(),
            None,
            "dev deps are not installed"
        );
        write(
            r#"{"dependencies":{"a":"^1.0.0","@s/b":"npm:c@2 || 3.x","d":"latest"},
                "overrides":{"x":"file:/etc"},"scripts":{"postinstall":"x"}}"#,
        );
        let deps = npm_dependencies(d.path()).unwrap().unwrap();
        assert_eq!(deps["dependencies"].as_object().unwrap().len(), 3);
        assert!(deps.get("overrides").is_none() && deps.get("scripts").is_none());
        for bad in [
            "file:../x",
            "link:/etc",
            "../up",
            "/abs",
            "~/home",
            "https://internal.test/x.tgz",
            "github:user/repo",
            "user/repo",
            "git+ssh://git@host/x.git",
            "npm:../x@1",
        ] {
            write(&format!(r#"{{"optionalDependencies":{{"a":"{bad}"}}}}"#));
            assert!(npm_dependencies(d.path()).is_err(), "{bad}");
        }
    }
}
