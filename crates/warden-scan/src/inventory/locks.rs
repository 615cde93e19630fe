//! Python lock files: `uv.lock` (the project itself is the package whose source is its own
//! folder; its dependencies are the direct ones), `poetry.lock` (every `[[package]]`; which are
//! direct comes from `pyproject.toml`), and Pipenv's `Pipfile.lock` (`default` and `develop`;
//! `Pipfile` says which are direct).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::component::{Component, Ecosystem, Evidence};

fn table(path: &Path) -> Result<toml::Table, String> {
    toml::from_str(&super::text(path)?).map_err(|e| format!("not TOML: {e}"))
}

fn packages(doc: &toml::Table) -> impl Iterator<Item = &toml::Table> {
    doc.get("package")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_table)
}

fn string<'a>(t: &'a toml::Table, key: &str) -> Option<&'a str> {
    t.get(key).and_then(toml::Value::as_str)
}

/// `uv.lock`.
pub fn uv(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let doc = table(path)?;
    let local = |p: &toml::Table| {
        p.get("source")
            .and_then(toml::Value::as_table)
            .is_some_and(|s| {
                ["editable", "virtual", "directory"]
                    .iter()
                    .any(|k| s.contains_key(*k))
            })
    };
    let names = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("name").and_then(toml::Value::as_str))
            .map(|n| Ecosystem::PyPI.normal(n))
            .collect()
    };
    let mut direct = BTreeSet::new();
    let mut dev = BTreeSet::new();
    for p in packages(&doc).filter(|p| local(p)) {
        direct.extend(names(p.get("dependencies")));
        if let Some(groups) = p.get("dev-dependencies").and_then(toml::Value::as_table) {
            for g in groups.values() {
                dev.extend(names(Some(g)));
            }
        }
    }
    let mut out = Vec::new();
    for p in packages(&doc).filter(|p| !local(p)) {
        let (Some(name), Some(version)) = (string(p, "name"), string(p, "version")) else {
            continue;
        };
        let mut c = Component::pinned(Ecosystem::PyPI, name, version, Evidence::Lock, rel);
        c.direct = direct.contains(&c.name) || dev.contains(&c.name);
        c.dev = dev.contains(&c.name) && !direct.contains(&c.name);
        c.depends_on = names(p.get("dependencies"));
        out.push(c);
    }
    Ok(out)
}

/// `poetry.lock`.
pub fn poetry(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let doc = table(path)?;
    let mut out = Vec::new();
    for p in packages(&doc) {
        let (Some(name), Some(version)) = (string(p, "name"), string(p, "version")) else {
            continue;
        };
        let mut c = Component::pinned(Ecosystem::PyPI, name, version, Evidence::Lock, rel);
        c.dev = string(p, "category") == Some("dev");
        c.depends_on = p
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|d| d.keys().map(|k| Ecosystem::PyPI.normal(k)).collect())
            .unwrap_or_default();
        out.push(c);
    }
    Ok(out)
}

/// `Pipfile.lock`.
pub fn pipfile(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let v: Value =
        serde_json::from_str(&super::text(path)?).map_err(|e| format!("not JSON: {e}"))?;
    let mut out = Vec::new();
    for (section, is_dev) in [("default", false), ("develop", true)] {
        let Some(map) = v.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (name, p) in map {
            let Some(version) = p.get("version").and_then(Value::as_str) else {
                continue; // a git or path entry
            };
            let mut c = Component::pinned(Ecosystem::PyPI, name, version, Evidence::Lock, rel);
            c.dev = is_dev;
            out.push(c);
        }
    }
    Ok(out)
}

/// `Pipfile`: `[packages]` and `[dev-packages]`, pinned when `==VERSION`.
pub fn pipfile_manifest(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let doc = table(path)?;
    let mut out = Vec::new();
    for (section, is_dev) in [("packages", false), ("dev-packages", true)] {
        let Some(t) = doc.get(section).and_then(toml::Value::as_table) else {
            continue;
        };
        for (name, spec) in t {
            let spec = match spec {
                toml::Value::String(s) => s.clone(),
                toml::Value::Table(t) => string(t, "version").unwrap_or("*").to_owned(),
                _ => "*".into(),
            };
            let line = if spec == "*" {
                name.clone()
            } else {
                format!("{name}{spec}")
            };
            let mut c = match super::python::requirement(&line) {
                Some((n, Some(v), _)) => {
                    let mut c = Component::pinned(Ecosystem::PyPI, &n, &v, Evidence::Manifest, rel);
                    c.direct = true;
                    c
                }
                _ => Component::unpinned(Ecosystem::PyPI, name, &spec, rel),
            };
            c.dev = is_dev;
            out.push(c);
        }
    }
    Ok(out)
}
