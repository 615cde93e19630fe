//! Known vulnerabilities from OSV data: the advisory model (the fields matching needs, from the
//! OSV schema 1.6), the evaluation of `affected[]` exactly as the schema describes it, and the
//! two sources ([`db`]: an offline folder in osv-scanner's layout; [`api`]: an OSV-compatible
//! `/v1/querybatch` endpoint).
//!
//! Guarantees: a withdrawn advisory never matches; a component whose version cannot be ordered
//! in its ecosystem's scheme is *unknown*, never clean; advisories that share an id or alias
//! about the same component are merged into one [`Vulnerability`].

pub mod api;
pub mod db;

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use warden_events::Severity;

use crate::component::{Component, Ecosystem};
use crate::version::Scheme;

/// An OSV advisory (what matching and reporting read of it).
#[derive(Debug, Clone, Deserialize)]
pub struct Advisory {
    /// Its id (`GHSA-…`, `PYSEC-…`).
    pub id: String,
    /// Other ids for the same issue (`CVE-…`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// One line.
    #[serde(default)]
    pub summary: Option<String>,
    /// When it was withdrawn, if it was.
    #[serde(default)]
    pub withdrawn: Option<String>,
    /// The packages and versions it affects.
    #[serde(default)]
    pub affected: Vec<Affected>,
    /// Severity scores (`CVSS_V3`, `CVSS_V4` vectors).
    #[serde(default)]
    pub severity: Vec<Score>,
    /// Database-specific data (GitHub's `severity`: `LOW`, `MODERATE`, `HIGH`, `CRITICAL`).
    #[serde(default)]
    pub database_specific: Option<serde_json::Value>,
}

/// One `affected[]` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct Affected {
    /// The package.
    #[serde(default)]
    pub package: Option<Package>,
    /// Version ranges.
    #[serde(default)]
    pub ranges: Vec<Range>,
    /// Explicitly affected versions.
    #[serde(default)]
    pub versions: Vec<String>,
    /// Per-package severity, when given.
    #[serde(default)]
    pub severity: Vec<Score>,
}

/// `affected[].package`.
#[derive(Debug, Clone, Deserialize)]
pub struct Package {
    /// `PyPI`, `npm` (a `:suffix` names a release of the ecosystem).
    #[serde(default)]
    pub ecosystem: String,
    /// The package's name.
    #[serde(default)]
    pub name: String,
}

/// `affected[].ranges[]`.
#[derive(Debug, Clone, Deserialize)]
pub struct Range {
    /// `ECOSYSTEM`, `SEMVER` or `GIT`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its events.
    #[serde(default)]
    pub events: Vec<RangeEvent>,
}

/// One range event; exactly one field is set.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RangeEvent {
    /// The first affected version (`0`: from the start).
    #[serde(default)]
    pub introduced: Option<String>,
    /// The first version that is not affected any more.
    #[serde(default)]
    pub fixed: Option<String>,
    /// The last affected version.
    #[serde(default)]
    pub last_affected: Option<String>,
    /// An upper limit: versions at or above every limit are outside the range.
    #[serde(default)]
    pub limit: Option<String>,
}

/// `severity[]`.
#[derive(Debug, Clone, Deserialize)]
pub struct Score {
    /// `CVSS_V3`, `CVSS_V4`…
    #[serde(rename = "type")]
    pub kind: String,
    /// The vector.
    pub score: String,
}

/// Whether one advisory affects one version, and where it is fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// Not affected.
    No,
    /// Affected; the first fixed version above it, when a range names one.
    Yes(Option<String>),
    /// The versions cannot be ordered (the component's or the advisory's).
    Unknown,
}

impl Advisory {
    /// Whether this advisory affects `name` at `version` in `eco`.
    pub fn matches(&self, eco: Ecosystem, name: &str, version: &str) -> Match {
        if self.withdrawn.is_some() {
            return Match::No;
        }
        let wanted = eco.normal(name);
        let mut verdict = Match::No;
        for a in &self.affected {
            let Some(p) = &a.package else { continue };
            let base = p.ecosystem.split(':').next().unwrap_or("");
            if base != eco.osv_name() || eco.normal(&p.name) != wanted {
                continue;
            }
            match a.affects(eco, version) {
                Match::Yes(fixed) => return Match::Yes(fixed),
                Match::Unknown => verdict = Match::Unknown,
                Match::No => {}
            }
        }
        verdict
    }

