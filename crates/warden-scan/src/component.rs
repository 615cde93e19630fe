//! What a project is made of: a [`Component`] is one package at one version (or, from a
//! manifest, one declared requirement whose version is not pinned), with its package URL, where
//! it was found, whether the project asked for it directly, and its declared licence.
//!
//! Names are compared in their ecosystem's normal form ([`Ecosystem::normal`]: PEP 503 for
//! PyPI, as written for npm), so `Jinja2` in a lock file and `jinja2` in an advisory are one
//! package.

use serde::{Deserialize, Serialize};

/// The package ecosystems the inventory reads (OSV's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Ecosystem {
    /// The Python Package Index.
    PyPI,
    /// The npm registry.
    #[serde(rename = "npm")]
    Npm,
}

impl Ecosystem {
    /// OSV's name for it.
    pub fn osv_name(self) -> &'static str {
        match self {
            Ecosystem::PyPI => "PyPI",
            Ecosystem::Npm => "npm",
        }
    }

    /// The package-URL type.
    pub fn purl_type(self) -> &'static str {
        match self {
            Ecosystem::PyPI => "pypi",
            Ecosystem::Npm => "npm",
        }
    }

    /// `name` in the ecosystem's normal form: PEP 503 for PyPI (lower case, runs of `-_.` as
    /// one `-`), unchanged for npm (whose names are already lower case and exact).
    pub fn normal(self, name: &str) -> String {
        match self {
            Ecosystem::Npm => name.trim().to_owned(),
            Ecosystem::PyPI => {
                let mut out = String::with_capacity(name.len());
                let mut dash = false;
                for c in name.trim().chars() {
                    if matches!(c, '-' | '_' | '.') {
                        dash = true;
                    } else {
                        if dash && !out.is_empty() {
                            out.push('-');
                        }
                        dash = false;
                        out.push(c.to_ascii_lowercase());
                    }
                }
                out
            }
        }
    }

    /// The package URL of `name` at `version` (without a version when there is none).
    pub fn purl(self, name: &str, version: Option<&str>) -> String {
        let raw = name;
        let name = self.normal(name);
        let built = match self {
            Ecosystem::Npm => match name.strip_prefix('@').and_then(|n| n.split_once('/')) {
                Some((scope, bare)) => packageurl::PackageUrl::new("npm", bare.to_owned())
                    .and_then(|mut p| {
                        p.with_namespace(format!("@{scope}"))?;
                        Ok(p)
                    }),
                None => packageurl::PackageUrl::new("npm", name.clone()),
            },
            // The purl spec's PyPI rule: lower case, `_` as `-` (dots stay).
            Ecosystem::PyPI => packageurl::PackageUrl::new(
                "pypi",
                raw.trim().to_ascii_lowercase().replace('_', "-"),
            ),
        };
        match built.and_then(|mut p| {
            if let Some(v) = version {
                p.with_version(v.to_owned())?;
            }
            Ok(p.to_string())
        }) {
            Ok(s) => s,
            // A name the purl grammar refuses (it never is, for names a registry accepts):
            // keep it readable rather than drop the component.
            Err(_) => format!(
                "pkg:{}/{name}{}",
                self.purl_type(),
                version.map(|v| format!("@{v}")).unwrap_or_default()
            ),
        }
    }
}

/// How a component became known, most precise first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// Installed: a `*.dist-info`, a wheel, a `node_modules/**/package.json`.
    Installed,
    /// A lock file or a pinned requirements file.
    Lock,
    /// A manifest (`package.json`, `pyproject.toml`, `setup.cfg`, `requirements.in`).
    Manifest,
}

/// Whether the components' vulnerabilities could be checked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OsvStatus {
    /// Checked against the source.
    Checked,
    /// Not checked, and why (no source, an unreachable API, no exact version…).
    Unknown {
        /// Why.
        why: String,
    },
}

/// One package of the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// Its ecosystem.
    pub ecosystem: Ecosystem,
    /// Its name, as its ecosystem writes it (normal form: see [`Ecosystem::normal`]).
    pub name: String,
    /// The exact version, when one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The declared requirement when no exact version is known (`>=0.27`, `^1.2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement: Option<String>,
    /// Its package URL.
    pub purl: String,
    /// How it became known (the most precise of its sources).
    pub evidence: Evidence,
    /// The files it was found in, relative to the scanned folder.
    pub found_in: Vec<String>,
    /// The project asked for it itself (not only something it depends on).
    pub direct: bool,
    /// Only a development dependency (not installed with the package).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dev: bool,
    /// Its declared licence (an SPDX expression or the text it declares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// The names (normal form) of the components it depends on, where the source says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Whether its known vulnerabilities could be checked (set by the scan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub osv: Option<OsvStatus>,
}

impl Component {
    /// A component at an exact `version`.
    pub fn pinned(
        ecosystem: Ecosystem,
        name: &str,
        version: &str,
        evidence: Evidence,
        file: &str,
    ) -> Self {
        let version = version.trim().trim_start_matches("==").trim();
        Component {
            ecosystem,
            name: ecosystem.normal(name),
            version: Some(version.to_owned()),
            requirement: None,
            purl: ecosystem.purl(name, Some(version)),
            evidence,
            found_in: vec![file.to_owned()],
            direct: false,
            dev: false,
            license: None,
            depends_on: Vec::new(),
            osv: None,
        }
    }

    /// A declared requirement without an exact version.
    pub fn unpinned(ecosystem: Ecosystem, name: &str, requirement: &str, file: &str) -> Self {
        Component {
            ecosystem,
            name: ecosystem.normal(name),
            version: None,
            requirement: Some(requirement.trim().to_owned()),
            purl: ecosystem.purl(name, None),
            evidence: Evidence::Manifest,
            found_in: vec![file.to_owned()],
            direct: true,
            dev: false,
            license: None,
            depends_on: Vec::new(),
            osv: None,
        }
    }

    /// The CycloneDX `bom-ref`: the purl, which is unique per name and version.
    pub fn bom_ref(&self) -> &str {
        &self.purl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_in_normal_form() {
        assert_eq!(Ecosystem::PyPI.normal("Jinja2"), "jinja2");
        assert_eq!(Ecosystem::PyPI.normal("zope.interface"), "zope-interface");
        assert_eq!(
            Ecosystem::PyPI.normal("typing__extensions"),
            "typing-extensions"
        );
        assert_eq!(Ecosystem::Npm.normal("@scope/Name"), "@scope/Name");
    }

    #[test]
    fn purls_follow_the_spec() {
        assert_eq!(
            Ecosystem::PyPI.purl("Typing_Extensions", Some("4.12.2")),
            "pkg:pypi/typing-extensions@4.12.2"
        );
        assert_eq!(
            Ecosystem::Npm.purl("@modelcontextprotocol/sdk", Some("1.0.0")),
            "pkg:npm/%40modelcontextprotocol/sdk@1.0.0"
        );
        assert_eq!(Ecosystem::Npm.purl("minimist", None), "pkg:npm/minimist");
        assert_eq!(
            Ecosystem::PyPI.purl("zope.Interface", Some("6.0")),
            "pkg:pypi/zope.interface@6.0"
        );
    }
}
