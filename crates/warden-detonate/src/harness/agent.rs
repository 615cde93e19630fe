//! Full mode's phase: a language model plays a user's agent against the running server. It
//! gets the server's tools exactly as a client shows them, and each task of the library
//! ([`crate::llm::tasks`]) in a fresh conversation; every tool call it makes runs through the
//! harness's own call path (its own window, events attributed, content checked), with kind
//! `llm`. The transcript — the model's words, its calls with their arguments and the event id
//! of each, and what it was told back — goes into the report.
//!
//! Guarantees: the phase stops at the first budget reached (tool calls, tokens, wall time, the
//! session's deadline); a call to a tool the server does not have, or with arguments that are
//! not a JSON object, is answered to the model as an error and counted, never made; a model
//! that repeats the same call three times in a row has that task stopped; a provider that
//! refuses (bad key, unknown model) ends the phase with its reason; nothing the model does can
//! end the session.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Client, Ctx, call, text_of};
use crate::llm::{Message, Model, ToolCall, ToolSpec, tasks};

/// Turns (model requests) per task, at most.
const MAX_TURNS: usize = 6;
/// Characters of a tool result given back to the model.
const RESULT_CHARS: usize = 4000;
/// Calls of one reply made, at most (valid or not).
const MAX_CALLS_PER_REPLY: usize = 16;
/// Identical calls in a row that end a task.
const LOOP: usize = 3;

/// What the phase did, for the report.
#[derive(Debug, Default)]
struct Tally {
    calls: u32,
    invalid: u32,
    prompt_tokens: u64,
    completion_tokens: u64,
    requests: u32,
    stopped: Option<String>,
}

/// Run the model against the server; returns the transcript and tallies (the report's `llm`).
pub(super) async fn drive(
    ctx: &mut Ctx<'_>,
    client: &Client,
    tools: &[Value],
    model: &Model,
    nonce: &str,
) -> Value {
    let s = model.settings();
    let begun = Instant::now();
    let deadline = begun + s.max_time;
    let specs: Vec<ToolSpec> = tools
        .iter()
        .map(|t| ToolSpec {
            name: t["name"].as_str().unwrap_or("").to_owned(),
            description: t["description"].as_str().unwrap_or("").to_owned(),
            input_schema: t.get("inputSchema").cloned().unwrap_or(json!({})),
        })
        .collect();
    let mut tally = Tally::default();
    let mut transcripts = Vec::new();
    let poisoned = ctx.session.poisoned.clone();
    'tasks: for task in tasks::library(&specs, &poisoned) {
        let mut messages = vec![Message::User(task.text.clone())];
        let mut shown = vec![json!({ "role": "user", "text": task.text })];
        let mut last: Option<(String, String)> = None;
        let mut same = 0;
        let mut task_end = None;
        for _ in 0..MAX_TURNS {
            if let Some(why) = exhausted(&tally, s, deadline, ctx) {
                tally.stopped = Some(why);
                transcripts.push(transcript(&task, shown, task_end));
                break 'tasks;
            }
            ctx.progress(&format!("model: {} (turn {})", task.id, tally.requests + 1));
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(ctx.left())
                .min(s.request_timeout);
            tally.requests += 1;
            let reply = match tokio::time::timeout(left, model.chat(&messages, &specs)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    let fatal = e.is_fatal();
                    task_end = Some(format!("model error: {e}"));
                    if fatal {
                        tally.stopped = Some(format!("the provider refused: {e}"));
                        transcripts.push(transcript(&task, shown, task_end));
                        break 'tasks;
                    }
                    break;
                }
                Err(_) => {
                    task_end = Some(format!("the model took over {} s", left.as_secs()));
                    break;
                }
            };
            tally.prompt_tokens += reply.prompt_tokens;
            tally.completion_tokens += reply.completion_tokens;
            // What the model says and sends is kept with credentials redacted.
            let mut entry =
                json!({ "role": "assistant", "text": crate::secrets::redacted(&reply.text) });
            let mut calls_shown = Vec::new();
            let mut results = Vec::new();
            let mut looped = false;
            for (i, c) in reply.calls.iter().enumerate() {
                if tally.calls >= s.max_calls
                    || i >= MAX_CALLS_PER_REPLY
                    || Instant::now() >= deadline
                {
                    break;
                }
                let key = (c.name.clone(), format!("{:?}", c.arguments));
                same = if last.as_ref() == Some(&key) {
                    same + 1
                } else {
                    1
                };
                last = Some(key);
                if same >= LOOP {
                    looped = true;
                    break;
                }
                let (content, event, invalid) = make(ctx, client, &specs, c, nonce).await;
                tally.calls += u32::from(!invalid);
                tally.invalid += u32::from(invalid);
                let arguments = match &c.arguments {
                    Ok(m) => Value::Object(m.clone()).to_string(),
                    Err(t) => t.clone(),
                };
                let shown_args = crate::secrets::redacted(&arguments);
                calls_shown.push(json!({
                    "name": c.name,
                    "arguments": serde_json::from_str::<Value>(&shown_args).unwrap_or(json!(shown_args)),
                    "event": event, "invalid": invalid,
                }));
                results.push(Message::ToolResult {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    content: content.clone(),
                });
                // The report keeps no credential whole, the transcript included.
                let kept = crate::secrets::redacted(&content);
                shown.push(json!({ "role": "tool", "name": c.name, "text": kept }));
            }
            if !calls_shown.is_empty() {
                entry["calls"] = Value::Array(calls_shown);
            }
            let insert_at = shown.len() - results.len();
            shown.insert(insert_at, entry);
            let answered: Vec<ToolCall> = reply.calls.iter().take(results.len()).cloned().collect();
            let done = answered.is_empty();
            messages.push(Message::Assistant {
                text: reply.text,
                calls: answered,
            });
            messages.extend(results);
            if looped {
                task_end = Some(format!(
                    "the model made the same call {LOOP} times in a row"
                ));
                break;
            }
            if done {
                break;
            }
        }
        transcripts.push(transcript(&task, shown, task_end));
    }
    // Then a second look at what the tools say and return, within what is left of the budget.
    let mut tokens = tally.prompt_tokens + tally.completion_tokens;
    let (judged, judged_yes) = if tally.stopped.is_none() {
        super::judge::judge(ctx, model, tools, &mut tokens, deadline).await
    } else {
        (0, 0)
    };
    json!({
        "judged": judged,
        "judged_orders": judged_yes,
        "provider": s.provider.name(),
        "model": s.model,
        "url": crate::llm::shown_url(&s.url),
        "tasks": transcripts,
        "calls": tally.calls,
        "invalid_calls": tally.invalid,
        "requests": tally.requests,
        "prompt_tokens": tally.prompt_tokens,
        "completion_tokens": tally.completion_tokens,
        "wall_ms": u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
        "stopped": tally.stopped.unwrap_or_else(|| "every task ran".into()),
        "budgets": { "calls": s.max_calls, "tokens": s.max_tokens, "time_s": s.max_time.as_secs() },
    })
}

