//! The last phase: rules over the events, the score, and the verdict — including whether the
//! detonation happened at all.
//!
//! Guarantees: a run in which the sandbox, the install, the start-up, `initialize` or
//! `tools/list` failed, in which the server offers no tools, or in which no tool call was
//! answered with a result, is incomplete: the report says at which [`Stage`] it stopped, why,
//! and what the server last printed, and its verdict is [`Verdict::Inconclusive`] — unless
//! what was observed before it stopped already scores HIGH or CRITICAL, which then stands (a
//! server that steals at start-up and exits is not let off with "inconclusive"). A PASS is only
//! ever said about a server whose tools ran.

use serde::Serialize;
use warden_events::{Event, EventKind, Finding, Verdict};

use crate::harness::{ServerEnd, Session};
use crate::report;

/// Where a detonation stopped short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The sandbox could not be set up.
    Sandbox,
    /// The package's install failed, or left nothing to start.
    Install,
    /// The server's program could not be started, or exited before it answered.
    Start,
    /// The server never answered `initialize`.
    Initialize,
    /// `tools/list` failed.
    ToolsList,
    /// No tool call reached a server that has (or declares) tools.
    Tools,
    /// A remote server, probed from the outside: no behavioural evidence can exist, so a run
    /// without findings is not a pass.
    Probe,
}

/// Why a detonation is inconclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inconclusive {
    /// Where it stopped.
    pub stage: Stage,
    /// One line saying why (and, where there is one, what setting fixes it).
    pub reason: String,
    /// The last lines the server (or the install) wrote to stderr.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// Events that show it (the harness's inconclusive timings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<u64>,
}

impl Inconclusive {
    /// An inconclusive run stopped at `stage` for `reason`.
    pub fn new(stage: Stage, reason: impl Into<String>) -> Inconclusive {
        Inconclusive {
            stage,
            reason: report::clean(&reason.into()),
            stderr_tail: String::new(),
            evidence: Vec::new(),
        }
    }

    /// The same, with the tail of `stderr` attached.
    pub fn with_stderr(mut self, stderr: &str) -> Inconclusive {
        self.stderr_tail = stderr_tail(stderr);
        self
    }
}

/// Lines of stderr kept in the reason.
const TAIL_LINES: usize = 12;
/// Characters of stderr kept in the reason.
const TAIL_CHARS: usize = 2000;

/// The last non-empty lines of `text` (at most `TAIL_LINES` and `TAIL_CHARS`), with
/// control and invisible characters written out (the text is the server's).
pub fn stderr_tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let kept = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    let start = kept.chars().count().saturating_sub(TAIL_CHARS);
    let kept: String = kept.chars().skip(start).collect();
    kept.lines()
        .map(report::clean)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the session happened: `None` when it did, else where and why it stopped short.
