//! What a sweep found, over every outcome in `results.jsonl`: verdict counts, the INCONCLUSIVE
//! runs and the errors counted apart with why each happened, the most frequent findings across
//! servers, and the time they took. Written as `summary.json` (`warden.sweep/v1`), printed as a
//! table, and drawn as `index.html` ([`crate::index`]).
//!
//! The summary depends only on the outcomes, never on how they were split into shards or runs:
//! a merged sweep's summary equals a single run's, apart from `timing`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::results::Outcome;

/// The verdicts, most severe last (the table's order).
pub const VERDICTS: [&str; 7] = [
    "PASS",
    "LOW",
    "MEDIUM",
    "HIGH",
    "CRITICAL",
    "INCONCLUSIVE",
    "ERROR",
];

/// The sweep's summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `warden.sweep/v1`.
    pub schema: &'static str,
    /// Targets with an outcome.
    pub targets: usize,
    /// How many of each verdict (`ERROR`: no report came out).
    pub verdicts: BTreeMap<String, usize>,
    /// Each INCONCLUSIVE run and why (servers that need credentials or crash are common).
    pub inconclusive: Vec<Value>,
    /// Each target without a report and why.
    pub errors: Vec<Value>,
    /// Rules by the number of servers they fired on, most first (at most 20).
    pub top_findings: Vec<Value>,
    /// Categories by the number of servers, most first.
    pub categories: Vec<Value>,
    /// What it cost (differs from run to run, unlike the rest): summed per-target durations,
    /// this run's wall time, servers per hour, the median and largest sandbox memory peak.
    pub timing: Value,
}

/// Summarise `outcomes` (one per target); `wall_ms` is the run's wall time, if known.
pub fn summarise(outcomes: &BTreeMap<String, Outcome>, wall_ms: Option<u64>) -> Summary {
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    let mut rules: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cats: BTreeMap<&str, usize> = BTreeMap::new();
    let mut inconclusive = Vec::new();
    let mut errors = Vec::new();
    let mut total_ms = 0u64;
    for o in outcomes.values() {
        *verdicts.entry(o.verdict.clone()).or_default() += 1;
        total_ms = total_ms.saturating_add(o.duration_ms);
        for r in &o.rules {
            *rules.entry(r).or_default() += 1;
        }
        for c in &o.categories {
            *cats.entry(c).or_default() += 1;
        }
        if o.verdict == "INCONCLUSIVE" {
            inconclusive.push(json!({ "target": o.target, "why": o.why }));
        }
        if let Some(e) = &o.error {
            errors.push(json!({ "target": o.target, "error": e }));
        }
    }
    let ranked = |m: BTreeMap<&str, usize>, key: &str, n: usize| -> Vec<Value> {
        let mut v: Vec<(&str, usize)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.into_iter()
            .take(n)
            .map(|(k, c)| json!({ key: k, "servers": c }))
            .collect()
    };
    let hours = wall_ms.map(|w| w as f64 / 3_600_000.0);
    let mut peaks: Vec<u64> = outcomes
        .values()
        .filter_map(|o| o.peak_memory_bytes)
        .collect();
    peaks.sort_unstable();
    Summary {
        schema: "warden.sweep/v1",
        targets: outcomes.len(),
        verdicts,
        inconclusive,
        errors,
        top_findings: ranked(rules, "rule", 20),
        categories: ranked(cats, "category", 50),
        timing: json!({
            "target_ms_total": total_ms,
            "wall_ms": wall_ms,
            "servers_per_hour": hours.filter(|h| *h > 0.0).map(|h| (outcomes.len() as f64 / h).round()),
            "peak_memory_bytes_median": peaks.get(peaks.len() / 2),
            "peak_memory_bytes_max": peaks.last(),
        }),
    }
}

impl Summary {
    /// The table printed at the end of a sweep.
    pub fn table(&self) -> String {
        let mut out = format!("warden sweep: {} targets\n", self.targets);
        for v in VERDICTS {
            if let Some(n) = self.verdicts.get(v) {
                out.push_str(&format!("  {v:<13} {n:>6}\n"));
            }
        }
        if !self.inconclusive.is_empty() {
            out.push_str("  inconclusive, and why:\n");
            for i in self.inconclusive.iter().take(20) {
                out.push_str(&format!(
                    "    {}  {}\n",
                    crate::clip(i["target"].as_str().unwrap_or(""), 60),
                    crate::clip(i["why"].as_str().unwrap_or(""), 120)
                ));
            }
        }
        if !self.errors.is_empty() {
            out.push_str("  errors:\n");
            for e in self.errors.iter().take(20) {
                out.push_str(&format!(
                    "    {}  {}\n",
                    crate::clip(e["target"].as_str().unwrap_or(""), 60),
                    crate::clip(e["error"].as_str().unwrap_or(""), 120)
                ));
            }
        }
        if !self.top_findings.is_empty() {
            out.push_str("  most frequent findings (servers):\n");
            for f in self.top_findings.iter().take(10) {
                out.push_str(&format!(
                    "    {:>5}  {}\n",
                    f["servers"],
                    crate::clip(f["rule"].as_str().unwrap_or(""), 60)
                ));
            }
        }
        if let Some(per_hour) = self.timing["servers_per_hour"].as_f64() {
            out.push_str(&format!("  {per_hour} servers per hour\n"));
        }
        out
    }
}
