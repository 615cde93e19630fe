//! Adversarial arguments and how each is recognised as having worked. Every payload carries a
//! per-run nonce; detection never trusts the payload text itself appearing in the output (a
//! server may simply echo its input): command injection looks for the *result* of an
//! arithmetic expansion or an exec whose argv holds the nonce, path traversal for a known file
//! signature or canary content or an open of the target, SSRF for a lookup or connection to the
//! payload's host, SQL injection for database error signatures, code injection for the answer
//! of a product only an evaluator computes (two factors chosen per run) or a process whose argv
//! only an evaluator's own `system` call gives.

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
    /// Expressions for evaluators, template engines and deserializers.
    CodeInjection,
    /// Boundary values and sizes that make a tool exhaust its host ([`crate::exhaustion`]).
    Exhaustion,
}

impl Kind {
    /// The name used in events and rules.
    pub fn name(self) -> &'static str {
        match self {
            Kind::CommandInjection => "command_injection",
            Kind::PathTraversal => "path_traversal",
            Kind::Ssrf => "ssrf",
            Kind::SqlInjection => "sql_injection",
            Kind::CodeInjection => "code_injection",
            Kind::Exhaustion => "exhaustion",
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

/// How a path payload's evidence begins when the file reached the tool's output.
const EXPOSED: &str = "the output holds";

/// Whether a path payload's evidence is its file in the output (read and exposed to the model),
/// not only an open of it.
pub fn exposed(evidence: &str) -> bool {
    evidence.starts_with(EXPOSED)
}

/// Whether a payload that worked through `param` did what the tool is for: a command or code
/// parameter runs what it is given, a template parameter computes what its template says.
pub fn by_design(kind: Kind, param: &str) -> bool {
    let squeezed: String = param
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    match kind {
        Kind::CommandInjection => is_command_param(param),
        Kind::CodeInjection => {
            is_command_param(param)
                || ["template", "tmpl", "templatestring", "templatetext"]
                    .contains(&squeezed.as_str())
        }
        _ => false,
    }
}

/// Whether a tool's `description` says it runs code it is given (a browser's "Evaluate
/// JavaScript expression on page", a notebook's "Execute Python code"): then code its
/// arguments run is what it is for (`command-execution`), as for a `code` parameter. An
/// arithmetic "expression" is not code by this reading.
pub fn runs_code(description: &str) -> bool {
    static CODE: std::sync::LazyLock<Option<regex_lite::Regex>> = std::sync::LazyLock::new(|| {
        regex_lite::Regex::new(
            r"(?i)\b(evaluate|execute|run|runs|executes|evaluates)\b[^.\n]{0,40}\b(javascript|js|python|typescript|node\.?js|shell|bash|sql)\b|\b(javascript|python|typescript|shell)\s+(code|expression|snippet|function|script)\b|\b(run|execute|evaluate)s?\s+(arbitrary\s+)?(code|scripts?)\b",
        )
        .ok()
    });
    CODE.as_ref().is_some_and(|re| re.is_match(description))
}

/// One payload.
#[derive(Debug, Clone)]
pub struct Payload {
    /// Its kind.
    pub kind: Kind,
    /// The argument value (for [`Kind::Exhaustion`], as JSON text: numbers and lists too).
    pub value: String,
}

impl Payload {
    /// The argument as it is sent.
    pub fn argument(&self) -> Value {
        match self.kind {
            Kind::Exhaustion => {
                serde_json::from_str(&self.value).unwrap_or(Value::String(self.value.clone()))
            }
            _ => Value::String(self.value.clone()),
        }
    }

    /// The payload as events and reports show it: whole up to 256 bytes, else its start and
    /// its size.
    pub fn shown(&self) -> String {
        shown(&self.value)
    }
}

/// A payload's text as events and reports show it: whole up to 256 bytes, else its start and
/// its size.
pub fn shown(text: &str) -> String {
    if text.len() <= 256 {
        return text.to_owned();
    }
    let start: String = text.chars().take(64).collect();
    format!("{start}… ({} bytes)", text.len())
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
        p(
            Kind::PathTraversal,
            format!("{}/.ssh/id_rsa", warden_jail::persona::home()),
        ),
        p(Kind::Ssrf, format!("http://ssrf-{nonce}.test/")),
        p(
            Kind::Ssrf,
            "http://169.254.169.254/latest/meta-data/".into(),
        ),
        // The control first: the same words with a condition that is never true, well-formed
        // SQL once it lands in a quoted string. A tautology proves a breakout only by
        // returning more than both the benign call and this (a text search answers both alike:
        // they differ in one character), and a database error only when this did not show it
        // too (a parser that refuses any odd value, a time or a number, answers every one of
        // these with its own "syntax error").
        p(Kind::SqlInjection, SQL_CONTROL.into()),
        p(Kind::SqlInjection, "x'".into()),
        p(Kind::SqlInjection, "x' OR '1'='1".into()),
    ]
    .into_iter()
    .chain(code(nonce))
    .collect()
}

/// The two factors of this run's code-injection product: from the nonce, so the answer cannot
/// be guessed by a server that has not evaluated the payload, and the payload (which holds the
/// factors, never the product) cannot be echoed into it.
pub fn factors(nonce: &str) -> (u64, u64) {
    // FNV-1a: a spread of the nonce's bytes; the factors need no secrecy beyond the nonce's.
    let h = nonce.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // A product of 12 or 13 digits: no output full of numbers holds it by chance, and
    // JavaScript's doubles still hold it exactly.
    (1_000_003 + h % 8_999_000, 100_003 + (h >> 32) % 899_000)
}

/// What kind of engine a code payload is for: `evaluator` (eval, exec, `new Function`, vm),
/// `template` (its arithmetic proves the input was rendered as a template — code execution
/// only where the engine is not sandboxed) or `deserializer` (YAML tags, pickle).
pub fn family(p: &Payload) -> Option<&'static str> {
    if p.kind != Kind::CodeInjection {
        return None;
    }
    let v = p.value.as_str();
    Some(
        if v.starts_with("{{") || v.starts_with("${") || v.starts_with("<%") {
            "template"
        } else if v.starts_with("!!") || !v.contains(['(', '[']) {
            "deserializer"
        } else {
            "evaluator"
        },
    )
}