/// `earlier` is what the install and start phases already found (they win: they came first).
pub fn happened(
    earlier: Option<&Inconclusive>,
    session: &Session,
    events: &[Event],
) -> Option<Inconclusive> {
    if let Some(i) = earlier {
        return Some(i.clone());
    }
    let aborted = session
        .aborted
        .as_deref()
        .unwrap_or("the session ended early");
    let stopped = match &session.end {
        ServerEnd::SandboxFailed(why) => Some(Inconclusive::new(Stage::Sandbox, why.clone())),
        ServerEnd::NotStarted(why) => Some(Inconclusive::new(Stage::Start, why.clone())),
        ServerEnd::Exited { code, signal } if !session.initialized => Some(Inconclusive::new(
            Stage::Start,
            format!(
                "the server exited ({}) before it answered initialize",
                status(*code, *signal)
            ),
        )),
        _ if !session.initialized => Some(Inconclusive::new(Stage::Initialize, aborted)),
        _ => None,
    };
    // What the harness saw, and the server's own end when it exited under it.
    let aborted = match &session.end {
        ServerEnd::Exited { code, signal } => {
            format!("{aborted}; the server exited ({})", status(*code, *signal))
        }
        _ => aborted.to_owned(),
    };
    let listed = session.listed.unwrap_or(0);
    // A call the server died of at a sandbox limit did reach it: that is what it did. Also
    // when the limit was recorded just after the call's window closed (the server's death
    // ended the call before the sandbox had told the limit): outside any window, within
    // `LIMIT_AFTER_CALL_MS` of the end of a call that got no answer.
    let unanswered_ends: Vec<u64> = events
        .iter()
        .filter(|e| {
            e.kind == EventKind::McpTiming
                && e.data["phase"] == "tool_call"
                && e.data["is_error"] == true
        })
        .map(|e| e.t_ms)
        .collect();
    let limit_in_a_call = events.iter().any(|e| {
        e.kind == EventKind::SandboxLimitHit
            && match e.triggered_by.as_deref() {
                Some(w) => w.starts_with("tool_call:"),
                None => {
                    matches!(session.end, ServerEnd::Exited { .. })
                        && unanswered_ends
                            .iter()
                            .any(|t| e.t_ms.abs_diff(*t) <= LIMIT_AFTER_CALL_MS)
                }
            }
    });
    // A call that ran to its timeout burning the CPU did reach the server too.
    let burned_a_call = events.iter().any(|e| {
        e.kind == EventKind::McpTiming && e.data["phase"] == "tool_call" && e.data["burned"] == true
    });
    let exercised = session.exercised > 0 || limit_in_a_call || burned_a_call;
    let stopped = stopped.or_else(|| match session.listed {
        None => Some(Inconclusive::new(Stage::ToolsList, aborted.clone())),
        Some(0) => Some(Inconclusive::new(
            Stage::Tools,
            if session.declares_tools {
                "the server declares tools but lists none: nothing was exercised"
            } else {
                "the server offers no tools: nothing was exercised"
            },
        )),
        Some(_) if listed > 0 && !exercised => {
            let why = match &session.end {
                ServerEnd::Exited { code, signal } => format!(
                    "no tool call was answered: the server exited ({}) at the first",
                    status(*code, *signal)
                ),
                _ => format!(
                    "no tool call was answered with a result ({} refused, {} timed out; {})",
                    session.calls.saturating_sub(session.timeouts),
                    session.timeouts,
                    aborted
                ),
            };
            Some(Inconclusive::new(Stage::Tools, why))
        }
        Some(_) => None,
    })?;
    let evidence = events
        .iter()
        .filter(|e| e.kind == EventKind::McpTiming && e.data["inconclusive"] == true)
        .map(|e| e.id)
        .collect();
    Some(Inconclusive {
        evidence,
        ..stopped.with_stderr(&session.stderr)
    })
}

/// How close to the end of a call the server died in a limit recorded outside any window still
/// counts as that call's (the supervisor polls its counters every 50 ms; the tree's end
/// follows the death within moments).
const LIMIT_AFTER_CALL_MS: u64 = 2000;

/// `exit code N` or `killed by signal N`.
fn status(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "no exit status".into(),
    }
}

/// The verdict: the score's band, unless the run did not happen — then `INCONCLUSIVE`,
/// except that a band of HIGH or worse stands on what was observed.
pub fn verdict(score: u32, inconclusive: Option<&Inconclusive>) -> Verdict {
    let band = Verdict::from_score(score);
    match inconclusive {
        Some(_) if band < Verdict::High => Verdict::Inconclusive,
        _ => band,
    }
}

/// The findings the rules make of `events` (`tool_of` names the tool of a call window).
pub fn findings(
    rules: &[warden_rules::Compiled],
    events: &[Event],
    tool_of: &dyn Fn(Option<&str>) -> Option<String>,
) -> Vec<Finding> {
    warden_rules::evaluate(rules, events, tool_of)
}