    /// The worst severity it states, with the vector it came from: CVSS vectors first, then
    /// the database's own label; `Medium` when it states none (an advisory without a score
    /// is still an advisory).
    pub fn rating(&self) -> Rating {
        let scores = self
            .severity
            .iter()
            .chain(self.affected.iter().flat_map(|a| a.severity.iter()));
        let mut best: Option<Rating> = None;
        for s in scores {
            if let Ok(cvss) = s.score.parse::<cvss::Cvss>() {
                let r = Rating {
                    severity: from_score(cvss.score()),
                    score: Some(cvss.score()),
                    vector: Some(s.score.clone()),
                    method: s.kind.clone(),
                };
                if best.as_ref().is_none_or(|b| r.score > b.score) {
                    best = Some(r);
                }
            }
        }
        if let Some(b) = best {
            return b;
        }
        let label = self
            .database_specific
            .as_ref()
            .and_then(|d| d.get("severity"))
            .and_then(|s| s.as_str())
            .unwrap_or("");
        let severity = match label.to_ascii_uppercase().as_str() {
            "CRITICAL" => Severity::Critical,
            "HIGH" => Severity::High,
            "LOW" => Severity::Low,
            _ => Severity::Medium,
        };
        Rating {
            severity,
            score: None,
            vector: None,
            method: if label.is_empty() {
                "none stated".into()
            } else {
                format!("database label {label}")
            },
        }
    }
}

impl Affected {
    fn affects(&self, eco: Ecosystem, version: &str) -> Match {
        let ecosystem_scheme = match eco {
            Ecosystem::PyPI => Scheme::Pep440,
            Ecosystem::Npm => Scheme::Semver,
        };
        let mut verdict = Match::No;
        // Explicit versions are compared as the ecosystem compares them (`1.0` is `1.0.0` in
        // PEP 440), falling back to the exact string when neither parses.
        let listed = self.versions.iter().any(|v| {
            ecosystem_scheme
                .compare(v, version)
                .map_or(v.trim() == version.trim(), |o| o == Ordering::Equal)
        });
        if listed {
            verdict = Match::Yes(None);
        }
        for r in &self.ranges {
            let scheme = match r.kind.as_str() {
                "ECOSYSTEM" => ecosystem_scheme,
                "SEMVER" => Scheme::Semver,
                // GIT ranges name commits, not releases.
                _ => continue,
            };
            match range_affects(scheme, &r.events, version) {
                Match::Yes(fixed) => return Match::Yes(fixed),
                Match::Unknown if verdict == Match::No => verdict = Match::Unknown,
                _ => {}
            }
        }
        verdict
    }
}

/// The schema's algorithm: walk the events in version order; `introduced` at or below the
/// version turns it affected, `fixed` at or below turns it back, `last_affected` below turns it
/// back. `0` is below everything.
fn range_affects(scheme: Scheme, events: &[RangeEvent], version: &str) -> Match {
    if scheme.parse(version).is_none() {
        return Match::Unknown;
    }
    // (version, kind) pairs; kind 0 introduced, 1 fixed, 2 last_affected.
    let mut evs: Vec<(&str, u8)> = Vec::new();
    for e in events {
        if let Some(v) = &e.introduced {
            evs.push((v, 0));
        } else if let Some(v) = &e.fixed {
            evs.push((v, 1));
        } else if let Some(v) = &e.last_affected {
            evs.push((v, 2));
        }
    }
    fn key(v: &str) -> Option<&str> {
        if v == "0" { None } else { Some(v) }
    }
    let limits: Vec<&str> = events.iter().filter_map(|e| e.limit.as_deref()).collect();
    if evs
        .iter()
        .map(|(v, _)| *v)
        .chain(limits.iter().copied())
        .any(|v| key(v).is_some_and(|v| scheme.parse(v).is_none()))
    {
        return Match::Unknown;
    }
    let order = |a: &str, b: &str| match (key(a), key(b)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => scheme.compare(a, b).unwrap_or(Ordering::Equal),
    };
    // The schema's BeforeLimits: with limits, only versions below one of them can match
    // (`*` is no limit).
    let below_a_limit = limits
        .iter()
        .any(|l| *l == "*" || order(version, l) == Ordering::Less);
    if !limits.is_empty() && !below_a_limit {
        return Match::No;
    }
    evs.sort_by(|a, b| order(a.0, b.0).then(a.1.cmp(&b.1)));
    let at_or_below = |v: &str| order(v, version) != Ordering::Greater;
    let mut affected = false;
    for (v, kind) in &evs {
        match kind {
            0 if at_or_below(v) => affected = true,
            1 if at_or_below(v) => affected = false,
            2 if order(v, version) == Ordering::Less => affected = false,
            _ => {}
        }
    }
    if !affected {
        return Match::No;
    }
    let fixed = evs
        .iter()
        .filter(|(v, k)| *k == 1 && order(v, version) == Ordering::Greater)
        .map(|(v, _)| (*v).to_owned())
        .next();
    Match::Yes(fixed)
}

