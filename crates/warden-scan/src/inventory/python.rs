//! Python: installed distributions (`*.dist-info/METADATA` in a venv, and wheels: a fetched
//! package's `dist/*.whl`), requirements files (`requirements*.txt` pinned with `==`, with `-r`
//! includes; `requirements*.in`), and manifests (`pyproject.toml`'s `[project]`, Poetry's
//! tables and PEP 735 groups; `setup.cfg`'s `install_requires`).
//!
//! Requirement lines are read by [`requirement`] (names, extras, `pep440_rs` specifiers); a
//! line that is not a PEP 508 requirement (an editable path, an index option) is not a
//! registry component and is left out. A
//! distribution's direct/transitive status comes from the other installed distributions'
//! `Requires-Dist`: one nobody requires is a root, and so direct.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use pep440_rs::Operator;

use crate::component::{Component, Ecosystem, Evidence};

/// Deepest chain of `-r` includes followed.
const MAX_INCLUDES: usize = 8;

/// Largest METADATA read from a wheel.
const MAX_METADATA: u64 = 4 << 20;

/// `name`, and when exactly one version is named (`==1.2.3`, `===1.2.3`) that version, and
/// the specifier text.
///
/// Only the head of a PEP 508 line is read — the name, extras, and the version specifiers
/// (parsed by `pep440_rs`) or `@ URL` — and the markers after `;` are ignored. `pep508_rs`
/// 0.9.2 is not used for this: its parser panics on hostile lines (`a-𝼀`, `A[a-]`, both found
/// by the property tests below), and a scan reads files a hostile install wrote.
pub fn requirement(line: &str) -> Option<(String, Option<String>, String)> {
    let line = line.split(';').next().unwrap_or("").trim();
    let name_len = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(line.len());
    let name = &line[..name_len];
    let edges_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edges_ok(name.chars().next()) || !edges_ok(name.chars().last()) {
        return None;
    }
    let mut rest = line[name_len..].trim_start();
    if let Some(extras) = rest.strip_prefix('[') {
        let close = extras.find(']')?;
        let ok = extras[..close].split(',').map(str::trim).all(|e| {
            e.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        });
        if !ok {
            return None;
        }
        rest = extras[close + 1..].trim_start();
    }
    if let Some(url) = rest.strip_prefix('@') {
        let url = url.trim();
        return (!url.is_empty()).then(|| (Ecosystem::PyPI.normal(name), None, format!("@ {url}")));
    }
    let spec = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rest)
        .trim();
    if spec.is_empty() {
        return Some((Ecosystem::PyPI.normal(name), None, "*".into()));
    }
    let specs = pep440_rs::VersionSpecifiers::from_str(spec).ok()?;
    let pinned = match specs.iter().collect::<Vec<_>>().as_slice() {
        [one] if matches!(one.operator(), Operator::Equal | Operator::ExactEqual) => {
            Some(one.version().to_string())
        }
        _ => None,
    };
    Some((Ecosystem::PyPI.normal(name), pinned, specs.to_string()))
}

/// A component from a requirement string.
fn from_requirement(line: &str, rel: &str, evidence: Evidence) -> Option<Component> {
    let (name, pinned, spec) = requirement(line)?;
    Some(match pinned {
        Some(v) => {
            let mut c = Component::pinned(Ecosystem::PyPI, &name, &v, evidence, rel);
            c.direct = true;
            c
        }
        None => Component::unpinned(Ecosystem::PyPI, &name, &spec, rel),
    })
}

/// A `requirements*.txt` (pinned lines count as locked) or `requirements*.in` (declared).
/// Includes (`-r`) that are missing, lead outside the scanned folder or nest too deep are not
/// followed, and each is added to `dropped` with why: the check is then partial, never
/// complete.
pub fn requirements(
    rel: &str,
    path: &Path,
    dropped: &mut Vec<(String, String)>,
) -> Result<Vec<Component>, String> {
    let evidence = if rel.ends_with(".in") {
        Evidence::Manifest
    } else {
        Evidence::Lock
    };
    let root = root_of(rel, path);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut reader = Reader {
        root: &root,
        evidence,
        seen: &mut seen,
        out: &mut out,
        dropped,
    };
    reader.read(path, rel, 0)?;
    Ok(out)
}