/// Mark the findings that only the LLM phase triggered: every event they rest on is one of
/// the model's tool calls or judgements, or happened in a call's window.
pub fn mark_llm_only(findings: &mut [Finding], events: &[Event]) {
    // The model's calls, and its judgements of what it read.
    let llm: std::collections::HashSet<u64> = events
        .iter()
        .filter(|e| {
            e.kind == EventKind::McpToolCall && e.data["kind"] == "llm"
                || e.kind == EventKind::McpContent && e.data["source"] == "llm_judge"
        })
        .map(|e| e.id)
        .collect();
    if llm.is_empty() {
        return;
    }
    let by_model = |id: &u64| {
        llm.contains(id)
            || events.iter().find(|e| e.id == *id).is_some_and(|e| {
                e.triggered_by
                    .as_deref()
                    .and_then(|w| w.strip_prefix("tool_call:"))
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| llm.contains(&n))
                    || e.data["call"].as_u64().is_some_and(|n| llm.contains(&n))
            })
    };
    for f in findings.iter_mut() {
        f.llm_only = !f.evidence.is_empty() && f.evidence.iter().all(by_model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran() -> Session {
        Session {
            initialized: true,
            declares_tools: true,
            listed: Some(2),
            exercised: 2,
            ..Session::default()
        }
    }

    #[test]
    fn only_a_session_that_exercised_tools_is_conclusive() {
        assert_eq!(happened(None, &ran(), &[]), None);
        let crashed = Session {
            end: ServerEnd::Exited {
                code: Some(1),
                signal: None,
            },
            stderr: "Traceback\nAttributeError: x\n".into(),
            ..Session::default()
        };
        let why = happened(None, &crashed, &[]).unwrap();
        assert_eq!(why.stage, Stage::Start);
        assert!(why.reason.contains("exit code 1"), "{}", why.reason);
        assert!(why.stderr_tail.ends_with("AttributeError: x"));
        let hung = Session {
            aborted: Some("initialize timed out after 30000 ms".into()),
            ..Session::default()
        };
        assert_eq!(happened(None, &hung, &[]).unwrap().stage, Stage::Initialize);
        let no_list = Session {
            listed: None,
            ..ran()
        };
        assert_eq!(
            happened(None, &no_list, &[]).unwrap().stage,
            Stage::ToolsList
        );
        let empty = Session {
            listed: Some(0),
            exercised: 0,
            ..ran()
        };
        assert_eq!(happened(None, &empty, &[]).unwrap().stage, Stage::Tools);
        // Review finding: no tools at all was a PASS about nothing.
        let no_tools = Session {
            declares_tools: false,
            ..empty
        };
        assert_eq!(happened(None, &no_tools, &[]).unwrap().stage, Stage::Tools);
        // Review finding: every call refused with a JSON-RPC error was counted as exercised.
        let refused = Session {
            calls: 3,
            exercised: 0,
            ..ran()
        };
        let why = happened(None, &refused, &[]).unwrap();
        assert!(why.reason.contains("3 refused"), "{}", why.reason);
        let unreached = Session {
            exercised: 0,
            ..ran()
        };
        assert_eq!(happened(None, &unreached, &[]).unwrap().stage, Stage::Tools);
        let jail = Session {
            end: ServerEnd::SandboxFailed("mounts: mounting /proc (EPERM)".into()),
            ..Session::default()
        };
        assert_eq!(happened(None, &jail, &[]).unwrap().stage, Stage::Sandbox);
        // A hog the memory limit killed at its first call: the limit stands for what the
        // call did, whether it was recorded in the call's window or after it closed.
        let killed = Session {
            calls: 1,
            exercised: 0,
            end: ServerEnd::Exited {
                code: None,
                signal: Some(9),
            },
            ..ran()
        };
        let at = |t_ms: u64, kind: EventKind, window: Option<&str>| Event {
            id: t_ms,
            t_ms,
            kind,
            pid: None,
            triggered_by: window.map(str::to_owned),
            data: serde_json::json!({ "limit": "memory", "phase": "tool_call", "is_error": true }),
        };
        // The call that ended without an answer when the server died.
        let call = at(1000, EventKind::McpTiming, None);
        let limit = |t_ms, window| at(t_ms, EventKind::SandboxLimitHit, window);
        assert_eq!(
            happened(
                None,
                &killed,
                &[call.clone(), limit(9000, Some("tool_call:1"))]
            ),
            None
        );
        assert_eq!(
            happened(None, &killed, &[call.clone(), limit(1500, None)]),
            None
        );
        assert_eq!(
            happened(None, &killed, &[limit(900, None), call.clone()]),
            None
        );
        // A limit long after every call (a server that stalls its calls, then hogs) is not
        // what a call did.
        assert!(happened(None, &killed, &[call.clone(), limit(60_000, None)]).is_some());
        assert!(happened(None, &killed, &[limit(1500, None)]).is_some());
        let why = happened(None, &killed, &[]).unwrap();
        assert!(why.reason.contains("killed by signal 9"), "{}", why.reason);
        let earlier = Inconclusive::new(Stage::Install, "pip failed");
        assert_eq!(happened(Some(&earlier), &ran(), &[]), Some(earlier));
    }

    #[test]
    fn no_low_score_hides_an_inconclusive_run() {
        let why = Inconclusive::new(Stage::Start, "x");
        assert_eq!(verdict(0, Some(&why)), Verdict::Inconclusive);
        assert_eq!(verdict(45, Some(&why)), Verdict::Inconclusive);
        // What was observed before it stopped stands when it is serious.
        assert_eq!(verdict(62, Some(&why)), Verdict::High);
        assert_eq!(verdict(95, Some(&why)), Verdict::Critical);
        assert_eq!(verdict(0, None), Verdict::Pass);
    }

    #[test]
    fn the_stderr_tail_is_short_and_clean() {
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = stderr_tail(&long);
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 99"));
        assert_eq!(stderr_tail("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb");
    }
}
