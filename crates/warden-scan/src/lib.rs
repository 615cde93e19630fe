//! The static phase: what an MCP server is made of, before anyone runs it.
//!
//! [`scan`] reads one or more folders (a project's source, what an install left) as a pipeline
//! of named steps: [`inventory`] (every package, from installed trees, lock files and
//! manifests), [`osv`] (known vulnerabilities, offline or from an OSV API), [`capabilities`]
//! (install hooks, native code, entry points, non-registry dependencies, source hints) and
//! [`typosquat`]; [`report`] renders the result as a timeline, JSON or SARIF and
//! [`cyclonedx`] as a CycloneDX 1.6 SBOM.
//!
//! Guarantees: no package code runs and no link is followed; every walk and read is bounded;
//! when no vulnerability source could be used the answer is *unknown*, per component and
//! overall, never "no vulnerabilities".

#![forbid(unsafe_code)]

pub mod budget;
pub mod capabilities;
pub mod component;
pub mod cyclonedx;
pub mod inventory;
pub mod osv;
pub mod report;
pub mod sinks;
pub mod typosquat;
pub mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use warden_events::{Category, Finding, Location};

pub use component::{Component, Ecosystem, Evidence, OsvStatus};
pub use report::ScanReport;

/// Where known vulnerabilities come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsvSource {
    /// An offline folder in osv-scanner's layout.
    Offline(PathBuf),
    /// An OSV-compatible API (base URL; `/v1/querybatch` is appended).
    Online(String),
    /// None was configured: every component is unknown.
    None,
}

/// One folder to scan, and the prefix its files get in the report (`""` for a lone folder).
#[derive(Debug, Clone)]
pub struct Root {
    /// The folder.
    pub path: PathBuf,
    /// Prefix for its relative paths (`source/`, `installed/`).
    pub label: String,
}

/// The vulnerability check as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// `complete` (every component checked), `partial`, `unknown` (none could be checked),
    /// `none` (nothing to check).
    pub status: &'static str,
    /// The source used (`offline: DIR`, `api: URL`), or why there was none.
    pub source: String,
    /// How many components were checked.
    pub checked: usize,
    /// How many could not be.
    pub unknown: usize,
    /// Advisories in the source that could not be read (a broken entry, an id the API gave
    /// that is not an OSV id): the components they name may be affected.
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable_advisories: usize,
    /// Why the check cannot be complete even where components were checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Scan `roots` for `target` (the name the report shows).
pub fn scan(target: &str, roots: &[Root], source: &OsvSource) -> ScanReport {
    let begun = Instant::now();
    budget::reset();
    let mut inv = inventory::Inventory::default();
    let mut findings = Vec::new();
    let mut found = Vec::new();
    let mut all_sinks = Vec::new();
    for root in roots {
        // The readers see paths relative to their own root (includes resolve against it);
        // the label is added to what they report.
        let files = inventory::walk(&root.path);
        let label = |s: &mut String| s.insert_str(0, &root.label);
        let mut one = inventory::inventory(&files);
        for c in &mut one.components {
            c.found_in.iter_mut().for_each(label);
        }
        for (file, _) in &mut one.unreadable {
            label(file);
        }
        found.append(&mut one.components);
        inv.unreadable.append(&mut one.unreadable);
        inv.truncated |= one.truncated;
        let (hints, hints_truncated) = capabilities::source::hints(&root.path);
        inv.truncated |= hints_truncated;
        let (mut found_sinks, sinks_truncated) = sinks::find(&root.path);
        inv.truncated |= sinks_truncated;
        for s in &mut found_sinks {
            label(&mut s.file);
            findings.push(s.finding());
        }
        all_sinks.append(&mut found_sinks);
        for mut f in capabilities::capabilities(&files).into_iter().chain(hints) {
            if let Some(l) = &mut f.location {
                label(&mut l.file);
            }
            findings.push(f);
        }
    }
    inv.truncated |= budget::spent();
    inv.components = inventory::merge(found);
    mark_roots(&mut inv.components);
    findings.extend(typosquats(&inv.components, roots));
    let (vulns, statuses, mut check) = vulnerabilities(&inv.components, source);
    // What the inventory could not read may hold components: never "complete" then.
    if inv.truncated || !inv.unreadable.is_empty() {
        check.incomplete = Some(if inv.truncated {
            "the inventory stopped at a limit (files, depth or bytes read): components may be missing".into()
        } else {
            format!(
                "{} file(s) could not be read: their components are missing",
                inv.unreadable.len()
            )
        });
        check.status = match check.status {
            "complete" => "partial",
            "none" => "unknown",
            other => other,
        };
    }
    for c in &mut inv.components {
        c.osv = statuses.get(&c.purl).cloned();
    }
    for v in &vulns {
        findings.push(vulnerability_finding(v, &inv.components));
    }
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(&b.rule)));
    ScanReport {
        schema: "warden.scan/v1",
        target: target.to_owned(),
        warden_version: env!("CARGO_PKG_VERSION"),
        duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
        components: inv.components,
        vulnerabilities: vulns,
        vulnerability_check: check,
        findings,
        unreadable: inv
            .unreadable
            .into_iter()
            .map(|(file, why)| report::Unreadable { file, why })
            .collect(),
        truncated: inv.truncated,
        notes: Vec::new(),
        sinks: all_sinks,
    }
}

