//! Adversarial arguments and how each is recognised as having worked. Every payload carries a
//! per-run nonce; detection never trusts the payload text itself appearing in the output (a
//! server may simply echo its input): command injection looks for the *result* of an
//! arithmetic expansion or an exec whose argv holds the nonce, path traversal for a known file
//! signature or canary content or an open of the target, SSRF for a lookup or connection to the
//! payload's host, SQL injection for database error signatures.

use serde_json::Value;
use warden_events::{Event, EventKind};

/// Kinds of payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Shell metacharacters.
    CommandInjection,
    /// `../` chains and absolute paths.
    PathTraversal,
    /// URLs to a capture host and the cloud metadata address.
    Ssrf,
    /// Quote-breaking input.
    SqlInjection,
}

impl Kind {
    /// The name used in events and rules.
    pub fn name(self) -> &'static str {
        match self {
            Kind::CommandInjection => "command_injection",
            Kind::PathTraversal => "path_traversal",
            Kind::Ssrf => "ssrf",
            Kind::SqlInjection => "sql_injection",
        }
    }
}

/// Parameter names that say the parameter *is* a command or code to run (`command`,
/// `script`…): a tool that runs what it is given there does what it is for, which is a
/// capability (`command-execution`), not an injection.
const COMMAND_PARAMS: &[&str] = &[
    "command",
    "commands",
    "cmd",
    "script",
    "shell",
    "shell_command",
    "bash",
    "code",
    "program",
    "commandline",
    "command_line",
];

/// Whether the parameter `name` is, by its name, the command a tool runs.
pub fn is_command_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase().replace('-', "_");
    COMMAND_PARAMS.contains(&lower.as_str())
}

/// One payload.
#[derive(Debug, Clone)]
pub struct Payload {
    /// Its kind.
    pub kind: Kind,
    /// The argument value.
    pub value: String,
}

/// The payloads for one string parameter.
pub fn for_param(nonce: &str) -> Vec<Payload> {
    let marker = format!("wdn$((6*7))x{nonce}");
    let p = |kind, value: String| Payload { kind, value };
    vec![
        p(Kind::CommandInjection, format!("x; echo {marker}")),
        p(Kind::CommandInjection, format!("x$(echo {marker})")),
        p(Kind::CommandInjection, format!("x`echo {marker}`")),
        p(
            Kind::PathTraversal,
            "../../../../../../../../etc/passwd".into(),
        ),
        p(Kind::PathTraversal, "/home/sandbox/.ssh/id_rsa".into()),
        p(Kind::Ssrf, format!("http://ssrf-{nonce}.test/")),
        p(
            Kind::Ssrf,
            "http://169.254.169.254/latest/meta-data/".into(),
        ),
        p(Kind::SqlInjection, "x'".into()),
        // The control: the same words with a condition that is never true. A tautology proves a
        // breakout only by returning more than both the benign call and this; a text search
        // answers both alike (they differ in one character).
        p(Kind::SqlInjection, SQL_CONTROL.into()),
        p(Kind::SqlInjection, "x' OR '1'='1".into()),
    ]
}

/// The SQL payload whose answer the tautology is compared with.
pub const SQL_CONTROL: &str = "x' OR '1'='2";

const SQL_ERRORS: &[&str] = &[
    "syntax error",
    "sqlite3.OperationalError",
    "SQLITE_ERROR",
    "unrecognized token",
    "unterminated quoted string",
    "You have an error in your SQL syntax",
    "psycopg2",
    "ORA-0",
    "SQLSTATE",
];

fn spawned_with<'a>(events: &[&'a Event], needle: &str) -> Option<&'a Event> {
    events.iter().copied().find(|e| {
        e.kind == EventKind::ProcessSpawn
            && e.data["argv"].as_array().is_some_and(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .any(|s| s.contains(needle))
            })
    })
}