/// One requirements file's walk through its includes.
struct Reader<'a> {
    root: &'a Path,
    evidence: Evidence,
    seen: &'a mut BTreeSet<PathBuf>,
    out: &'a mut Vec<Component>,
    dropped: &'a mut Vec<(String, String)>,
}

/// The scanned folder, from a file's absolute and relative paths.
fn root_of(rel: &str, path: &Path) -> PathBuf {
    let mut root = path.to_path_buf();
    for _ in Path::new(rel).components() {
        root.pop();
    }
    root
}

impl Reader<'_> {
    fn read(&mut self, path: &Path, rel: &str, depth: usize) -> Result<(), String> {
        let text = super::text(path)?;
        let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
        for line in joined.lines() {
            let line = match line.find(" #") {
                Some(i) => &line[..i],
                None => line,
            }
            .trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let include = line
                .strip_prefix("-r ")
                .or_else(|| line.strip_prefix("--requirement "))
                .or_else(|| line.strip_prefix("--requirement="));
            if let Some(inc) = include {
                self.include(path, rel, inc.trim(), depth)?;
                continue;
            }
            if line.starts_with('-') {
                continue; // -c constraints, -e editables, index options
            }
            // Options after the requirement (`--hash=…`) are not part of PEP 508.
            let req = line.split(" --").next().unwrap_or(line).trim();
            if let Some(c) = from_requirement(req, rel, self.evidence) {
                self.out.push(c);
            }
        }
        Ok(())
    }

    /// Follow `-r inc` of `path`, or say why not.
    fn include(&mut self, path: &Path, rel: &str, inc: &str, depth: usize) -> Result<(), String> {
        let mut drop = |why: String| {
            self.dropped.push((
                rel.to_owned(),
                super::bounded_why(&format!("-r {inc}: {why}")),
            ));
        };
        if depth >= MAX_INCLUDES {
            drop(format!(
                "includes nested deeper than {MAX_INCLUDES}: not followed"
            ));
            return Ok(());
        }
        let Some(dir) = path.parent() else {
            drop("no folder to resolve it in".into());
            return Ok(());
        };
        // Includes stay inside the scanned folder, links resolved.
        let target = match dir.join(inc).canonicalize() {
            Ok(t) => t,
            Err(e) => {
                drop(format!("missing ({e})"));
                return Ok(());
            }
        };
        let Ok(canon_root) = self.root.canonicalize() else {
            drop("the scanned folder cannot be resolved".into());
            return Ok(());
        };
        if !target.starts_with(&canon_root) {
            drop("outside the scanned folder: not followed".into());
            return Ok(());
        }
        if !self.seen.insert(target.clone()) {
            return Ok(()); // read already (an include cycle or a repeat)
        }
        let inc_rel = target
            .strip_prefix(&canon_root)
            .unwrap_or(&target)
            .to_string_lossy()
            .into_owned();
        self.read(&target, &inc_rel, depth + 1)
    }
}

