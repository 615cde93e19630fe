//! npm: `package.json` (a manifest, or an installed package when it sits in
//! `node_modules/NAME/`), and lock files (`package-lock.json` and `npm-shrinkwrap.json`,
//! lockfile versions 2 and 3, whose `packages` map names every installed path).
//!
//! A manifest's dependency is pinned only when it names one exact version; ranges, tags, git
//! and URL dependencies stay requirements (the capability check reports the git and URL ones).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::component::{Component, Ecosystem, Evidence};

/// The dependency sections of a manifest, and whether each is development-only.
const SECTIONS: [(&str, bool); 4] = [
    ("dependencies", false),
    ("optionalDependencies", false),
    ("peerDependencies", false),
    ("devDependencies", true),
];

fn json(path: &Path) -> Result<Value, String> {
    let text = super::text(path)?;
    serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))
}

/// The installed package's name when `rel` is `…/node_modules/[@scope/]NAME/package.json`.
pub(crate) fn installed_name(rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let n = parts.len();
    if n >= 3 && parts[n - 3] == "node_modules" && !parts[n - 2].starts_with('@') {
        return Some(parts[n - 2].to_owned());
    }
    if n >= 4 && parts[n - 4] == "node_modules" && parts[n - 3].starts_with('@') {
        return Some(format!("{}/{}", parts[n - 3], parts[n - 2]));
    }
    None
}

/// The declared licence: a string, or the old `{ "type": … }` object.
fn license(v: &Value) -> Option<String> {
    match v.get("license") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(o)) => o.get("type").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// The names a manifest depends on (all sections).
fn dependency_names(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (section, _) in SECTIONS {
        if let Some(deps) = v.get(section).and_then(Value::as_object) {
            out.extend(deps.keys().cloned());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether an npm version spec names exactly one version (`1.2.3`, `=1.2.3`, `v1.2.3`).
fn exact(spec: &str) -> Option<&str> {
    let s = spec.trim().trim_start_matches('=').trim_start_matches('v');
    nodejs_semver::Version::parse(s).is_ok().then_some(s)
}

/// A `package.json`: an installed component (with its own dependencies as edges), or a
/// project's manifest (its declared dependencies).
pub fn package_json(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let v = json(path)?;
    if let Some(dir_name) = installed_name(rel) {
        let name = v.get("name").and_then(Value::as_str).unwrap_or(&dir_name);
        let Some(version) = v.get("version").and_then(Value::as_str) else {
            return Err("an installed package.json without a version".into());
        };
        let mut c = Component::pinned(Ecosystem::Npm, name, version, Evidence::Installed, rel);
        c.license = license(&v);
        c.depends_on = v
            .get("dependencies")
            .and_then(Value::as_object)
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default();
        return Ok(vec![c]);
    }
    if rel.starts_with("node_modules/") || rel.contains("/node_modules/") {
        // A package's inner `package.json` (`lib/package.json` marking a module type): not
        // a manifest of the project.
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (section, dev) in SECTIONS {
        let Some(deps) = v.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (name, spec) in deps {
            let spec = spec.as_str().unwrap_or("*");
            let mut c = match exact(spec) {
                Some(version) => {
                    let mut c =
                        Component::pinned(Ecosystem::Npm, name, version, Evidence::Manifest, rel);
                    c.direct = true;
                    c
                }
                None => Component::unpinned(Ecosystem::Npm, name, spec, rel),
            };
            c.dev = dev;
            out.push(c);
        }
    }
    Ok(out)
}

/// A lock file (v2/v3 `packages`; v1's nested `dependencies` as a fallback).
pub fn lock(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let v = json(path)?;
    let mut out = Vec::new();
    if let Some(packages) = v.get("packages").and_then(Value::as_object) {
        let direct: BTreeSet<String> = packages
            .get("")
            .map(dependency_names)
            .unwrap_or_default()
            .into_iter()
            .collect();
        for (key, p) in packages {
            if key.is_empty() || p.get("link").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            // `node_modules/a/node_modules/@s/b` → `@s/b`, unless the entry names itself.
            let Some(from_path) = key.rsplit_once("node_modules/").map(|(_, n)| n) else {
                continue; // a workspace member's folder, not an installed package
            };
            let name = p.get("name").and_then(Value::as_str).unwrap_or(from_path);
            let Some(version) = p.get("version").and_then(Value::as_str) else {
                continue;
            };
            let mut c = Component::pinned(Ecosystem::Npm, name, version, Evidence::Lock, rel);
            c.direct = key.matches("node_modules/").count() == 1 && direct.contains(name);
            c.dev = p.get("dev").and_then(Value::as_bool) == Some(true);
            c.license = license(p);
            c.depends_on = p
                .get("dependencies")
                .and_then(Value::as_object)
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default();
            out.push(c);
        }
        return Ok(out);
    }
    // Lockfile v1: `dependencies` nested by name.
    fn walk(deps: &Value, top: bool, rel: &str, out: &mut Vec<Component>) {
        let Some(map) = deps.as_object() else { return };
        for (name, d) in map {
            if let Some(version) = d.get("version").and_then(Value::as_str)
                && exact(version).is_some()
            {
                let mut c = Component::pinned(Ecosystem::Npm, name, version, Evidence::Lock, rel);
                c.direct = top;
                c.dev = d.get("dev").and_then(Value::as_bool) == Some(true);
                out.push(c);
            }
            if let Some(nested) = d.get("dependencies") {
                walk(nested, false, rel, out);
            }
        }
    }
    match v.get("dependencies") {
        Some(deps) => walk(deps, true, rel, &mut out),
        None => return Err("a lock file with neither `packages` nor `dependencies`".into()),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_names_come_from_the_path() {
        assert_eq!(
            installed_name("node_modules/a/package.json").as_deref(),
            Some("a")
        );
        assert_eq!(
            installed_name("x/node_modules/@s/b/package.json").as_deref(),
            Some("@s/b")
        );
        assert_eq!(installed_name("package.json"), None);
        assert_eq!(installed_name("node_modules/@s/package.json"), None);
    }

    #[test]
    fn only_exact_specs_pin() {
        assert_eq!(exact("1.2.3"), Some("1.2.3"));
        assert_eq!(exact("=1.2.3"), Some("1.2.3"));
        assert_eq!(exact("^1.2.3"), None);
        assert_eq!(exact("github:a/b"), None);
        assert_eq!(exact("latest"), None);
    }
}
