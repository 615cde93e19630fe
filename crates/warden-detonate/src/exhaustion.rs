//! Exhaustion, provoked: boundary values and sizes for a tool's parameters (numbers of a
//! thousand million and 2^31, -1 and 0; a string that makes a backtracking regular expression
//! run for ever and one of 256 KiB; a list of 100,000 items), and the judgement of what a call
//! cost. A call *burned* when it ran to the call timeout with the server's processes on the CPU
//! for at least a quarter of that time (a tool waiting on an unreachable network uses almost
//! none; a quarter, not a half, so that a spinning server still counts on a host whose cores
//! are shared with other work);
//! a payload *exhausted* the host when its call hit a sandbox limit (memory, processes, CPU
//! time) or burned, where the same tool's benign call had answered. Only a small payload (a
//! number, the ReDoS string: at most [`SMALL`] bytes) proves a consequence: an effect out of
//! all proportion to what the caller sent. A large one that exhausts the host may be work in
//! proportion to its size, as honest tools do (`resource-heavy-input`, a shape).
//!
//! Guarantees: payloads are bounded (the largest is about 600 KB of JSON), and they go last in
//! a session (a limit ends the run, and what was still to be called would be lost). A call's
//! CPU time comes from the run's cgroup, read when its window opens and closes; where no cgroup
//! counts it (rlimits only), no call is judged to have burned.

use serde_json::{Value, json};
use warden_events::{Event, EventKind};

use crate::payloads::{Kind, Payload};

/// Fraction of a timed-out call's wall time the server spent on the CPU for the call to count
/// as burned, in percent.
pub const BURN_PERCENT: u64 = 25;

/// Items in the long list.
const LONG_LIST: usize = 100_000;

/// Bytes of the long string.
const LONG_STRING: usize = 256 * 1024;

fn payload(value: Value) -> Payload {
    Payload {
        kind: Kind::Exhaustion,
        value: value.to_string(),
    }
}

/// The exhaustion payloads for a parameter whose schema is `schema` (its first type), the
/// benign value being `benign`.
pub fn for_param(schema: &Value, benign: &Value) -> Vec<Payload> {
    let ty = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or(""),
        _ => "",
    };
    match ty {
        "integer" | "number" => [
            json!(1_000_000_000u64),
            json!(2_147_483_648u64),
            json!(-1),
            json!(0),
        ]
        .into_iter()
        .map(payload)
        .collect(),
        "string" if schema.get("enum").is_none() && schema.get("const").is_none() => vec![
            // `(a+)+$`, `(a|aa)*$` and their kind backtrack for 2^n steps on this.
            payload(json!(format!("{}!", "a".repeat(48)))),
            payload(json!("A".repeat(LONG_STRING))),
        ],
        "array" => {
            let item = benign
                .as_array()
                .and_then(|a| a.first())
                .cloned()
                .unwrap_or(json!(1));
            vec![payload(Value::Array(vec![item; LONG_LIST]))]
        }
        _ => Vec::new(),
    }
}

/// The top-level parameters of a tool's `schema` with exhaustion payloads, each with its
/// payloads, given the tool's benign arguments.
pub fn plan(schema: &Value, benign: &serde_json::Map<String, Value>) -> Vec<(String, Payload)> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .take(32)
        .flat_map(|(name, s)| {
            let b = benign.get(name).cloned().unwrap_or(Value::Null);
            for_param(s, &b).into_iter().map(move |p| (name.clone(), p))
        })
        .collect()
}

/// Payloads of at most this many bytes (JSON text) exhaust by amplification: a number, the
/// ReDoS string. A larger one (256 KiB, 100,000 items) may only cost work in proportion to its
/// size, which honest tools do too (a file server reading 100,000 paths).
pub const SMALL: usize = 1024;

/// Whether a payload of `bytes` is small (see [`SMALL`]).
pub fn small(bytes: usize) -> bool {
    bytes <= SMALL
}

/// Whether a call that ran `ms` of wall time and timed out, its server using `cpu_ms` of CPU
/// meanwhile, burned.
pub fn burned(timed_out: bool, ms: u64, cpu_ms: Option<u64>) -> bool {
    timed_out && cpu_ms.is_some_and(|c| ms > 0 && c.saturating_mul(100) >= ms * BURN_PERCENT)
}

/// The evidence that an exhaustion payload's call exhausted the host: a limit hit among
/// `events` (the call's window, and what the sandbox recorded just after it), or the call
/// burned.
pub fn judge(events: &[&Event], burned: bool, ms: u64, cpu_ms: Option<u64>) -> Option<String> {
    if let Some(e) = events.iter().find(|e| e.kind == EventKind::SandboxLimitHit) {
        return Some(format!(
            "event {}: the call hit the sandbox's {} limit",
            e.id,
            e.data["limit"].as_str().unwrap_or("a")
        ));
    }
    burned.then(|| {
        format!(
            "the call ran to its {ms} ms timeout with the server on the CPU for {} ms of it",
            cpu_ms.unwrap_or(0)
        )
    })
}

