//! The inventory: every package a project is made of, read from what is really there, most
//! precise first — an installed tree ([`python`]'s `*.dist-info` and wheels, [`npm`]'s
//! `node_modules/**/package.json`), lock files ([`locks`]: `package-lock.json`,
//! `npm-shrinkwrap.json`, `uv.lock`, `poetry.lock`, `Pipfile.lock`; pinned
//! `requirements*.txt`), then manifests (`package.json`, `pyproject.toml`, `setup.cfg`,
//! `requirements.in`), whose unpinned ranges are kept as such.
//!
//! Guarantees: nothing is executed and no link is followed (a planted symlink cannot make the
//! scan read outside the folder); the walk and every file read are bounded ([`MAX_FILES`],
//! [`MAX_DEPTH`], [`MAX_FILE`]); a file that does not parse is listed in
//! [`Inventory::unreadable`], never a panic and never silently dropped.

pub mod locks;
pub mod npm;
pub mod python;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::component::{Component, Ecosystem};

/// Most directory entries visited.
pub const MAX_FILES: usize = 500_000;

/// Deepest folder visited (node_modules trees nest; 40 is far beyond real ones).
pub const MAX_DEPTH: usize = 40;

/// Largest manifest or lock file read.
pub const MAX_FILE: u64 = 64 << 20;

/// What the project is made of.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Inventory {
    /// The components, merged (one per ecosystem, name and version).
    pub components: Vec<Component>,
    /// Files that should have said something and could not be read or parsed, with why.
    pub unreadable: Vec<(String, String)>,
    /// The walk stopped early ([`MAX_FILES`]): the inventory may be incomplete.
    pub truncated: bool,
}

/// The files the inventory reads, found by one walk.
#[derive(Debug, Default)]
pub struct Files {
    /// Relative path → absolute path, for every file the readers know by name.
    pub known: Vec<(String, PathBuf)>,
    /// The walk stopped early.
    pub truncated: bool,
}

/// Whether a file name is one the inventory or the capability check reads.
fn wanted(name: &str, parent: &str) -> bool {
    matches!(
        name,
        "package.json"
            | "package-lock.json"
            | "npm-shrinkwrap.json"
            | "uv.lock"
            | "poetry.lock"
            | "Pipfile.lock"
            | "Pipfile"
            | "pyproject.toml"
            | "setup.cfg"
            | "setup.py"
            | "binding.gyp"
    ) || (name.starts_with("requirements") && (name.ends_with(".txt") || name.ends_with(".in")))
        || (name == "METADATA" && parent.ends_with(".dist-info"))
        || name.ends_with(".whl")
        || name.ends_with(".node")
}

/// Walk `root` (without following links) for the files the readers want.
pub fn walk(root: &Path) -> Files {
    let mut out = Files::default();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let parent = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_FILES {
                out.truncated = true;
                return out;
            }
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if kind.is_dir() {
                if depth < MAX_DEPTH && name != ".git" && name != ".fetch" {
                    stack.push((path, depth + 1));
                }
            } else if kind.is_file() && wanted(&name, &parent) {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                out.known.push((rel, path));
            }
        }
    }
    out.known.sort();
    out
}

/// Read the inventory from the files `walk` found.
pub fn inventory(files: &Files) -> Inventory {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for (rel, path) in &files.known {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let result = match name.as_ref() {
            "package.json" => npm::package_json(rel, path),
            "package-lock.json" | "npm-shrinkwrap.json" => npm::lock(rel, path),
            "uv.lock" => locks::uv(rel, path),
            "poetry.lock" => locks::poetry(rel, path),
            "Pipfile.lock" => locks::pipfile(rel, path),
            "Pipfile" => locks::pipfile_manifest(rel, path),
            "pyproject.toml" => python::pyproject(rel, path),
            "setup.cfg" => python::setup_cfg(rel, path),
            "METADATA" => python::dist_info(rel, path),
            n if n.ends_with(".whl") => python::wheel(rel, path),
            n if n.starts_with("requirements") => python::requirements(rel, path),
            _ => Ok(Vec::new()),
        };
        match result {
            Ok(mut c) => found.append(&mut c),
            Err(why) => unreadable.push((rel.clone(), why)),
        }
    }
    Inventory {
        components: merge(found),
        unreadable,
        truncated: files.truncated,
    }
}

