//! The static phase aims the payloads: a tool whose handler reaches a dangerous sink
//! ([`warden_scan::sinks`]) gets the payloads of that sink's family first — right after its
//! benign call, before its other payloads and before the second pass where the code payloads
//! of every other tool go — and a payload that works names the sink it confirmed.
//!
//! Guarantees: aiming only reorders and adds nothing: a tool gets the same payloads with or
//! without a sink. A sink of a dispatcher whose branch could not be told (`*`) is taken to be
//! reachable from every tool for aiming, and is never named as the sink a payload confirmed.

use warden_scan::sinks::{Family, Sink};

use crate::payloads::{self, Kind, Payload};

/// Whether `payload` is of the family that proves a sink of `family`.
pub fn proves(family: Family, payload: &Payload) -> bool {
    match family {
        Family::Evaluator | Family::Template | Family::Deserializer => {
            payloads::family(payload) == Some(family.name())
        }
        Family::Shell => payload.kind == Kind::CommandInjection,
        Family::Fetch => payload.kind == Kind::Ssrf,
    }
}

/// Whether `payload` is aimed at a sink of `tool`: its own, or a dispatcher's whose branch
/// could not be told (`*`, taken to be reachable from every tool).
pub fn aimed(sinks: &[Sink], tool: &str, payload: &Payload) -> bool {
    sinks
        .iter()
        .filter(|s| s.tool == tool || s.tool == "*")
        .any(|s| proves(s.family, payload))
}

/// The sink of `tool` that `payload`, if it works, confirms: one of the tool's own (a
/// dispatcher's `*` sink aims the payload but is never named as confirmed: the tool may not
/// reach it).
pub fn sink_for<'a>(sinks: &'a [Sink], tool: &str, payload: &Payload) -> Option<&'a Sink> {
    sinks
        .iter()
        .filter(|s| s.tool == tool)
        .find(|s| proves(s.family, payload))
}

/// How a finding shows a sink: `file:line call`.
pub fn shown(sink: &Sink) -> String {
    format!("{}:{} {}", sink.file, sink.line, sink.call)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(tool: &str, family: Family) -> Sink {
        Sink {
            tool: tool.into(),
            family,
            call: "eval(x)".into(),
            file: "s.py".into(),
            line: 3,
        }
    }

    #[test]
    fn a_payload_is_aimed_at_its_familys_sink() {
        let all = payloads::for_param("abc123");
        let sinks = [sink("calc", Family::Evaluator), sink("*", Family::Shell)];
        let evaluator = all
            .iter()
            .find(|p| payloads::family(p) == Some("evaluator"))
            .unwrap();
        let template = all
            .iter()
            .find(|p| payloads::family(p) == Some("template"))
            .unwrap();
        let shell = all
            .iter()
            .find(|p| p.kind == Kind::CommandInjection)
            .unwrap();
        assert_eq!(
            shown(sink_for(&sinks, "calc", evaluator).unwrap()),
            "s.py:3 eval(x)"
        );
        assert!(sink_for(&sinks, "calc", template).is_none());
        assert!(sink_for(&sinks, "other", evaluator).is_none());
        assert!(
            sink_for(&sinks, "other", shell).is_none(),
            "a dispatcher's confirms nothing"
        );
        assert!(aimed(&sinks, "other", shell), "but is aimed at");
    }
}
