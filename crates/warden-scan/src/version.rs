//! Version ordering, per ecosystem, as OSV ranges need it: PEP 440 for PyPI (`pep440_rs`:
//! dev < pre < final < post, local labels), npm's SemVer 2.0 for npm and for `SEMVER` ranges
//! (`nodejs-semver`: prereleases before their release, build metadata ignored).
//!
//! A version that does not parse in its scheme has no place in the order: callers get `None`
//! and must say the component could not be checked, never treat it as unaffected.

use std::cmp::Ordering;
use std::str::FromStr;

/// How versions are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// PEP 440.
    Pep440,
    /// SemVer 2.0 (npm's reading: a leading `v` or `=` is allowed).
    Semver,
}

/// A version parsed in its scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// PEP 440.
    Pep440(pep440_rs::Version),
    /// SemVer.
    Semver(nodejs_semver::Version),
}

impl Scheme {
    /// Parse `v`, or `None` when it is not a version of this scheme.
    pub fn parse(self, v: &str) -> Option<Parsed> {
        let v = v.trim();
        match self {
            Scheme::Pep440 => pep440_rs::Version::from_str(v).ok().map(Parsed::Pep440),
            Scheme::Semver => nodejs_semver::Version::parse(v).ok().map(Parsed::Semver),
        }
    }

    /// Compare two versions; `None` when either does not parse.
    pub fn compare(self, a: &str, b: &str) -> Option<Ordering> {
        match (self.parse(a)?, self.parse(b)?) {
            (Parsed::Pep440(a), Parsed::Pep440(b)) => Some(a.cmp(&b)),
            (Parsed::Semver(a), Parsed::Semver(b)) => Some(a.cmp(&b)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Known-good PEP 440 order (from the specification's examples).
    const PEP440: &[&str] = &[
        "1.0.dev456",
        "1.0a1",
        "1.0a2.dev456",
        "1.0a12.dev456",
        "1.0a12",
        "1.0b1.dev456",
        "1.0b2",
        "1.0b2.post345.dev456",
        "1.0b2.post345",
        "1.0rc1.dev456",
        "1.0rc1",
        "1.0",
        "1.0+abc.5",
        "1.0+abc.7",
        "1.0+5",
        "1.0.post456.dev34",
        "1.0.post456",
        "1.0.15",
        "1.1.dev1",
    ];

    /// Known-good SemVer order (from the specification, §11, plus npm's build metadata rule).
    const SEMVER: &[&str] = &[
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0-0",
        "1.1.0",
        "2.0.0",
        "10.0.0",
    ];

    fn ordered(scheme: Scheme, list: &[&str], i: usize, j: usize) {
        assert_eq!(
            scheme.compare(list[i], list[j]),
            Some(i.cmp(&j)),
            "{} vs {}",
            list[i],
            list[j]
        );
    }

    proptest! {
        #[test]
        fn pep440_matches_the_specification(i in 0..PEP440.len(), j in 0..PEP440.len()) {
            ordered(Scheme::Pep440, PEP440, i, j);
        }

        #[test]
        fn semver_matches_the_specification(i in 0..SEMVER.len(), j in 0..SEMVER.len()) {
            ordered(Scheme::Semver, SEMVER, i, j);
        }

        #[test]
        fn pep440_order_is_total_and_antisymmetric(
            a in (0u32..4, 0u32..4, prop::option::of(0u32..3), prop::option::of(0u32..3)),
            b in (0u32..4, 0u32..4, prop::option::of(0u32..3), prop::option::of(0u32..3)),
        ) {
            let show = |(x, y, pre, post): (u32, u32, Option<u32>, Option<u32>)| {
                format!(
                    "{x}.{y}{}{}",
                    pre.map(|p| format!("rc{p}")).unwrap_or_default(),
                    post.map(|p| format!(".post{p}")).unwrap_or_default()
                )
            };
            let (a, b) = (show(a), show(b));
            let ab = Scheme::Pep440.compare(&a, &b);
            let ba = Scheme::Pep440.compare(&b, &a);
            prop_assert!(ab.is_some());
            prop_assert_eq!(ab.map(Ordering::reverse), ba);
        }

        #[test]
        fn version_parsers_never_panic(a in "[0-9a-zA-Z.+!*_\\-\u{80}-\u{2000}]{0,30}", b in "[0-9.a-z\\-+]{0,12}") {
            let _ = Scheme::Pep440.compare(&a, &b);
            let _ = Scheme::Semver.compare(&a, &b);
        }

        #[test]
        fn garbage_never_orders(s in "[a-z!@# ]{1,12}") {
            prop_assert_eq!(Scheme::Semver.compare(&s, "1.0.0"), None);
        }
    }

    #[test]
    fn build_metadata_and_leading_v() {
        assert_eq!(
            Scheme::Semver.compare("v1.2.3", "1.2.3+build.5"),
            Some(Ordering::Equal)
        );
        assert_eq!(
            Scheme::Pep440.compare("1.0", "1.0.0"),
            Some(Ordering::Equal)
        );
        assert_eq!(Scheme::Pep440.compare("not a version", "1.0"), None);
    }
}