/// CVSS's qualitative bands.
fn from_score(score: f64) -> Severity {
    if score >= 9.0 {
        Severity::Critical
    } else if score >= 7.0 {
        Severity::High
    } else if score >= 4.0 {
        Severity::Medium
    } else if score > 0.0 {
        Severity::Low
    } else {
        Severity::Info
    }
}

/// How bad an advisory says it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rating {
    /// The band.
    pub severity: Severity,
    /// The CVSS base score, when a vector was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The vector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector: Option<String>,
    /// Where the band came from (`CVSS_V3`, `database label HIGH`, `none stated`).
    pub method: String,
}

/// One known vulnerability of one component (advisories sharing ids or aliases merged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vulnerability {
    /// The id shown (a `GHSA-` id when there is one, else the first).
    pub id: String,
    /// Every advisory id merged into it.
    pub ids: Vec<String>,
    /// Their aliases (CVE, GHSA…), without the ids.
    pub aliases: Vec<String>,
    /// One line.
    pub summary: String,
    /// The worst rating of the merged advisories.
    pub rating: Rating,
    /// The component's purl.
    pub component: String,
    /// The component's version.
    pub version: String,
    /// The first fixed version above it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
}

/// What the advisories say about one component.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// The vulnerabilities that affect it, merged by shared ids and aliases.
    pub found: Vec<Vulnerability>,
    /// Advisories it could not be ordered against (its version or theirs does not parse):
    /// it may be affected by those.
    pub unordered: Vec<String>,
}

/// The advisories that affect `c`; `Err` when `c` has no exact version.
pub fn evaluate<'a>(
    c: &Component,
    advisories: impl IntoIterator<Item = &'a Advisory>,
) -> Result<Evaluated, String> {
    let Some(version) = &c.version else {
        return Err("no exact version".into());
    };
    let mut found: Vec<(&Advisory, Option<String>)> = Vec::new();
    let mut unordered = Vec::new();
    for a in advisories {
        match a.matches(c.ecosystem, &c.name, version) {
            Match::Yes(fixed) => found.push((a, fixed)),
            Match::Unknown => unordered.push(a.id.clone()),
            Match::No => {}
        }
    }
    Ok(Evaluated {
        found: merge(c, version, found),
        unordered,
    })
}

fn merge(
    c: &Component,
    version: &str,
    found: Vec<(&Advisory, Option<String>)>,
) -> Vec<Vulnerability> {
    let mut groups: Vec<Vec<(&Advisory, Option<String>)>> = Vec::new();
    for item in found {
        let names: Vec<&String> = std::iter::once(&item.0.id)
            .chain(item.0.aliases.iter())
            .collect();
        let hit = groups.iter().position(|g| {
            g.iter().any(|(a, _)| {
                std::iter::once(&a.id)
                    .chain(a.aliases.iter())
                    .any(|n| names.contains(&n))
            })
        });
        match hit {
            Some(i) => groups[i].push(item),
            None => groups.push(vec![item]),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let mut ids: Vec<String> = g.iter().map(|(a, _)| a.id.clone()).collect();
            ids.sort();
            ids.dedup();
            let mut aliases: Vec<String> = g
                .iter()
                .flat_map(|(a, _)| a.aliases.iter().cloned())
                .filter(|x| !ids.contains(x))
                .collect();
            aliases.sort();
            aliases.dedup();
            let id = ids
                .iter()
                .find(|i| i.starts_with("GHSA-"))
                .unwrap_or(&ids[0])
                .clone();
            let rating = g
                .iter()
                .map(|(a, _)| a.rating())
                .max_by(|a, b| {
                    a.severity
                        .cmp(&b.severity)
                        .then(a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal))
                })
                .unwrap_or(Rating {
                    severity: Severity::Medium,
                    score: None,
                    vector: None,
                    method: "none stated".into(),
                });
            let summary = g
                .iter()
                .find_map(|(a, _)| a.summary.clone())
                .unwrap_or_default();
            let scheme = match c.ecosystem {
                Ecosystem::PyPI => Scheme::Pep440,
                Ecosystem::Npm => Scheme::Semver,
            };
            let fixed = g
                .iter()
                .filter_map(|(_, f)| f.clone())
                // The highest: the first version every merged advisory calls fixed.
                .max_by(|a, b| scheme.compare(a, b).unwrap_or(Ordering::Equal));
            Vulnerability {
                id,
                ids,
                aliases,
                summary,
                rating,
                component: c.purl.clone(),
                version: version.to_owned(),
                fixed,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
