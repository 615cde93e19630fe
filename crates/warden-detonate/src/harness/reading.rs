//! Everything else the model would read: every listed resource, a bounded sample of resource
//! templates (their variables filled from the URI template, benign values and, when
//! adversarial payloads are on, paths to the decoy home's secrets), and every prompt (its
//! arguments synthesized like a tool's). Each read is a request in its own attribution window,
//! like a tool call, so what the server does while answering it is attributed to it; its text
//! goes through the content checks (orders to the model, credentials) and the canary search.
//!
//! Guarantees: at most [`MAX_RESOURCES`] resources, [`MAX_TEMPLATES`] templates and
//! [`MAX_PROMPTS`] prompts are read, each under the call timeout and within the session's
//! budget; a failed read is recorded and never ends the session.

use std::time::Instant;

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Map, Value, json};
use warden_events::EventKind;

use super::{Client, Ctx, inspect, ms};

/// Resources read, at most.
pub const MAX_RESOURCES: usize = 50;
/// Resource templates tried, at most.
pub const MAX_TEMPLATES: usize = 10;
/// Prompts got, at most.
pub const MAX_PROMPTS: usize = 30;

/// Values tried in a template variable to reach outside what it should serve: the decoy
/// home's secrets, by absolute path and by traversal.
fn reaching() -> [String; 2] {
    let home = warden_jail::persona::home();
    [
        format!("{home}/.aws/credentials"),
        format!("../../../../../../..{home}/.ssh/id_rsa"),
    ]
}

/// Read what the model would read besides tool metadata and results.
pub(super) async fn read_all(ctx: &mut Ctx<'_>, client: &Client, resources: &[Value]) {
    for r in resources.iter().take(MAX_RESOURCES) {
        let (Some(uri), name) = (r["uri"].as_str(), r["name"].as_str().unwrap_or("?")) else {
            continue;
        };
        read_resource(ctx, client, &format!("resource:{name}"), uri, None).await;
    }
    let limit = ctx.settings.call_timeout.min(ctx.left());
    if let Ok(Ok(templates)) =
        tokio::time::timeout(limit, client.list_all_resource_templates()).await
    {
        for t in templates.iter().take(MAX_TEMPLATES) {
            let name = format!("template:{}", t.name);
            if let Some(uri) = expand(&t.uri_template) {
                read_resource(ctx, client, &name, &uri, None).await;
            }
            if ctx.settings.adversarial {
                for value in reaching() {
                    let uri = substitute(&t.uri_template, &value);
                    read_resource(ctx, client, &name, &uri, Some(&value)).await;
                }
            }
        }
    }
    let limit = ctx.settings.call_timeout.min(ctx.left());
    if let Ok(Ok(prompts)) = tokio::time::timeout(limit, client.list_all_prompts()).await {
        for p in prompts.iter().take(MAX_PROMPTS) {
            let mut arguments = Map::new();
            for a in p.arguments.iter().flatten() {
                let schema = json!({
                    "type": "object",
                    "properties": { &a.name: { "type": "string",
                                               "description": a.description.clone().unwrap_or_default() } },
                    "required": [&a.name],
                });
                arguments.extend(crate::args::benign_for_user(&schema, ctx.marker.as_deref()));
            }
            get_prompt(ctx, client, &p.name, arguments).await;
        }
    }
}

/// Open a window for one read; its id and window name.
fn open(ctx: &mut Ctx<'_>, label: &str, data: Value) -> anyhow::Result<(Option<u64>, String)> {
    ctx.session.call_seq += 1;
    let fallback = format!("tool_call:unrecorded-{}", ctx.session.call_seq);
    let (id, _) =
        ctx.link
            .record_then_window(EventKind::McpToolCall, data, "tool_call:", &fallback)?;
    let window = id.map_or(fallback, |id| format!("tool_call:{id}"));
    ctx.session.windows.insert(window.clone(), label.to_owned());
    Ok((id, window))
}

/// Close the window and record how the read went.
fn close(
    ctx: &Ctx<'_>,
    request: &str,
    label: &str,
    id: Option<u64>,
    started: Instant,
    error: Option<String>,
) {
    let _ = ctx.link.window(None);
    ctx.record(
        EventKind::McpTiming,
        json!({ "phase": request, "tool": label, "call": id, "ms": ms(started),
                "is_error": error.is_some(),
                "error": error.as_deref().map(super::kept) }),
    );
}