/// Mark each sandbox limit hit in the window of an exhaustion payload's call (the call that
/// killed the server gets no answer, and the harness records nothing after the run is over)
/// with what provoked it: `data.exhaustion`, `tool`, `param`, `payload` (as the call's
/// recorded arguments show it) and `evidence`.
pub fn mark_limits(events: &mut [Event]) {
    let calls: std::collections::HashMap<String, Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::McpToolCall && e.data["kind"] == "exhaustion")
        .map(|e| (format!("tool_call:{}", e.id), e.data.clone()))
        .collect();
    for e in events.iter_mut() {
        if e.kind != EventKind::SandboxLimitHit {
            continue;
        }
        let Some(call) = e.triggered_by.as_deref().and_then(|w| calls.get(w)) else {
            continue;
        };
        let param = call["param"].as_str().unwrap_or("");
        let shown = call["arguments"]
            .get(param)
            .map(|v| crate::payloads::shown(&v.to_string()))
            .unwrap_or_else(|| "a boundary value".to_owned());
        let limit = e.data["limit"].as_str().unwrap_or("a").to_owned();
        let small = call["payload_bytes"]
            .as_u64()
            .and_then(|b| usize::try_from(b).ok())
            .is_some_and(small);
        if let Some(d) = e.data.as_object_mut() {
            d.insert("exhaustion".into(), json!(true));
            d.insert("small".into(), json!(small));
            d.insert("tool".into(), call["tool"].clone());
            d.insert("param".into(), json!(param));
            d.insert("payload".into(), json!(shown));
            d.insert(
                "evidence".into(),
                json!(format!("the call hit the sandbox's {limit} limit")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_by_type_and_bounded() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "text": {"type": "string"},
                "mode": {"type": "string", "enum": ["a"]},
                "items": {"type": "array", "items": {"type": "string"}},
                "flag": {"type": "boolean"}
            }
        });
        let benign = json!({"items": ["x"]});
        let plan = plan(&schema, benign.as_object().unwrap());
        let of = |p: &str| plan.iter().filter(|(n, _)| n == p).count();
        assert_eq!(of("n"), 4);
        assert_eq!(of("text"), 2);
        assert_eq!(of("mode"), 0);
        assert_eq!(of("items"), 1);
        assert_eq!(of("flag"), 0);
        let n: Vec<Value> = plan
            .iter()
            .filter(|(n, _)| n == "n")
            .map(|(_, p)| p.argument())
            .collect();
        assert_eq!(n[0], json!(1_000_000_000u64), "a number, not its text");
        let list = plan
            .iter()
            .find(|(n, _)| n == "items")
            .unwrap()
            .1
            .argument();
        assert_eq!(list.as_array().unwrap().len(), LONG_LIST);
        assert_eq!(list[0], "x", "items like the benign one");
        assert!(plan.iter().all(|(_, p)| p.value.len() < 700_000));
    }

    #[test]
    fn a_burn_needs_the_timeout_and_a_quarter_of_a_core() {
        assert!(burned(true, 10_000, Some(9_000)));
        assert!(burned(true, 10_000, Some(2_500)));
        assert!(!burned(true, 10_000, Some(2_400)));
        assert!(!burned(true, 10_000, Some(200)), "waiting on the network");
        assert!(!burned(false, 10_000, Some(9_000)), "it answered");
        assert!(!burned(true, 10_000, None), "no cgroup counts it");
        let limit = Event {
            id: 9,
            t_ms: 0,
            kind: EventKind::SandboxLimitHit,
            pid: None,
            triggered_by: Some("tool_call:8".into()),
            data: json!({"limit": "memory"}),
        };
        assert!(
            judge(&[&limit], false, 30, None)
                .unwrap()
                .contains("memory")
        );
        assert!(
            judge(&[], true, 10_000, Some(9_000))
                .unwrap()
                .contains("9000 ms")
        );
        assert!(judge(&[], false, 10_000, Some(9_000)).is_none());
    }

    #[test]
    fn a_limit_in_an_exhaustion_calls_window_names_it() {
        let ev = crate::test_event;
        let mut events = vec![
            ev(
                3,
                EventKind::McpToolCall,
                None,
                json!({"tool": "resize", "kind": "exhaustion", "param": "mb", "arguments": {"mb": 1_000_000_000u64}, "payload_bytes": 10}),
            ),
            ev(
                4,
                EventKind::SandboxLimitHit,
                Some("tool_call:3"),
                json!({"limit": "memory"}),
            ),
            ev(
                5,
                EventKind::McpToolCall,
                None,
                json!({"tool": "x", "kind": "benign"}),
            ),
            ev(
                6,
                EventKind::SandboxLimitHit,
                Some("tool_call:5"),
                json!({"limit": "pids"}),
            ),
        ];
        mark_limits(&mut events);
        assert_eq!(events[1].data["exhaustion"], true);
        assert_eq!(events[1].data["tool"], "resize");
        assert_eq!(events[1].data["payload"], "1000000000");
        assert_eq!(events[1].data["small"], true);
        assert!(
            events[3].data.get("exhaustion").is_none(),
            "a benign call's limit"
        );
    }
}
