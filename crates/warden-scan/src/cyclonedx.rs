//! CycloneDX 1.6 JSON: the components with their package URLs, licences and where they were
//! found; the dependency graph (the scanned project depends on its direct components, each
//! component on the components its source names); and the vulnerabilities section (OSV ids,
//! aliases as references, ratings with the CVSS vector, the affected component and version,
//! the fixed version as the recommendation).
//!
//! Valid against the official 1.6 schema (tested with the schema `cyclonedx-python-lib` ships).

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use warden_events::Severity;

use crate::report::ScanReport;

/// The project itself, as the graph's root.
const ROOT: &str = "warden:scanned-project";

/// The SBOM for `report`.
pub fn bom(report: &ScanReport) -> Value {
    let refs: BTreeSet<&str> = report.components.iter().map(|c| c.bom_ref()).collect();
    let components: Vec<Value> = report
        .components
        .iter()
        .map(|c| {
            let mut v = json!({
                "type": "library",
                "bom-ref": c.bom_ref(),
                "name": c.name,
                "purl": c.purl,
                "scope": if c.dev { "optional" } else { "required" },
                "properties": [
                    { "name": "warden:evidence", "value": serde_json::to_value(c.evidence).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default() },
                    { "name": "warden:direct", "value": c.direct.to_string() },
                    { "name": "warden:found_in", "value": c.found_in.join(", ") },
                ],
            });
            if let Some(version) = &c.version {
                v["version"] = json!(version);
            }
            if let (Some(r), Some(p)) = (&c.requirement, v["properties"].as_array_mut()) {
                p.push(json!({ "name": "warden:requirement", "value": r }));
            }
            if let Some(l) = &c.license {
                v["licenses"] = json!([{ "license": { "name": l } }]);
            }
            v
        })
        .collect();
    // Name → its components' refs, built once (a lookup per edge would be quadratic).
    let mut by_name: std::collections::BTreeMap<(crate::Ecosystem, &str), Vec<String>> =
        std::collections::BTreeMap::new();
    for c in &report.components {
        by_name
            .entry((c.ecosystem, c.name.as_str()))
            .or_default()
            .push(c.bom_ref().to_owned());
    }
    let lookup = |eco, name: &str| by_name.get(&(eco, name)).cloned().unwrap_or_default();
    let mut dependencies = vec![json!({
        "ref": ROOT,
        "dependsOn": report.components.iter().filter(|c| c.direct).map(|c| c.bom_ref()).collect::<Vec<_>>(),
    })];
    for c in &report.components {
        let mut on: Vec<String> = c
            .depends_on
            .iter()
            .flat_map(|d| lookup(c.ecosystem, &c.ecosystem.normal(d)))
            .filter(|r| refs.contains(r.as_str()) && r != c.bom_ref())
            .collect();
        on.sort();
        on.dedup();
        dependencies.push(json!({ "ref": c.bom_ref(), "dependsOn": on }));
    }
    let vulnerabilities: Vec<Value> = report
        .vulnerabilities
        .iter()
        .map(|v| {
            let mut rating = json!({
                "source": { "name": "OSV", "url": format!("https://osv.dev/vulnerability/{}", v.id) },
                "severity": severity(v.rating.severity),
            });
            if let Some(s) = v.rating.score {
                rating["score"] = json!(s);
            }
            if let Some(vector) = &v.rating.vector {
                rating["vector"] = json!(vector);
                rating["method"] = json!(method(vector));
            }
            let references: Vec<Value> = v
                .ids
                .iter()
                .chain(v.aliases.iter())
                .filter(|a| **a != v.id)
                .map(|a| json!({ "id": a, "source": { "name": source_of(a) } }))
                .collect();
            let mut out = json!({
                "bom-ref": format!("{}#{}", v.id, v.component),
                "id": v.id,
                "source": { "name": "OSV", "url": format!("https://osv.dev/vulnerability/{}", v.id) },
                "ratings": [rating],
                "description": v.summary,
                "affects": [{ "ref": v.component, "versions": [{ "version": v.version, "status": "affected" }] }],
            });
            if !references.is_empty() {
                out["references"] = json!(references);
            }
            if let Some(f) = &v.fixed {
                out["recommendation"] = json!(format!("Upgrade to {f} or later."));
            }
            out
        })
        .collect();
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": serial(),
        "version": 1,
        "metadata": {
            "timestamp": timestamp(),
            "tools": { "components": [{
                "type": "application",
                "name": "warden",
                "version": report.warden_version,
            }]},
            "component": { "type": "application", "bom-ref": ROOT, "name": report.target },
        },
        "components": components,
        "dependencies": dependencies,
        "vulnerabilities": vulnerabilities,
    })
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::High => "high",
        Severity::Medium => "medium",
        Severity::Low => "low",
        Severity::Info => "info",
    }
}

/// CycloneDX's name for a vector's scoring method.
fn method(vector: &str) -> &'static str {
    if vector.starts_with("CVSS:4.") {
        "CVSSv4"
    } else if vector.starts_with("CVSS:3.1") {
        "CVSSv31"
    } else if vector.starts_with("CVSS:3.") {
        "CVSSv3"
    } else {
        "other"
    }
}

fn source_of(id: &str) -> &'static str {
    if id.starts_with("CVE-") {
        "NVD"
    } else if id.starts_with("GHSA-") {
        "GitHub Advisories"
    } else {
        "OSV"
    }
}

/// A random version-4 UUID URN (uniqueness, not secrecy).
fn serial() -> String {
    let random = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        h.finish()
    };
    let (a, b) = (random(1), random(2));
    format!(
        "urn:uuid:{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        ((b >> 48) & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Now, as RFC 3339 in UTC.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let days = i64::try_from(secs / 86_400).unwrap_or_default();
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_are_uuid_urns_and_timestamps_rfc3339() {
        let s = serial();
        assert_eq!(s.len(), "urn:uuid:".len() + 36, "{s}");
        assert!(
            s[9..].chars().all(|c| c.is_ascii_hexdigit() || c == '-'),
            "{s}"
        );
        let t = timestamp();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }
}
