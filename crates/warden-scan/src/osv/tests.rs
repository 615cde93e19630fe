use super::*;
use crate::component::{Component, Evidence};

fn adv(json: &str) -> Advisory {
    serde_json::from_str(json).unwrap()
}

fn one(eco: &str, name: &str, ranges: &str) -> Advisory {
    adv(&format!(
        r#"{{"id":"T-1","affected":[{{"package":{{"ecosystem":"{eco}","name":"{name}"}},"ranges":{ranges}}}]}}"#
    ))
}

#[test]
fn two_ranges_with_their_own_fixed_versions() {
    let a = one(
        "PyPI",
        "urllib3",
        r#"[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"1.26.17"},{"introduced":"2.0.0"},{"fixed":"2.0.6"}]}]"#,
    );
    let m = |v| a.matches(Ecosystem::PyPI, "urllib3", v);
    assert_eq!(m("1.26.5"), Match::Yes(Some("1.26.17".into())));
    assert_eq!(m("1.26.17"), Match::No);
    assert_eq!(m("1.26.18"), Match::No);
    assert_eq!(m("2.0.0"), Match::Yes(Some("2.0.6".into())));
    assert_eq!(m("2.0.6"), Match::No);
    assert_eq!(m("2.2.0"), Match::No);
    assert_eq!(
        a.matches(Ecosystem::PyPI, "URLLib3", "1.0"),
        Match::Yes(Some("1.26.17".into()))
    );
    assert_eq!(
        a.matches(Ecosystem::Npm, "urllib3", "1.0.0"),
        Match::No,
        "other ecosystem"
    );
}

#[test]
fn last_affected_is_inclusive() {
    let a = one(
        "PyPI",
        "p",
        r#"[{"type":"ECOSYSTEM","events":[{"introduced":"1.0.0"},{"last_affected":"1.4.2"}]}]"#,
    );
    let m = |v| a.matches(Ecosystem::PyPI, "p", v);
    assert_eq!(m("0.9"), Match::No);
    assert_eq!(m("1.0.0"), Match::Yes(None));
    assert_eq!(m("1.4.2"), Match::Yes(None));
    assert_eq!(m("1.4.3"), Match::No);
}

#[test]
fn withdrawn_never_matches_and_versions_lists_do() {
    let w = adv(
        r#"{"id":"W","withdrawn":"2024-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"x"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}]}]}"#,
    );
    assert_eq!(w.matches(Ecosystem::Npm, "x", "1.0.0"), Match::No);
    let v = adv(
        r#"{"id":"V","affected":[{"package":{"ecosystem":"npm","name":"x"},"versions":["2.0.0","2.0.1"]}]}"#,
    );
    assert_eq!(v.matches(Ecosystem::Npm, "x", "2.0.1"), Match::Yes(None));
    assert_eq!(v.matches(Ecosystem::Npm, "x", "2.0.2"), Match::No);
}

#[test]
fn semver_prereleases_order_numerically() {
    let a = one(
        "npm",
        "s",
        r#"[{"type":"SEMVER","events":[{"introduced":"1.0.0-beta.2"},{"fixed":"1.2.0"}]}]"#,
    );
    let m = |v| a.matches(Ecosystem::Npm, "s", v);
    assert_eq!(m("1.0.0-beta.1"), Match::No);
    assert_eq!(m("1.0.0-beta.10"), Match::Yes(Some("1.2.0".into())));
    assert_eq!(m("1.2.0"), Match::No);
}

#[test]
fn unorderable_versions_are_unknown_not_clean() {
    let a = one(
        "npm",
        "s",
        r#"[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.2.0"}]}]"#,
    );
    assert_eq!(a.matches(Ecosystem::Npm, "s", "latest"), Match::Unknown);
    let c = Component::pinned(
        Ecosystem::Npm,
        "s",
        "latest",
        Evidence::Lock,
        "package-lock.json",
    );
    assert_eq!(evaluate(&c, [&a]).unwrap().unordered, ["T-1"]);
}