/// One entry per (ecosystem, name, version): sources joined, the most precise evidence kept,
/// `direct` if any source says so, `dev` only if every source says so. A declared requirement
/// without a version is dropped when some source knows the exact version of that package
/// (which is then direct).
pub fn merge(found: Vec<Component>) -> Vec<Component> {
    let mut pinned: BTreeMap<(Ecosystem, String, String), Component> = BTreeMap::new();
    let mut loose: BTreeMap<(Ecosystem, String), Component> = BTreeMap::new();
    for c in found {
        match c.version.clone() {
            Some(v) => {
                let key = (c.ecosystem, c.name.clone(), v);
                match pinned.get_mut(&key) {
                    Some(have) => join(have, c),
                    None => {
                        pinned.insert(key, c);
                    }
                }
            }
            None => {
                let key = (c.ecosystem, c.name.clone());
                match loose.get_mut(&key) {
                    Some(have) => {
                        if let (Some(a), Some(b)) = (&mut have.requirement, &c.requirement)
                            && a != b
                            && !a.split(" | ").any(|x| x == b)
                        {
                            a.push_str(" | ");
                            a.push_str(b);
                        }
                        join(have, c);
                    }
                    None => {
                        loose.insert(key, c);
                    }
                }
            }
        }
    }
    for ((eco, name), declared) in loose {
        let mut hit = false;
        for ((e, n, _), c) in pinned.iter_mut() {
            if *e == eco && *n == name {
                hit = true;
                c.direct = true;
                c.dev &= declared.dev;
                for f in &declared.found_in {
                    if !c.found_in.contains(f) {
                        c.found_in.push(f.clone());
                    }
                }
            }
        }
        if !hit {
            pinned.insert((eco, name, String::new()), declared);
        }
    }
    pinned.into_values().collect()
}

fn join(have: &mut Component, c: Component) {
    for f in c.found_in {
        if !have.found_in.contains(&f) {
            have.found_in.push(f);
        }
    }
    have.evidence = have.evidence.min(c.evidence);
    have.direct |= c.direct;
    have.dev &= c.dev;
    if have.license.is_none() {
        have.license = c.license;
    }
    for d in c.depends_on {
        if !have.depends_on.contains(&d) {
            have.depends_on.push(d);
        }
    }
}

/// A file's text, bounded by [`MAX_FILE`].
pub(crate) fn text(path: &Path) -> Result<String, String> {
    let bytes = crate::read_bounded(path, MAX_FILE)
        .ok_or_else(|| format!("unreadable, or larger than {MAX_FILE} bytes"))?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::Evidence;

    #[test]
    fn a_pinned_version_absorbs_the_declared_range_and_becomes_direct() {
        let lock = Component::pinned(Ecosystem::Npm, "minimist", "1.2.5", Evidence::Lock, "l");
        let also = Component::pinned(
            Ecosystem::Npm,
            "minimist",
            "1.2.5",
            Evidence::Installed,
            "node_modules/minimist/package.json",
        );
        let declared = Component::unpinned(Ecosystem::Npm, "minimist", "^1.2.0", "package.json");
        let other = Component::unpinned(Ecosystem::Npm, "left-pad", "^1", "package.json");
        let merged = merge(vec![lock, declared, also, other]);
        assert_eq!(merged.len(), 2);
        let m = merged.iter().find(|c| c.name == "minimist").unwrap();
        assert!(m.direct);
        assert_eq!(m.evidence, Evidence::Installed);
        assert_eq!(m.found_in.len(), 3);
        let l = merged.iter().find(|c| c.name == "left-pad").unwrap();
        assert_eq!(l.version, None);
        assert_eq!(l.requirement.as_deref(), Some("^1"));
    }
}