/// Whether `payload` worked, judged from the tool's output text and the events of its call's
/// window; the evidence as text.
pub fn detect(
    payload: &Payload,
    nonce: &str,
    output: &str,
    events: &[&Event],
    canary_in_output: bool,
    benign_output: Option<&str>,
    control_output: Option<&str>,
) -> Option<String> {
    match payload.kind {
        Kind::CommandInjection => {
            let executed = format!("wdn42x{nonce}");
            if output.contains(&executed) {
                return Some(format!(
                    "the output holds {executed}, the result of the injected command"
                ));
            }
            // Either a program received the shell's *expansion* of the payload, or a shell was
            // handed the payload as its script (`sh -c "… wdn$((6*7))x…"`). The raw payload as one
            // ordinary argument (`git log -- "x; echo …"`) is safe and proves nothing.
            spawned_with(events, &executed)
                .or_else(|| {
                    events.iter().copied().find(|e| {
                        let argv: Vec<&str> = e.data["argv"]
                            .as_array()
                            .map(|a| a.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        e.kind == EventKind::ProcessSpawn
                            && argv.first().is_some_and(|p| {
                                ["sh", "bash", "dash", "zsh", "ash", "ksh"]
                                    .contains(&p.rsplit('/').next().unwrap_or(p))
                            })
                            && argv.contains(&"-c")
                            && argv.iter().any(|a| a.contains(nonce))
                    })
                })
                .map(|e| format!("event {} started {} with the payload", e.id, e.data["path"]))
        }
        Kind::PathTraversal => {
            if output.contains("root:x:0:0:") {
                return Some("the output holds /etc/passwd".into());
            }
            if canary_in_output {
                return Some("the output holds the decoy key".into());
            }
            // The open must carry the payload itself (a `../` chain, or the absolute decoy path):
            // other programs of the call (`id` reading /etc/passwd) prove nothing.
            events
                .iter()
                .find(|e| {
                    e.kind == EventKind::FileOpen && {
                        let raw = e.data["raw_path"].as_str().or(e.data["path"].as_str());
                        raw.is_some_and(|p| {
                            if payload.value.starts_with('/') {
                                p == payload.value
                            } else {
                                p.ends_with(&payload.value) && p.contains("/../")
                            }
                        })
                    }
                })
                .map(|e| format!("event {} opened {}", e.id, e.data["path"]))
        }
        Kind::Ssrf => {
            let host = format!("ssrf-{nonce}.test");
            let metadata = payload.value.contains("169.254.169.254");
            events
                .iter()
                .find(|e| {
                    if metadata {
                        e.kind == EventKind::NetConnect && e.data["address"] == "169.254.169.254"
                    } else {
                        (e.kind == EventKind::NetDns
                            && e.data["name"]
                                .as_str()
                                .is_some_and(|n| n.eq_ignore_ascii_case(&host)))
                            || (e.kind == EventKind::NetConnect
                                && e.data["host"].as_str() == Some(host.as_str()))
                    }
                })
                .map(|e| format!("event {} reached for the payload's host", e.id))
        }
        Kind::SqlInjection => {
            // A signature the benign call's output already has (a linter, a calculator) is not
            // caused by the quote.
            let fresh = |sig: &&&str| benign_output.is_none_or(|b| !b.contains(**sig));
            if let Some(sig) = SQL_ERRORS
                .iter()
                .filter(fresh)
                .find(|sig| output.contains(**sig))
            {
                return Some(format!("the output holds a database error ({sig})"));
            }
            // A tautology that widens the result: more rows than the benign call *and* than the
            // never-true control, each by more than an echo of the payload would add. A fuzzy
            // search or an error that quotes its input answers the control as broadly.
            if payload.value == SQL_CONTROL {
                return None;
            }
            let (b, c) = (benign_output?, control_output?);
            let rows = |s: &str| s.matches("\\n").count();
            // Wider by half again at least: a text search ranks the two payloads' words a little
            // differently (Sentry's tool search: 55 KB against 48 KB), a breakout returns rows
            // the condition excluded.
            let wider = |than: &str| {
                output.len().saturating_sub(than.len()) > payload.value.len() + 16
                    && output.len() * 2 >= than.len() * 3
                    && rows(output) > rows(than)
            };
            (payload.value.contains(" OR ") && wider(b) && wider(c)).then(|| {
                format!(
                    "the tautology returned more than the benign call and the never-true control ({} bytes against {} and {})",
                    output.len(),
                    b.len(),
                    c.len()
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_command_param;

    #[test]
    fn command_parameters_are_known_by_name() {
        for p in [
            "command",
            "Command",
            "cmd",
            "shell-command",
            "script",
            "code",
        ] {
            assert!(is_command_param(p), "{p}");
        }
        for p in ["host", "path", "query", "commander", "url"] {
            assert!(!is_command_param(p), "{p}");
        }
    }
    use super::*;
    use serde_json::json;

    fn ev(id: u64, kind: EventKind, data: Value) -> Event {
        Event {
            id,
            t_ms: 0,
            kind,
            pid: Some(3),
            triggered_by: Some("tool_call:1".into()),
            data,
        }
    }

    #[test]
    fn echoed_payloads_are_not_detections() {
        let n = "abc123";
        let ps = for_param(n);
        let ci = &ps[0];
        // The server echoes its input: the payload text is there, its result is not.
        assert!(
            detect(
                ci,
                n,
                &format!("you said {}", ci.value),
                &[],
                false,
                None,
                None
            )
            .is_none()
        );
        assert!(detect(ci, n, "x\nwdn42xabc123\n", &[], false, None, None).is_some());
        let spawn = ev(
            4,
            EventKind::ProcessSpawn,
            json!({"path": "/bin/sh", "argv": ["sh", "-c", ci.value]}),
        );
        assert!(detect(ci, n, "", &[&spawn], false, None, None).is_some());
        let safe = ev(
            5,
            EventKind::ProcessSpawn,
            json!({"path": "/usr/bin/git", "argv": ["git", "log", "--", ci.value]}),
        );
        assert!(
            detect(ci, n, "", &[&safe], false, None, None).is_none(),
            "one plain argument is safe"
        );
        let pt = &ps[3];
        assert!(detect(pt, n, "root:x:0:0:root:/root", &[], false, None, None).is_some());
        assert!(detect(pt, n, "not found", &[], false, None, None).is_none());
        let id_reads = ev(6, EventKind::FileOpen, json!({"path": "/etc/passwd"}));
        assert!(
            detect(pt, n, "", &[&id_reads], false, None, None).is_none(),
            "an unrelated open of the same file"
        );
        let joined = ev(
            7,
            EventKind::FileOpen,
            json!({"path": "/etc/passwd", "raw_path": "/tmp/notes/../../../../../../../../etc/passwd"}),
        );
        assert!(detect(pt, n, "", &[&joined], false, None, None).is_some());
        let ssrf = &ps[5];
        let dns = ev(
            5,
            EventKind::NetDns,
            json!({"name": "ssrf-abc123.test", "type": "A"}),
        );
        assert!(detect(ssrf, n, "", &[&dns], false, None, None).is_some());
        assert!(
            detect(&ps[6], n, "", &[&dns], false, None, None).is_none(),
            "the metadata payload needs its own connect"
        );
        assert!(
            detect(
                &ps[7],
                n,
                "sqlite3.OperationalError: near",
                &[],
                false,
                None,
                None
            )
            .is_some()
        );
        assert!(detect(&ps[9], n, "groceries: milk", &[], false, None, None).is_none());
        let benign = r#"{"content":[{"type":"text","text":""}]}"#;
        let wide = r#"{"content":[{"type":"text","text":"groceries: milk\nsecret: the vault code is 1234"}]}"#;
        assert!(detect(&ps[9], n, wide, &[], false, Some(benign), Some(benign)).is_some());
        // Issue #30: a fuzzy search (or an error quoting its input) answers the never-true
        // control as broadly as the tautology: no proof of a breakout.
        assert!(
            detect(&ps[9], n, wide, &[], false, Some(benign), Some(wide)).is_none(),
            "the control was as wide"
        );
        assert!(
            detect(&ps[9], n, wide, &[], false, Some(benign), None).is_none(),
            "no control, no proof"
        );
        let ranked = |k: usize| {
            format!(
                r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
                "tool: a search hit\n".repeat(k)
            )
        };
        assert!(
            detect(
                &ps[9],
                n,
                &ranked(115),
                &[],
                false,
                Some(benign),
                Some(&ranked(100))
            )
            .is_none(),
            "a search that ranks the words a little differently"
        );
        assert!(detect(&ps[8], n, wide, &[], false, Some(benign), Some(benign)).is_none());
        let echo = format!(
            r#"{{"content":[{{"type":"text","text":"no note called {}"}}]}}"#,
            ps[9].value
        );
        assert!(
            detect(&ps[9], n, &echo, &[], false, Some(benign), Some(benign)).is_none(),
            "an echo is not a tautology"
        );
    }
}