/// `pyproject.toml`: `[project]` dependencies and extras, Poetry's tables, PEP 735 groups.
pub fn pyproject(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let doc: toml::Table = toml::from_str(&super::text(path)?).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let project = doc.get("project");
    for r in strings(project.and_then(|p| p.get("dependencies"))) {
        out.extend(from_requirement(&r, rel, Evidence::Manifest));
    }
    if let Some(extras) = project
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(toml::Value::as_table)
    {
        for list in extras.values() {
            for r in strings(Some(list)) {
                out.extend(from_requirement(&r, rel, Evidence::Manifest));
            }
        }
    }
    if let Some(groups) = doc.get("dependency-groups").and_then(toml::Value::as_table) {
        for list in groups.values() {
            for r in strings(Some(list)) {
                out.extend(from_requirement(&r, rel, Evidence::Manifest).map(dev));
            }
        }
    }
    let poetry = doc.get("tool").and_then(|t| t.get("poetry"));
    let mut tables = vec![(poetry.and_then(|p| p.get("dependencies")), false)];
    tables.push((poetry.and_then(|p| p.get("dev-dependencies")), true));
    if let Some(groups) = poetry
        .and_then(|p| p.get("group"))
        .and_then(toml::Value::as_table)
    {
        for g in groups.values() {
            tables.push((g.get("dependencies"), true));
        }
    }
    for (table, is_dev) in tables {
        let Some(t) = table.and_then(toml::Value::as_table) else {
            continue;
        };
        for (name, spec) in t {
            if name == "python" {
                continue;
            }
            let spec = match spec {
                toml::Value::String(s) => Some(s.clone()),
                toml::Value::Table(t) => {
                    t.get("version").and_then(|v| v.as_str().map(str::to_owned))
                }
                _ => None,
            };
            let c = match spec.as_deref().map(poetry_exact) {
                Some(Some(v)) => {
                    let mut c =
                        Component::pinned(Ecosystem::PyPI, name, v, Evidence::Manifest, rel);
                    c.direct = true;
                    c
                }
                _ => Component::unpinned(
                    Ecosystem::PyPI,
                    name,
                    spec.as_deref().unwrap_or("(git, path or URL)"),
                    rel,
                ),
            };
            out.push(if is_dev { dev(c) } else { c });
        }
    }
    Ok(out)
}

fn dev(mut c: Component) -> Component {
    c.dev = true;
    c
}

/// Poetry's exact constraints: a bare version (`2.28.0`) or `==2.28.0`.
fn poetry_exact(spec: &str) -> Option<&str> {
    let s = spec.trim().trim_start_matches("==").trim();
    let plain = s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    (plain && pep440_rs::Version::from_str(s).is_ok()).then_some(s)
}

/// `setup.cfg`: `[options] install_requires`, one requirement per continuation line.
pub fn setup_cfg(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let text = super::text(path)?;
    let mut out = Vec::new();
    let mut section = String::new();
    let mut in_key = false;
    for raw in text.lines() {
        let line = raw.trim_end();
        if line.trim_start().starts_with(['#', ';']) {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim().to_owned();
            in_key = false;
            continue;
        }
        let indented = line.starts_with([' ', '\t']);
        if !indented {
            in_key = false;
            if section == "options"
                && let Some((k, v)) = line.split_once(['=', ':'])
                && k.trim() == "install_requires"
            {
                in_key = true;
                out.extend(from_requirement(v, rel, Evidence::Manifest));
            }
            continue;
        }
        if in_key && !line.trim().is_empty() {
            out.extend(from_requirement(line.trim(), rel, Evidence::Manifest));
        }
    }
    Ok(out)
}

/// The headers of a METADATA file that the inventory reads.
#[derive(Debug, Default, PartialEq)]
pub struct Metadata {
    /// `Name`.
    pub name: Option<String>,
    /// `Version`.
    pub version: Option<String>,
    /// `License-Expression`, else a short `License`, else the licence classifiers.
    pub license: Option<String>,
    /// `Requires-Dist` names, without those only an extra pulls in.
    pub requires: Vec<String>,
}

/// Parse METADATA's header block (RFC 822 style; the body after the blank line is ignored).
pub fn metadata(text: &str) -> Metadata {
    let mut m = Metadata::default();
    let (mut expression, mut license, mut classifiers) = (None, None, Vec::new());
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue; // a continuation (a long License text)
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k {
            "Name" => m.name = Some(v.to_owned()),
            "Version" => m.version = Some(v.to_owned()),
            "License-Expression" => expression = Some(v.to_owned()),
            "License" if !v.is_empty() && v.len() <= 100 && v != "UNKNOWN" => {
                license = Some(v.to_owned());
            }
            "Classifier" => {
                if let Some(l) = v.strip_prefix("License ::") {
                    classifiers.push(l.rsplit("::").next().unwrap_or(l).trim().to_owned());
                }
            }
            "Requires-Dist" => {
                let only_extra = v.split_once(';').is_some_and(|(_, m)| m.contains("extra"));
                if !only_extra && let Some((name, _, _)) = requirement(v) {
                    m.requires.push(Ecosystem::PyPI.normal(&name));
                }
            }
            _ => {}
        }
    }
    m.license = expression
        .or(license)
        .or_else(|| (!classifiers.is_empty()).then(|| classifiers.join(" OR ")));
    m
}