#[test]
fn shared_aliases_merge_and_the_ghsa_id_leads() {
    let a = adv(
        r#"{"id":"PYSEC-1","aliases":["CVE-1"],"summary":"s","affected":[{"package":{"ecosystem":"PyPI","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"2.0"}]}]}]}"#,
    );
    let b = adv(
        r#"{"id":"GHSA-x","aliases":["CVE-1"],"severity":[{"type":"CVSS_V3","score":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],"affected":[{"package":{"ecosystem":"PyPI","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"1.5"}]}]}]}"#,
    );
    let c = Component::pinned(Ecosystem::PyPI, "p", "1.0", Evidence::Lock, "r.txt");
    let v = evaluate(&c, [&a, &b]).unwrap().found;
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].id, "GHSA-x");
    assert_eq!(v[0].ids, ["GHSA-x", "PYSEC-1"]);
    assert_eq!(v[0].aliases, ["CVE-1"]);
    assert_eq!(
        v[0].fixed.as_deref(),
        Some("2.0"),
        "the version that fixes both"
    );
    assert_eq!(v[0].rating.severity, Severity::Critical);
    assert_eq!(v[0].rating.score, Some(9.8));
}

#[test]
fn severity_falls_back_to_the_database_label() {
    let a = adv(r#"{"id":"G","database_specific":{"severity":"HIGH"}}"#);
    assert_eq!(a.rating().severity, Severity::High);
    let none = adv(r#"{"id":"N"}"#);
    assert_eq!(none.rating().severity, Severity::Medium);
    assert_eq!(none.rating().method, "none stated");
}

proptest::proptest! {
    /// Disjoint `[introduced, fixed)` intervals in one range, against the obvious oracle, in
    /// both schemes (the events shuffled: their order in the file must not matter).
    #[test]
    fn ranges_agree_with_an_interval_oracle(
        mut cuts in proptest::collection::btree_set((0u32..6, 0u32..6, 0u32..6), 2..8),
        probe in (0u32..6, 0u32..6, 0u32..6),
        rotate in 0usize..8,
        npm in proptest::bool::ANY,
    ) {
        let cuts: Vec<(u32, u32, u32)> = std::mem::take(&mut cuts).into_iter().collect();
        let show = |(a, b, c): (u32, u32, u32)| format!("{a}.{b}.{c}");
        let mut events: Vec<String> = Vec::new();
        let mut intervals = Vec::new();
        for pair in cuts.chunks(2) {
            if let [i, f] = pair {
                events.push(format!(r#"{{"introduced":"{}"}}"#, show(*i)));
                events.push(format!(r#"{{"fixed":"{}"}}"#, show(*f)));
                intervals.push((*i, *f));
            }
        }
        let len = events.len();
        events.rotate_left(rotate % len);
        let (eco, kind, e) = if npm {
            ("npm", "SEMVER", Ecosystem::Npm)
        } else {
            ("PyPI", "ECOSYSTEM", Ecosystem::PyPI)
        };
        let a = one(eco, "p", &format!(r#"[{{"type":"{kind}","events":[{}]}}]"#, events.join(",")));
        let want = intervals.iter().any(|(i, f)| *i <= probe && probe < *f);
        let got = a.matches(e, "p", &show(probe));
        proptest::prop_assert_eq!(matches!(got, Match::Yes(_)), want, "{:?} {:?}", intervals, got);
        if let Match::Yes(Some(fixed)) = got {
            let f = intervals.iter().find(|(i, f)| *i <= probe && probe < *f).map(|(_, f)| show(*f));
            proptest::prop_assert_eq!(Some(fixed), f);
        }
    }
}

proptest::proptest! {
    #[test]
    fn hostile_severity_vectors_never_panic(v in "CVSS:[34]\\.[01]/[A-Z:/]{0,60}[0-9.]{0,4}") {
        let a = adv(&format!(r#"{{"id":"X","severity":[{{"type":"CVSS_V3","score":{}}}]}}"#, serde_json::Value::from(v)));
        let _ = a.rating();
    }
}

#[test]
fn limits_bound_a_range() {
    let a = one(
        "npm",
        "l",
        r#"[{"type":"SEMVER","events":[{"introduced":"0"},{"limit":"2.0.0"}]}]"#,
    );
    assert_eq!(a.matches(Ecosystem::Npm, "l", "1.9.0"), Match::Yes(None));
    assert_eq!(a.matches(Ecosystem::Npm, "l", "2.0.0"), Match::No);
    assert_eq!(a.matches(Ecosystem::Npm, "l", "3.0.0"), Match::No);
}