/// The argument a spawned process gets from the code payloads that call `system`.
fn spawn_marker(nonce: &str) -> String {
    format!("wdnci{nonce}")
}

/// Code for evaluators (Python, JavaScript), template engines (Jinja2, Tornado, Nunjucks,
/// Twig; Mako and JavaScript template literals; EJS and ERB) and deserializers (PyYAML's
/// unsafe loader, pickle protocol 0 in base64).
fn code(nonce: &str) -> Vec<Payload> {
    let (a, b) = factors(nonce);
    let marker = spawn_marker(nonce);
    // `coperator\nmul\n(I<a>\nI<b>\ntR.`: call operator.mul(a, b) when unpickled.
    let pickle = format!("coperator\nmul\n(I{a}\nI{b}\ntR.");
    let p = |value: String| Payload {
        kind: Kind::CodeInjection,
        value,
    };
    vec![
        p(format!("__import__('operator').mul({a},{b})")),
        p(format!("__import__('os').system('true {marker}')")),
        p(format!("[{a}].map(x=>x*{b})[0]")),
        p(format!("{{{{{a}*{b}}}}}")),
        p(format!("${{{a}*{b}}}")),
        p(format!("<%= {a}*{b} %>")),
        p(format!("!!python/object/apply:operator.mul [{a}, {b}]")),
        p(base64(pickle.as_bytes())),
    ]
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Whether `text` holds `number` as a whole number (no digit on either side).
fn holds_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + number.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
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

/// The argv of a `process.spawn` event (empty for any other event).
fn argv(e: &Event) -> Vec<&str> {
    if e.kind != EventKind::ProcessSpawn {
        return Vec::new();
    }
    e.data["argv"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn spawned_with<'a>(events: &[&'a Event], needle: &str) -> Option<&'a Event> {
    events
        .iter()
        .copied()
        .find(|e| argv(e).iter().any(|s| s.contains(needle)))
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
        Kind::CodeInjection => {
            let marker = spawn_marker(nonce);
            if payload.value.contains(&marker) {
                // `os.system('true wdnci…')`: the shell it starts gets exactly that script, or
                // `true` gets exactly that argument. The payload as one argument of another
                // program (`grep "__import__(…)"`) is safe and proves nothing.
                let script = format!("true {marker}");
                return events
                    .iter()
                    .find(|e| {
                        let argv = argv(e);
                        argv.last() == Some(&script.as_str()) && argv.contains(&"-c")
                            || argv.len() == 2
                                && argv[0].rsplit('/').next() == Some("true")
                                && argv[1] == marker
                    })
                    .map(|e| {
                        format!(
                            "event {} started {} as the payload's system() call asked",
                            e.id, e.data["path"]
                        )
                    });
            }
            let (a, b) = factors(nonce);
            let product = (a * b).to_string();
            let fresh = benign_output.is_none_or(|o| !holds_number(o, &product));
            (fresh && holds_number(output, &product)).then(|| {
                format!("the output holds {product}, the value of {a}*{b} the payload asked for")
            })
        }
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
                        let argv = argv(e);
                        argv.first().is_some_and(|p| {
                            ["sh", "bash", "dash", "zsh", "ash", "ksh"]
                                .contains(&p.rsplit('/').next().unwrap_or(p))
                        }) && argv.contains(&"-c")
                            && argv.iter().any(|a| a.contains(nonce))
                    })
                })
                .map(|e| format!("event {} started {} with the payload", e.id, e.data["path"]))
        }
        Kind::PathTraversal => {
            if output.contains("root:x:0:0:") {
                return Some(format!("{EXPOSED} /etc/passwd"));
            }
            if canary_in_output {
                return Some(format!("{EXPOSED} the decoy key"));
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
            // The control is what the others are measured against, never a finding itself.
            if payload.value == SQL_CONTROL {
                return None;
            }
            // A signature the benign call's output already has (a linter, a calculator), or the
            // well-formed control's, is not caused by the quote breaking out.
            let fresh = |sig: &&&str| {
                [benign_output, control_output]
                    .iter()
                    .all(|o| o.is_none_or(|o| !o.contains(**sig)))
            };
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
        // Judged by what the call cost, not by what it said: [`crate::exhaustion::judge`].
        Kind::Exhaustion => None,
    }
}