/// Installed components nobody else depends on are the roots of their tree: direct.
fn mark_roots(components: &mut [Component]) {
    let needed: BTreeSet<(Ecosystem, String)> = components
        .iter()
        .flat_map(|c| {
            c.depends_on
                .iter()
                .map(|d| (c.ecosystem, c.ecosystem.normal(d)))
        })
        .collect();
    for c in components.iter_mut() {
        if c.evidence == Evidence::Installed && !needed.contains(&(c.ecosystem, c.name.clone())) {
            c.direct = true;
        }
    }
}

/// The project's own names and its components' names, against the popular list.
fn typosquats(components: &[Component], roots: &[Root]) -> Vec<Finding> {
    let mut names: Vec<(Ecosystem, String, String)> = components
        .iter()
        .map(|c| {
            let file = c.found_in.first().cloned().unwrap_or_default();
            (c.ecosystem, c.name.clone(), file)
        })
        .collect();
    for root in roots {
        names.extend(own_names(root));
    }
    let mut seen = BTreeSet::new();
    names
        .into_iter()
        .filter_map(|(eco, name, file)| {
            let popular = typosquat::imitates(eco, &name)?;
            seen.insert(name.clone())
                .then(|| typosquat::finding(&name, popular, &file))
        })
        .collect()
}

/// The names the project's own manifests give it.
fn own_names(root: &Root) -> Vec<(Ecosystem, String, String)> {
    let mut out = Vec::new();
    let pj = root.path.join("package.json");
    if let Some(name) = read_bounded(&pj, inventory::MAX_FILE)
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
    {
        out.push((Ecosystem::Npm, name, format!("{}package.json", root.label)));
    }
    let pp = root.path.join("pyproject.toml");
    if let Some(name) = read_bounded(&pp, inventory::MAX_FILE)
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
        .and_then(|t| {
            let project = t.get("project").and_then(|p| p.get("name"));
            let poetry = t
                .get("tool")
                .and_then(|x| x.get("poetry"))
                .and_then(|p| p.get("name"));
            project
                .or(poetry)
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        })
    {
        out.push((
            Ecosystem::PyPI,
            name,
            format!("{}pyproject.toml", root.label),
        ));
    }
    out
}

type Vulns = (Vec<osv::Vulnerability>, BTreeMap<String, OsvStatus>, Check);

/// Check every pinned component against `source`.
fn vulnerabilities(components: &[Component], source: &OsvSource) -> Vulns {
    let mut statuses = BTreeMap::new();
    let pinned: Vec<&Component> = components.iter().filter(|c| c.version.is_some()).collect();
    for c in components.iter().filter(|c| c.version.is_none()) {
        statuses.insert(
            c.purl.clone(),
            OsvStatus::Unknown {
                why: format!(
                    "no exact version (declared {})",
                    c.requirement.as_deref().unwrap_or("without one")
                ),
            },
        );
    }
    let unknown_all = |why: String, statuses: &mut BTreeMap<String, OsvStatus>| {
        for c in &pinned {
            statuses.insert(c.purl.clone(), OsvStatus::Unknown { why: why.clone() });
        }
    };
    let mut found = Vec::new();
    let mut unreadable_advisories = 0;
    let described = match source {
        OsvSource::None => {
            unknown_all(
                "no vulnerability source (give --osv-db DIR or --osv-url URL)".into(),
                &mut statuses,
            );
            "none configured".to_owned()
        }
        OsvSource::Offline(dir) => {
            let mut wanted: BTreeMap<Ecosystem, BTreeSet<String>> = BTreeMap::new();
            for c in &pinned {
                wanted
                    .entry(c.ecosystem)
                    .or_default()
                    .insert(c.name.clone());
            }
            match osv::db::load(dir, &wanted) {
                Err(e) => unknown_all(format!("offline database: {e}"), &mut statuses),
                Ok(db) => {
                    unreadable_advisories += db.skipped;
                    for c in &pinned {
                        if db.missing.contains(&c.ecosystem) {
                            statuses.insert(
                                c.purl.clone(),
                                OsvStatus::Unknown {
                                    why: format!(
                                        "the offline database has no {} data",
                                        c.ecosystem.osv_name()
                                    ),
                                },
                            );
                            continue;
                        }
                        let list = db
                            .by_package
                            .get(&(c.ecosystem, c.name.clone()))
                            .map(Vec::as_slice)
                            .unwrap_or_default();
                        judge(c, list.iter(), &mut found, &mut statuses);
                    }
                }
            }
            format!("offline: {}", dir.display())
        }
        OsvSource::Online(url) => {
            match osv::api::query(url, &pinned) {
                Err(e) => unknown_all(format!("OSV API: {e}"), &mut statuses),
                Ok(answer) => {
                    unreadable_advisories += answer.skipped;
                    for c in &pinned {
                        let list = answer
                            .by_package
                            .get(&(c.ecosystem, c.name.clone()))
                            .map(Vec::as_slice)
                            .unwrap_or_default();
                        judge(c, list.iter(), &mut found, &mut statuses);
                    }
                }
            }
            format!("api: {}", report::shown_url(url))
        }
    };
    let checked = statuses
        .values()
        .filter(|s| matches!(s, OsvStatus::Checked))
        .count();
    let unknown = statuses.len() - checked;
    let status = match (checked, unknown) {
        (0, 0) => "none",
        (_, 0) if unreadable_advisories == 0 => "complete",
        (0, _) => "unknown",
        _ => "partial",
    };
    found.sort_by(|a, b| {
        b.rating
            .severity
            .cmp(&a.rating.severity)
            .then(a.component.cmp(&b.component))
            .then(a.id.cmp(&b.id))
    });
    let check = Check {
        status,
        source: described,
        checked,
        unknown,
        unreadable_advisories,
        incomplete: (unreadable_advisories > 0)
            .then(|| format!("{unreadable_advisories} advisories in the source could not be read")),
    };
    (found, statuses, check)
}