fn installed(m: Metadata, rel: &str) -> Result<Vec<Component>, String> {
    let (Some(name), Some(version)) = (m.name, m.version) else {
        return Err("METADATA without Name and Version".into());
    };
    let mut c = Component::pinned(Ecosystem::PyPI, &name, &version, Evidence::Installed, rel);
    c.license = m.license;
    c.depends_on = m.requires;
    Ok(vec![c])
}

/// A `*.dist-info/METADATA` of an installed distribution.
pub fn dist_info(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    installed(metadata(&super::text(path)?), rel)
}

/// A wheel: its `*.dist-info/METADATA`, read from the archive (bounded).
pub fn wheel(rel: &str, path: &Path) -> Result<Vec<Component>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("not a wheel: {e}"))?;
    let name = zip
        .file_names()
        .filter_map(Result::ok)
        .find(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
        .map(|n| n.into_owned())
        .ok_or("a wheel without .dist-info/METADATA")?;
    let entry = zip.by_name(&name).map_err(|e| e.to_string())?;
    let mut text = String::new();
    entry
        .take(MAX_METADATA)
        .read_to_string(&mut text)
        .map_err(|e| format!("{name}: {e}"))?;
    installed(metadata(&text), rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_lines() {
        let r = |s| requirement(s).map(|(n, v, _)| (n, v));
        assert_eq!(
            r("urllib3==1.26.5"),
            Some(("urllib3".into(), Some("1.26.5".into())))
        );
        assert_eq!(
            r("Jinja2 [i18n] == 3.1.2 ; python_version >= '3.8'"),
            Some(("jinja2".into(), Some("3.1.2".into())))
        );
        assert_eq!(r("httpx>=0.27"), Some(("httpx".into(), None)));
        assert_eq!(r("x==1.*"), Some(("x".into(), None)));
        assert_eq!(r("--index-url http://x"), None);
        assert_eq!(r("a-\u{1cf00}"), None, "pep508_rs would panic on it");
    }

    #[test]
    fn metadata_headers() {
        let m = metadata(
            "Metadata-Version: 2.1\nName: urllib3\nVersion: 1.26.5\nLicense: MIT\n\
             Requires-Dist: idna (>=2.0) ; extra == 'secure'\nRequires-Dist: six\n\nbody: x\n",
        );
        assert_eq!(m.name.as_deref(), Some("urllib3"));
        assert_eq!(m.license.as_deref(), Some("MIT"));
        assert_eq!(m.requires, ["six"]);
        let c =
            metadata("Name: a\nVersion: 1\nClassifier: License :: OSI Approved :: MIT License\n");
        assert_eq!(c.license.as_deref(), Some("MIT License"));
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = requirement(&s);
            let _ = metadata(&s);
            let _ = poetry_exact(&s);
        }

        #[test]
        fn requirement_shaped_noise_never_panics(s in "[a-zA-Z0-9_.\\-\\[\\]<>=!~;@ ,'\"()*:/+\u{80}-\u{2000}]{0,40}") {
            let _ = requirement(&s);
        }

        #[test]
        fn a_pin_is_read_back(name in "[a-z][a-z0-9_.-]{0,20}[a-z0-9]", v in "[0-9]{1,3}(\\.[0-9]{1,3}){0,3}") {
            let (n, pinned, _) = requirement(&format!("{name}=={v}")).unwrap();
            proptest::prop_assert_eq!(n, Ecosystem::PyPI.normal(&name));
            proptest::prop_assert!(pinned.is_some());
        }
    }

    #[test]
    fn poetry_bare_versions_are_exact() {
        assert_eq!(poetry_exact("2.28.0"), Some("2.28.0"));
        assert_eq!(poetry_exact("^2.28"), None);
        assert_eq!(poetry_exact("*"), None);
    }
}
