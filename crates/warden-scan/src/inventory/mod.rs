//! The inventory: every package a project is made of, read from what is really there, most
//! precise first — an installed tree ([`python`]'s `*.dist-info` and wheels, [`npm`]'s
//! `node_modules/**/package.json`), lock files ([`locks`]: `package-lock.json`,
//! `npm-shrinkwrap.json`, `uv.lock`, `poetry.lock`, `Pipfile.lock`; pinned
//! `requirements*.txt`), then manifests (`package.json`, `pyproject.toml`, `setup.cfg`,
//! `requirements.in`), whose unpinned ranges are kept as such.
//!
//! Guarantees: nothing is executed and no link is followed (a planted symlink cannot make the
//! scan read outside the folder); the walk and every file read are bounded ([`MAX_FILES`],
//! [`MAX_DEPTH`], [`MAX_FILE`], [`MAX_MANIFEST`], and the scan's total [`crate::budget`]); a
//! walk or a budget that stopped early marks the inventory truncated; a file that does not
//! parse is listed in [`Inventory::unreadable`], never a panic and never silently dropped.

pub mod locks;
pub mod npm;
pub mod python;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::component::{Component, Ecosystem};

/// Most directory entries visited.
pub const MAX_FILES: usize = 500_000;

/// Deepest folder visited (node_modules trees nest; 40 is far beyond real ones).
pub const MAX_DEPTH: usize = 40;

/// Largest lock file read (the largest real `package-lock.json` files are a few tens of MiB).
pub const MAX_FILE: u64 = 32 << 20;

/// Largest manifest, requirements file or METADATA read.
pub const MAX_MANIFEST: u64 = 4 << 20;

/// What the project is made of.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Inventory {
    /// The components, merged (one per ecosystem, name and version).
    pub components: Vec<Component>,
    /// Files that should have said something and could not be read or parsed, with why.
    pub unreadable: Vec<(String, String)>,
    /// The walk or the read budget stopped early: the inventory may be incomplete.
    pub truncated: bool,
}

/// The files the inventory reads, found by one walk.
#[derive(Debug, Default)]
pub struct Files {
    /// Relative path → absolute path, for every file the readers know by name.
    pub known: Vec<(String, PathBuf)>,
    /// Files the readers know by name that the walk did not follow (symbolic links), with why:
    /// what they hold is not in the inventory, and the report says so.
    pub skipped: Vec<(String, String)>,
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
                if name == ".git" || name == ".fetch" {
                    continue;
                }
                if depth >= MAX_DEPTH {
                    out.truncated = true;
                    continue;
                }
                stack.push((path, depth + 1));
            } else if (kind.is_file() || kind.is_symlink()) && wanted(&name, &parent) {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                if kind.is_symlink() {
                    out.skipped
                        .push((rel, "a symbolic link: not followed".to_owned()));
                } else {
                    out.known.push((rel, path));
                }
            }
        }
    }
    out.known.sort();
    out.skipped.sort();
    out
}

/// Characters of a reason kept (a parse error can quote a whole line of the file).
const MAX_WHY: usize = 200;

/// `why` as a report keeps it: control characters escaped, at most [`MAX_WHY`] characters.
pub fn bounded_why(why: &str) -> String {
    let mut out = String::new();
    let mut n = 0;
    for c in why.chars() {
        let shown = if c.is_control() {
            c.escape_default().to_string()
        } else {
            c.to_string()
        };
        n += shown.chars().count();
        if n > MAX_WHY {
            out.push('…');
            break;
        }
        out.push_str(&shown);
    }
    out
}

/// Read the inventory from the files `walk` found.
pub fn inventory(files: &Files) -> Inventory {
    let mut found = Vec::new();
    let mut unreadable = files.skipped.clone();
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
            n if n.starts_with("requirements") => python::requirements(rel, path, &mut unreadable),
            _ => Ok(Vec::new()),
        };
        match result {
            Ok(mut c) => found.append(&mut c),
            Err(why) => unreadable.push((rel.clone(), bounded_why(&why))),
        }
    }
    Inventory {
        components: merge(found),
        unreadable,
        truncated: files.truncated || crate::budget::spent(),
    }
}