fn judge<'a>(
    c: &Component,
    advisories: impl IntoIterator<Item = &'a osv::Advisory>,
    found: &mut Vec<osv::Vulnerability>,
    statuses: &mut BTreeMap<String, OsvStatus>,
) {
    let status = match osv::evaluate(c, advisories) {
        Ok(mut e) => {
            found.append(&mut e.found);
            if e.unordered.is_empty() {
                OsvStatus::Checked
            } else {
                OsvStatus::Unknown {
                    why: format!(
                        "version {} cannot be ordered against {}",
                        c.version.as_deref().unwrap_or("?"),
                        e.unordered.join(", ")
                    ),
                }
            }
        }
        Err(why) => OsvStatus::Unknown { why },
    };
    statuses.insert(c.purl.clone(), status);
}

fn vulnerability_finding(v: &osv::Vulnerability, components: &[Component]) -> Finding {
    let c = components.iter().find(|c| c.purl == v.component);
    let name = c.map_or(v.component.as_str(), |c| c.name.as_str());
    let aliases = if v.aliases.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.aliases.join(", "))
    };
    let fixed = match &v.fixed {
        Some(f) => format!("; fixed in {f}"),
        None => "; no fixed version is known".into(),
    };
    let dev = if c.is_some_and(|c| c.dev) {
        " (a development dependency)"
    } else {
        ""
    };
    Finding {
        category: Category::VulnerableDependency,
        rule: v.id.clone(),
        severity: v.rating.severity,
        message: report::clip(
            &format!(
                "{name} {} has {}{aliases}: {}{fixed}{dev}",
                v.version, v.id, v.summary
            ),
            600,
        ),
        recommendation: match &v.fixed {
            Some(f) => format!("Upgrade {name} to {f} or later."),
            None => format!(
                "No release of {name} fixes this yet: remove it, or check the advisory for a workaround."
            ),
        },
        tool: None,
        tools: Vec::new(),
        evidence: Vec::new(),
        llm_only: false,
        basis: None,
        capped: None,
        location: Some(Location {
            file: c
                .and_then(|c| c.found_in.first().cloned())
                .unwrap_or_default(),
            component: Some(v.component.clone()),
        }),
    }
}

/// The whole of `path` if it is a regular file (not a link) of at most `max` bytes: read as the
/// scan reads its files, for a caller that copies one file to be scanned alone.
pub fn read_file(path: &Path, max: u64) -> Option<Vec<u8>> {
    read_bounded(path, max)
}

/// The whole file if it is a regular file (not a link) of at most `max` bytes and the scan's
/// [`budget`] still covers it. The file is opened without following a link in its last
/// component and without blocking (a FIFO), and judged by its own descriptor: no window
/// between a check by name and the open (a file swapped for a link in between is refused).
pub(crate) fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > max || !budget::charge(meta.len()) {
        return None;
    }
    let mut out = Vec::new();
    file.take(max + 1).read_to_end(&mut out).ok()?;
    (out.len() as u64 <= max).then_some(out)
}

#[cfg(test)]
mod read_tests {
    use super::*;

    /// Issue #31: `read_bounded` checked for a link by name and then opened by name, so a file
    /// swapped for a link in between was followed. The open itself refuses a link, and what
    /// was opened is judged by its descriptor.
    #[test]
    fn a_link_is_never_read_and_a_fifo_never_blocks() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("real"), "x==1\n").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
        assert_eq!(
            read_bounded(&tmp.path().join("real"), 100).as_deref(),
            Some(&b"x==1\n"[..])
        );
        assert_eq!(read_bounded(&tmp.path().join("link"), 100), None);
        let fifo = tmp.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert_eq!(read_bounded(&fifo, 100), None);
        assert_eq!(
            read_bounded(&tmp.path().join("real"), 2),
            None,
            "over the cap"
        );
    }
}
