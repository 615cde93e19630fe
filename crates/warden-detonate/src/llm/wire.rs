//! The three providers' wire formats: a provider-neutral conversation turned into a request
//! body, and a response body turned into a [`Reply`]. Pure functions, tested on their own.
//!
//! - `openai`: `POST /v1/chat/completions`; tools as `{type: function, function: {name,
//!   description, parameters}}`; tool calls with arguments as a JSON *string*; results as
//!   `role: tool` messages; usage in `prompt_tokens`/`completion_tokens`.
//! - `anthropic`: `POST /v1/messages`; `system` apart; tools as `{name, description,
//!   input_schema}`; `tool_use` blocks with `input` objects; results as `tool_result` blocks in
//!   a user message; usage in `input_tokens`/`output_tokens`.
//! - `ollama`: `POST /api/chat` with `stream: false`; tools as OpenAI's; tool calls with
//!   arguments as an object (no ids); results as `role: tool` messages; usage in
//!   `prompt_eval_count`/`eval_count`.
//!
//! Guarantees: a reply that lacks what its format requires is a [`LlmError::Malformed`]; tool
//! arguments that are not a JSON object are kept as text in the [`ToolCall`] (an invalid call
//! is the model's mistake, handled by the caller, not an error of the reply).

use serde_json::{Map, Value, json};

use super::{LlmError, Message, Provider, Reply, ToolCall, ToolSpec};

/// Largest completion asked for, per request.
pub const MAX_COMPLETION: u32 = 1024;

/// The request for `messages`: its path and body.
pub fn request(
    provider: Provider,
    model: &str,
    system: &str,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (&'static str, Value) {
    match provider {
        Provider::OpenAi => (
            "/v1/chat/completions",
            json!({
                "model": model,
                "messages": openai_messages(system, messages, false),
                "tools": function_tools(tools),
                "tool_choice": "auto",
                "max_tokens": MAX_COMPLETION,
            }),
        ),
        Provider::Ollama => (
            "/api/chat",
            json!({
                "model": model,
                "messages": openai_messages(system, messages, true),
                "tools": function_tools(tools),
                "stream": false,
                "options": { "num_predict": MAX_COMPLETION },
            }),
        ),
        Provider::Anthropic => (
            "/v1/messages",
            json!({
                "model": model,
                "system": system,
                "max_tokens": MAX_COMPLETION,
                "messages": anthropic_messages(messages),
                "tools": tools.iter().map(|t| json!({
                    "name": t.name, "description": t.description, "input_schema": schema(t),
                })).collect::<Vec<_>>(),
            }),
        ),
    }
}

/// A tool's input schema as providers accept it (an object schema).
fn schema(t: &ToolSpec) -> Value {
    if t.input_schema.is_object() {
        t.input_schema.clone()
    } else {
        json!({ "type": "object", "properties": {} })
    }
}

fn function_tools(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            json!({ "type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": schema(t),
            }})
        })
        .collect()
}

/// Arguments as the model wrote them: the object, or the text it wrote instead.
fn arguments_value(a: &Result<Map<String, Value>, String>) -> Value {
    match a {
        Ok(m) => Value::Object(m.clone()),
        Err(raw) => Value::String(raw.clone()),
    }
}

/// OpenAI's (and, with `objects`, Ollama's) messages.
fn openai_messages(system: &str, messages: &[Message], objects: bool) -> Vec<Value> {
    let mut out = vec![json!({ "role": "system", "content": system })];
    for m in messages {
        out.push(match m {
            Message::User(text) => json!({ "role": "user", "content": text }),
            Message::Assistant { text, calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        let args = arguments_value(&c.arguments);
                        let args = if objects {
                            args
                        } else {
                            match args {
                                Value::String(s) => Value::String(s),
                                other => Value::String(other.to_string()),
                            }
                        };
                        json!({ "id": c.id, "type": "function",
                                "function": { "name": c.name, "arguments": args } })
                    })
                    .collect();
                let mut v = json!({ "role": "assistant", "content": text });
                if !calls.is_empty() {
                    v["tool_calls"] = Value::Array(calls);
                }
                v
            }
            Message::ToolResult {
                call_id,
                name,
                content,
            } => {
                if objects {
                    json!({ "role": "tool", "content": content, "tool_name": name })
                } else {
                    json!({ "role": "tool", "tool_call_id": call_id, "content": content })
                }
            }
        });
    }
    out
}

/// Anthropic's messages: tool results of one turn go together in one user message.
fn anthropic_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        match m {
            Message::User(text) => out.push(json!({ "role": "user", "content": text })),
            Message::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({ "type": "text", "text": text }));
                }
                for c in calls {
                    let input = match &c.arguments {
                        Ok(m) => Value::Object(m.clone()),
                        Err(_) => json!({}),
                    };
                    blocks.push(
                        json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input }),
                    );
                }
                out.push(json!({ "role": "assistant", "content": blocks }));
            }
            Message::ToolResult {
                call_id, content, ..
            } => {
                let block =
                    json!({ "type": "tool_result", "tool_use_id": call_id, "content": content });
                let joins = out.last().is_some_and(|last| {
                    last["role"] == "user"
                        && last["content"]
                            .as_array()
                            .is_some_and(|a| a.iter().all(|b| b["type"] == "tool_result"))
                });
                match out.last_mut() {
                    Some(last) if joins => {
                        if let Some(a) = last["content"].as_array_mut() {
                            a.push(block);
                        }
                    }
                    _ => out.push(json!({ "role": "user", "content": [block] })),
                }
            }
        }
    }
    out
}

