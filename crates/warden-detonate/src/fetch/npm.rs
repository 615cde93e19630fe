//! `npm:` packages and Node projects: dependencies fetched on the host with
//! `npm install --ignore-scripts` (git disabled), their lifecycle hooks listed for the jail.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::host::{run, workspace};
use super::{Entry, Fetched, checked};

/// Lifecycle hooks of every package under `node_modules` (two levels, for scopes).
pub(super) fn npm_hooks(modules: &Path) -> Vec<Value> {
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
        out.extend(hooks_of(&pkg, &["preinstall", "install", "postinstall"]));
    }
    out
}

/// `install.script` data for each of `hooks` that the manifest `pkg` defines, in that order.
pub(super) fn hooks_of(pkg: &Value, hooks: &[&str]) -> Vec<Value> {
    hooks
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

/// `npm install --ignore-scripts` into `prefix`: `spec` (a checked package spec), or the
/// dependencies of the `package.json` there. No package code runs (and no git: see `quiet`).
pub(super) fn install_without_scripts(prefix: &Path, spec: Option<&str>) -> Result<()> {
    let mut npm = Command::new("npm");
    npm.args([
        "install",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--silent",
        "--omit=dev",
        "--omit=peer",
        "--package-lock=false",
        "--install-links=false",
        "--prefix",
    ])
    .arg(prefix)
    .args(spec);
    run(&mut npm, "npm install --ignore-scripts")
}

pub(super) fn fetch(spec: &str) -> Result<Fetched> {
    let spec = checked(spec, true)?;
    let ws = workspace()?;
    install_without_scripts(ws.path(), Some(spec))?;
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