async fn read_resource(
    ctx: &mut Ctx<'_>,
    client: &Client,
    label: &str,
    uri: &str,
    reaching: Option<&str>,
) {
    if ctx.left().is_zero() {
        return;
    }
    ctx.progress(&format!("reading {label}"));
    let data = json!({ "tool": label, "kind": if reaching.is_some() { "path_traversal" } else { "read" },
                       "request": "resources/read", "arguments": { "uri": uri } });
    let Ok((id, _)) = open(ctx, label, data) else {
        return;
    };
    let started = Instant::now();
    let limit = ctx.settings.call_timeout.min(ctx.left());
    let result = tokio::time::timeout(
        limit,
        client.read_resource(ReadResourceRequestParams::new(uri)),
    )
    .await;
    let (text, error) = match result {
        Ok(Ok(r)) => (serde_json::to_string(&r).unwrap_or_default(), None),
        Ok(Err(e)) => (String::new(), Some(e.to_string())),
        Err(_) => (String::new(), Some("timed out".into())),
    };
    close(ctx, "resource_read", label, id, started, error.clone());
    let text: String = text.chars().take(super::MAX_OUTPUT).collect();
    let source = if error.is_some() { "error" } else { "resource" };
    let shown = error.unwrap_or(text);
    inspect(ctx, source, label, id, &shown, reaching);
}

async fn get_prompt(ctx: &mut Ctx<'_>, client: &Client, name: &str, arguments: Map<String, Value>) {
    if ctx.left().is_zero() {
        return;
    }
    let label = format!("prompt:{name}");
    ctx.progress(&format!("getting {label}"));
    let data =
        json!({ "tool": label, "kind": "read", "request": "prompts/get", "arguments": arguments });
    let Ok((id, _)) = open(ctx, &label, data) else {
        return;
    };
    let started = Instant::now();
    let mut params = GetPromptRequestParams::new(name);
    params.arguments = Some(arguments);
    let limit = ctx.settings.call_timeout.min(ctx.left());
    let result = tokio::time::timeout(limit, client.get_prompt(params)).await;
    let (text, error) = match result {
        Ok(Ok(r)) => (serde_json::to_string(&r).unwrap_or_default(), None),
        Ok(Err(e)) => (String::new(), Some(e.to_string())),
        Err(_) => (String::new(), Some("timed out".into())),
    };
    close(ctx, "prompt_get", &label, id, started, error.clone());
    let text: String = text.chars().take(super::MAX_OUTPUT).collect();
    let source = if error.is_some() { "error" } else { "prompt" };
    let shown = error.unwrap_or(text);
    inspect(ctx, source, &label, id, &shown, None);
}

/// A benign value for a template variable, by its name.
fn benign_value(var: &str) -> &'static str {
    let v = var.to_ascii_lowercase();
    if v.contains("path") || v.contains("file") {
        "README.md"
    } else if v.contains("id") || v.contains("num") || v.contains("page") {
        "1"
    } else if v.contains("url") || v.contains("uri") {
        "http://127.0.0.1/"
    } else {
        "example"
    }
}

/// The template expanded (RFC 6570) with benign values for its variables.
fn expand(template: &str) -> Option<String> {
    use iri_string::spec::UriSpec;
    use iri_string::template::UriTemplateStr;
    use iri_string::template::simple_context::SimpleContext;
    let t = UriTemplateStr::new(template).ok()?;
    let mut context = SimpleContext::new();
    for var in variables(template) {
        context.insert(var.clone(), benign_value(&var));
    }
    t.expand::<UriSpec, _>(&context).ok().map(|e| e.to_string())
}

/// The names of a template's variables (`{a,b}`, `{+path}`, `{?q}`, `{name*}`, `{x:3}`).
fn variables(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let inner =
            rest[open + 1..open + close].trim_start_matches(['+', '#', '.', '/', ';', '?', '&']);
        for v in inner.split(',') {
            let name = v.split([':', '*']).next().unwrap_or("").trim();
            if !name.is_empty() && !out.iter().any(|o| o == name) {
                out.push(name.to_owned());
            }
        }
        rest = &rest[open + close + 1..];
    }
    out
}

/// The template with every expression replaced by `value` as is (no percent-encoding): how a
/// careless server that pastes the variable into a path would be reached.
fn substitute(template: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(value);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_filled() {
        assert_eq!(
            expand("file:///{path}").as_deref(),
            Some("file:///README.md")
        );
        assert_eq!(
            expand("notes://{user_id}/list{?page}").as_deref(),
            Some("notes://1/list?page=1")
        );
        assert_eq!(
            variables("x://{+path}/{a,b}{?q*}"),
            vec!["path", "a", "b", "q"]
        );
        assert_eq!(
            substitute("file:///{path}", "../../etc/passwd"),
            "file:///../../etc/passwd"
        );
    }
}