/// Arguments the model sent: an object, a JSON text of one, or anything else kept as text.
fn parse_arguments(v: &Value) -> Result<Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m.clone()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(s.chars().take(2000).collect()),
        },
        Value::Null => Ok(Map::new()),
        other => Err(other.to_string().chars().take(2000).collect()),
    }
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The reply in `body`.
pub fn reply(provider: Provider, body: &Value) -> Result<Reply, LlmError> {
    let malformed = |what: &str| LlmError::Malformed(format!("no {what} in the answer"));
    match provider {
        Provider::OpenAi | Provider::Ollama => {
            let msg = if provider == Provider::OpenAi {
                body.pointer("/choices/0/message")
                    .ok_or_else(|| malformed("choices[0].message"))?
            } else {
                body.get("message").ok_or_else(|| malformed("message"))?
            };
            let calls = msg["tool_calls"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .enumerate()
                        .map(|(i, c)| ToolCall {
                            id: c["id"]
                                .as_str()
                                .map_or_else(|| format!("call_{i}"), str::to_owned),
                            name: c["function"]["name"].as_str().unwrap_or("").to_owned(),
                            arguments: parse_arguments(&c["function"]["arguments"]),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let (p, c) = if provider == Provider::OpenAi {
                (
                    count(&body["usage"]["prompt_tokens"]),
                    count(&body["usage"]["completion_tokens"]),
                )
            } else {
                (
                    count(&body["prompt_eval_count"]),
                    count(&body["eval_count"]),
                )
            };
            Ok(Reply {
                text: msg["content"].as_str().unwrap_or("").to_owned(),
                calls,
                prompt_tokens: p,
                completion_tokens: c,
            })
        }
        Provider::Anthropic => {
            let blocks = body["content"]
                .as_array()
                .ok_or_else(|| malformed("content"))?;
            let mut text = String::new();
            let mut calls = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                match b["type"].as_str() {
                    Some("text") => text.push_str(b["text"].as_str().unwrap_or("")),
                    Some("tool_use") => calls.push(ToolCall {
                        id: b["id"]
                            .as_str()
                            .map_or_else(|| format!("toolu_{i}"), str::to_owned),
                        name: b["name"].as_str().unwrap_or("").to_owned(),
                        arguments: parse_arguments(&b["input"]),
                    }),
                    _ => {}
                }
            }
            Ok(Reply {
                text,
                calls,
                prompt_tokens: count(&body["usage"]["input_tokens"]),
                completion_tokens: count(&body["usage"]["output_tokens"]),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convo() -> Vec<Message> {
        let mut args = Map::new();
        args.insert("city".into(), json!("Paris"));
        vec![
            Message::User("weather?".into()),
            Message::Assistant {
                text: String::new(),
                calls: vec![
                    ToolCall {
                        id: "c1".into(),
                        name: "weather".into(),
                        arguments: Ok(args),
                    },
                    ToolCall {
                        id: "c2".into(),
                        name: "weather".into(),
                        arguments: Err("{city: Paris".into()),
                    },
                ],
            },
            Message::ToolResult {
                call_id: "c1".into(),
                name: "weather".into(),
                content: "sunny".into(),
            },
            Message::ToolResult {
                call_id: "c2".into(),
                name: "weather".into(),
                content: "invalid arguments".into(),
            },
        ]
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "weather".into(),
            description: "Weather.".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }]
    }

    #[test]
    fn requests_have_each_providers_shape() {
        let (path, b) = request(Provider::OpenAi, "m", "sys", &convo(), &tools());
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"city\":\"Paris\"}"
        );
        assert_eq!(b["messages"][3]["tool_call_id"], "c1");
        assert_eq!(b["tools"][0]["function"]["name"], "weather");

        let (path, b) = request(Provider::Ollama, "m", "sys", &convo(), &tools());
        assert_eq!(path, "/api/chat");
        assert_eq!(b["stream"], false);
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"]["city"],
            "Paris"
        );
        assert_eq!(b["messages"][3]["tool_name"], "weather");

        let (path, b) = request(Provider::Anthropic, "m", "sys", &convo(), &tools());
        assert_eq!(path, "/v1/messages");
        assert_eq!(b["system"], "sys");
        assert_eq!(b["messages"][1]["content"][0]["type"], "tool_use");
        // Both results of the turn in one user message.
        assert_eq!(b["messages"].as_array().unwrap().len(), 3);
        assert_eq!(b["messages"][2]["content"][1]["tool_use_id"], "c2");
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn replies_are_read_and_bad_arguments_kept_as_text() {
        let r = reply(
            Provider::OpenAi,
            &json!({"choices": [{"message": {"content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                {"id": "b", "type": "function", "function": {"name": "weather", "arguments": "not json"}}
            ]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
        )
        .unwrap();
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].arguments.as_ref().unwrap()["city"], "Oslo");
        assert_eq!(r.calls[1].arguments, Err("not json".into()));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (10, 5));

        let r = reply(
            Provider::Anthropic,
            &json!({"content": [{"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "t", "name": "weather", "input": {"city": "Rome"}}],
                "usage": {"input_tokens": 7, "output_tokens": 3}}),
        )
        .unwrap();
        assert_eq!(r.text, "ok");
        assert_eq!(r.calls[0].id, "t");

        let r = reply(
            Provider::Ollama,
            &json!({"message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "weather", "arguments": {"city": "Bern"}}}]},
                "prompt_eval_count": 4, "eval_count": 2}),
        )
        .unwrap();
        assert_eq!(r.calls[0].id, "call_0");
        assert_eq!(r.prompt_tokens, 4);

        for p in [Provider::OpenAi, Provider::Anthropic, Provider::Ollama] {
            assert!(matches!(
                reply(p, &json!({"error": "x"})),
                Err(LlmError::Malformed(_))
            ));
        }
    }
}
