//! Per-tool call counts, errors, durations (p50/p95 over the last 1000 calls) and limits hit,
//! for `sandbox_metrics` and `warden://status`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Value, json};

/// Durations kept per tool for the percentiles.
const WINDOW: usize = 1000;

#[derive(Debug, Default)]
struct ToolStats {
    calls: u64,
    errors: u64,
    durations_ms: VecDeque<u64>,
}

/// Metrics of the server.
#[derive(Debug, Default)]
pub struct Metrics {
    tools: Mutex<BTreeMap<String, ToolStats>>,
    limits: Mutex<BTreeMap<String, u64>>,
}

fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) * p).div_ceil(100);
    sorted[i.min(sorted.len() - 1)]
}

impl Metrics {
    /// Record one call.
    pub fn record(&self, tool: &str, ok: bool, duration_ms: u64, limit_hit: Option<&str>) {
        if let Ok(mut tools) = self.tools.lock() {
            let s = tools.entry(tool.to_owned()).or_default();
            s.calls += 1;
            s.errors += u64::from(!ok);
            if s.durations_ms.len() == WINDOW {
                s.durations_ms.pop_front();
            }
            s.durations_ms.push_back(duration_ms);
        }
        const KINDS: [&str; 7] = [
            "memory",
            "pids",
            "wall_time",
            "cpu_time",
            "output",
            "file_size",
            "disk",
        ];
        let limit_hit = limit_hit.filter(|k| KINDS.contains(k));
        if let (Some(kind), Ok(mut limits)) = (limit_hit, self.limits.lock()) {
            *limits.entry(kind.to_owned()).or_default() += 1;
        }
    }

    /// Per-tool statistics and limits hit, as JSON.
    pub fn snapshot(&self) -> (Value, Value) {
        let tools = self
            .tools
            .lock()
            .map(|tools| {
                tools
                    .iter()
                    .map(|(name, s)| {
                        let mut d: Vec<u64> = s.durations_ms.iter().copied().collect();
                        d.sort_unstable();
                        let v = json!({
                            "calls": s.calls,
                            "errors": s.errors,
                            "p50_ms": percentile(&d, 50),
                            "p95_ms": percentile(&d, 95),
                        });
                        (name.clone(), v)
                    })
                    .collect::<serde_json::Map<_, _>>()
            })
            .unwrap_or_default();
        let limits = self
            .limits
            .lock()
            .map(|l| {
                l.iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect::<serde_json::Map<_, _>>()
            })
            .unwrap_or_default();
        (Value::Object(tools), Value::Object(limits))
    }
}