#[cfg(test)]
mod tests {
    use super::is_command_param;

    #[test]
    fn code_tools_by_their_description() {
        for d in [
            "Evaluate JavaScript expression on page or element",
            "Execute Python code in a sandboxed kernel.",
            "Runs arbitrary code.",
            "Run a shell command.",
        ] {
            assert!(runs_code(d), "{d}");
        }
        for d in [
            "Compute an arithmetic expression.",
            "Evaluates an arithmetic expression.",
            "Greet a user by name.",
            "Run the test suite and report failures.",
        ] {
            assert!(!runs_code(d), "{d}");
        }
    }

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
    fn code_payloads_are_proven_by_what_only_an_evaluator_gives() {
        let n = "k3y9q0aa7bcd";
        let (a, b) = factors(n);
        let product = (a * b).to_string();
        assert_ne!(factors(n), factors("another1nonce"), "chosen per run");
        let ps: Vec<Payload> = for_param(n)
            .into_iter()
            .filter(|p| p.kind == Kind::CodeInjection)
            .collect();
        assert_eq!(ps.len(), 8);
        for p in &ps {
            assert!(!p.value.contains(&product), "{}", p.value);
            // An echo of the payload is no proof.
            let echo = format!("unknown expression: {}", p.value);
            assert!(
                detect(p, n, &echo, &[], false, None, None).is_none(),
                "{}",
                p.value
            );
        }
        let eval = &ps[0];
        let answered = format!(r#"{{"content":[{{"type":"text","text":"= {product}"}}]}}"#);
        assert!(detect(eval, n, &answered, &[], false, None, None).is_some());
        // The same number already in the benign answer, or as part of a longer one.
        assert!(detect(eval, n, &answered, &[], false, Some(&answered), None).is_none());
        assert!(detect(eval, n, &format!("id 9{product}1"), &[], false, None, None).is_none());
        // The system() payload: the shell got exactly its script; not the payload as one
        // argument of another program.
        let system = &ps[1];
        let sh = ev(
            4,
            EventKind::ProcessSpawn,
            json!({"path": "/bin/sh", "argv": ["sh", "-c", format!("true wdnci{n}")]}),
        );
        assert!(detect(system, n, "0", &[&sh], false, None, None).is_some());
        let grep = ev(
            5,
            EventKind::ProcessSpawn,
            json!({"path": "/bin/grep", "argv": ["grep", "-e", system.value]}),
        );
        assert!(detect(system, n, "", &[&grep], false, None, None).is_none());
        // The pickle is protocol 0 in base64.
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
        assert!(ps[7].value.starts_with("Y29wZXJhdG9y"), "{}", ps[7].value);
        assert!(by_design(Kind::CodeInjection, "code"));
        assert!(by_design(Kind::CodeInjection, "template"));
        assert!(by_design(Kind::CodeInjection, "templateString"));
        let families: Vec<_> = ps.iter().filter_map(family).collect();
        assert_eq!(
            families,
            [
                "evaluator",
                "evaluator",
                "evaluator",
                "template",
                "template",
                "template",
                "deserializer",
                "deserializer"
            ]
        );
        assert!(product.len() >= 12, "{product}");
        assert!(!by_design(Kind::CodeInjection, "expression"));
        assert!(!by_design(Kind::SqlInjection, "code"));
    }

    /// Regression (held-out precision draw of 2026-12-07, mcp-grafana): a time parameter whose
    /// parser answers every odd value with "syntax error" is no SQL injection; a quote that
    /// breaks a real query, whose well-formed control went through, is.
    #[test]
    fn a_database_error_counts_only_when_the_well_formed_control_had_none() {
        let n = "abc123";
        let ps = for_param(n);
        let sql: Vec<&Payload> = ps.iter().filter(|p| p.kind == Kind::SqlInjection).collect();
        assert_eq!(sql[0].value, SQL_CONTROL, "the control goes first");
        let quote = sql[1];
        assert_eq!(quote.value, "x'");
        let parser = "invalid parameter: syntax error at position 1";
        assert!(detect(quote, n, parser, &[], false, Some("no data"), Some(parser)).is_none());
        assert!(
            detect(sql[0], n, parser, &[], false, Some("no data"), None).is_none(),
            "the control is never a finding"
        );
        let sqlite = "sqlite3.OperationalError: unrecognized token: \"'x''\"";
        assert!(detect(quote, n, sqlite, &[], false, Some(""), Some("")).is_some());
        assert!(
            detect(quote, n, sqlite, &[], false, Some(""), None).is_some(),
            "no control answer (it timed out): the benign call decides"
        );
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
        assert_eq!(ps[8].value, "x'");
        assert!(
            detect(
                &ps[8],
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