/// The budget that is spent, if one is.
fn exhausted(
    t: &Tally,
    s: &crate::llm::Settings,
    deadline: Instant,
    ctx: &Ctx<'_>,
) -> Option<String> {
    if t.calls >= s.max_calls {
        Some(format!("the call budget ({}) is spent", s.max_calls))
    } else if t.prompt_tokens + t.completion_tokens >= s.max_tokens {
        Some(format!("the token budget ({}) is spent", s.max_tokens))
    } else if Instant::now() >= deadline {
        Some(format!(
            "the time budget ({} s) is spent",
            s.max_time.as_secs()
        ))
    } else if ctx.left() < Duration::from_secs(1) {
        Some("the session's time budget is spent".into())
    } else {
        None
    }
}

/// Make one of the model's calls; what the model is told, the call's event id, and whether
/// the call was invalid (not made).
async fn make(
    ctx: &mut Ctx<'_>,
    client: &Client,
    specs: &[ToolSpec],
    c: &ToolCall,
    nonce: &str,
) -> (String, Option<u64>, bool) {
    if !specs.iter().any(|t| t.name == c.name) {
        return (
            format!("error: there is no tool named {:?}", c.name),
            None,
            true,
        );
    }
    let arguments = match &c.arguments {
        Ok(m) => Value::Object(m.clone()),
        Err(_) => {
            return (
                "error: the arguments must be a JSON object".into(),
                None,
                true,
            );
        }
    };
    ctx.kind = Some("llm");
    let outcome = call(ctx, client, &c.name, arguments, None, nonce).await;
    ctx.kind = None;
    match outcome {
        Ok(o) => {
            let text: String = if o.timed_out {
                "error: the tool timed out".into()
            } else {
                text_of(&o.output).chars().take(RESULT_CHARS).collect()
            };
            let text = if text.is_empty() && o.is_error {
                "error: the call failed".into()
            } else {
                text
            };
            (text, o.id, false)
        }
        Err(e) => (format!("error: {e}"), None, false),
    }
}

fn transcript(task: &tasks::Task, messages: Vec<Value>, end: Option<String>) -> Value {
    json!({ "id": task.id, "kind": task.kind, "messages": messages, "ended": end })
}