/// One entry per (ecosystem, name, version): sources joined, the most precise evidence kept,
/// `direct` if any source says so, `dev` only if every source says so. A declared requirement
/// without a version is dropped when some source knows the exact version of that package
/// (which is then direct). Linear in the number of components (a hostile manifest can declare
/// millions).
pub fn merge(found: Vec<Component>) -> Vec<Component> {
    let mut pinned: BTreeMap<(Ecosystem, String, String), Joined> = BTreeMap::new();
    let mut loose: BTreeMap<(Ecosystem, String), Joined> = BTreeMap::new();
    for c in found {
        match c.version.clone() {
            Some(v) => match pinned.entry((c.ecosystem, c.name.clone(), v)) {
                Entry::Occupied(mut e) => e.get_mut().join(c),
                Entry::Vacant(e) => {
                    e.insert(Joined::new(c));
                }
            },
            None => match loose.entry((c.ecosystem, c.name.clone())) {
                Entry::Occupied(mut e) => {
                    let have = e.get_mut();
                    if let (Some(a), Some(b)) = (&mut have.c.requirement, &c.requirement)
                        && a != b
                        && !a.split(" | ").any(|x| x == b)
                        && a.len() < 1000
                    {
                        a.push_str(" | ");
                        a.push_str(b);
                    }
                    have.join(c);
                }
                Entry::Vacant(e) => {
                    e.insert(Joined::new(c));
                }
            },
        }
    }
    // The pinned versions of each name, to absorb its declared requirement.
    let mut versions: BTreeMap<(Ecosystem, String), Vec<String>> = BTreeMap::new();
    for (eco, name, v) in pinned.keys() {
        versions
            .entry((*eco, name.clone()))
            .or_default()
            .push(v.clone());
    }
    for ((eco, name), declared) in loose {
        match versions.get(&(eco, name.clone())) {
            Some(vs) => {
                for v in vs {
                    if let Some(c) = pinned.get_mut(&(eco, name.clone(), v.clone())) {
                        c.c.direct = true;
                        c.c.dev &= declared.c.dev;
                        for f in &declared.c.found_in {
                            c.add_file(f);
                        }
                    }
                }
            }
            None => {
                pinned.insert((eco, name, String::new()), declared);
            }
        }
    }
    pinned.into_values().map(|j| j.c).collect()
}

/// A component being merged, with sets beside its lists (no quadratic `contains`).
struct Joined {
    c: Component,
    files: BTreeSet<String>,
    deps: BTreeSet<String>,
}

impl Joined {
    fn new(c: Component) -> Self {
        Joined {
            files: c.found_in.iter().cloned().collect(),
            deps: c.depends_on.iter().cloned().collect(),
            c,
        }
    }

    fn add_file(&mut self, f: &str) {
        if self.files.insert(f.to_owned()) {
            self.c.found_in.push(f.to_owned());
        }
    }

    fn join(&mut self, other: Component) {
        for f in &other.found_in {
            self.add_file(f);
        }
        self.c.evidence = self.c.evidence.min(other.evidence);
        self.c.direct |= other.direct;
        self.c.dev &= other.dev;
        if self.c.license.is_none() {
            self.c.license = other.license;
        }
        for d in other.depends_on {
            if self.deps.insert(d.clone()) {
                self.c.depends_on.push(d);
            }
        }
    }
}

/// A file's text: lock files up to [`MAX_FILE`], everything else up to [`MAX_MANIFEST`].
pub(crate) fn text(path: &Path) -> Result<String, String> {
    let lock = path.file_name().is_some_and(|n| {
        let n = n.to_string_lossy();
        n.ends_with(".lock") || n.ends_with("-lock.json") || n == "npm-shrinkwrap.json"
    });
    let max = if lock { MAX_FILE } else { MAX_MANIFEST };
    let bytes = crate::read_bounded(path, max).ok_or_else(|| {
        if crate::budget::spent() {
            "left unread: the scan's read budget is spent".to_owned()
        } else {
            format!("unreadable, or larger than {max} bytes")
        }
    })?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::Evidence;

    /// Issue #31: a symbolic link where a manifest would be, and includes that are missing or
    /// lead outside, were dropped silently and the check read "complete". Each is listed with
    /// why; what was read is still read.
    #[test]
    fn what_was_not_followed_is_listed_with_why() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(tmp.path().join("elsewhere.txt"), "jinja2==2.10\n").unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("elsewhere.txt"),
            root.join("requirements.txt"),
        )
        .unwrap();
        std::fs::write(
            root.join("requirements-dev.txt"),
            "-r missing.txt\n-r ../elsewhere.txt\nrequests==2.0.0\n",
        )
        .unwrap();
        let inv = inventory(&walk(&root));
        let why = |file: &str, part: &str| {
            inv.unreadable
                .iter()
                .any(|(f, w)| f == file && w.contains(part))
        };
        assert!(
            why("requirements.txt", "symbolic link"),
            "{:?}",
            inv.unreadable
        );
        assert!(
            why("requirements-dev.txt", "-r missing.txt: missing"),
            "{:?}",
            inv.unreadable
        );
        assert!(
            why(
                "requirements-dev.txt",
                "-r ../elsewhere.txt: outside the scanned folder"
            ),
            "{:?}",
            inv.unreadable
        );
        assert!(inv.components.iter().any(|c| c.name == "requests"));
        assert!(!inv.components.iter().any(|c| c.name == "jinja2"));
    }

    /// Issue #31: a TOML parse error quoted the offending line whole (a 400 KB line gave a
    /// 400 KB reason). Reasons are cut to 200 characters, control characters escaped.
    #[test]
    fn a_parse_error_is_quoted_short() {
        let tmp = tempfile::tempdir().unwrap();
        let line = format!("[project]\nname = \"x\u{1b}[2J{}\n", "a".repeat(400_000));
        std::fs::write(tmp.path().join("pyproject.toml"), line).unwrap();
        let inv = inventory(&walk(tmp.path()));
        let (_, why) = inv.unreadable.first().expect("the parse error");
        assert!(
            why.chars().count() <= 201,
            "{} characters",
            why.chars().count()
        );
        assert!(!why.contains('\u{1b}'), "{why}");
    }

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
