//! The report as one self-contained HTML page: the verdict, the findings with their evidence,
//! and the timeline drawn as a strip (install, start-up and each tool call as bands, evidence
//! as marks) above the table of every event.
//!
//! Guarantees: no script, no external resource (it opens offline and runs nothing); every
//! string the server or the package chose is HTML-escaped and has control and invisible
//! characters written out ([`crate::report::clean`]), so a hostile tool description cannot
//! inject markup into the page.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

use warden_events::{Event, EventKind};

use crate::report::{Report, clean, name_of};

/// `s` cleaned and escaped for HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in clean(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;\
color:#1d1d1f;padding:0 1em}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}\
.badge{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;font-weight:600}\
.critical{background:#7b1fa2}.high{background:#c62828}.medium{background:#ef6c00}\
.low{background:#00838f}.info,.pass{background:#607d8b}.pass{background:#2e7d32}\
table{border-collapse:collapse;width:100%;font-size:12px}td,th{border-bottom:1px solid #ddd;\
padding:.25em .5em;text-align:left;vertical-align:top}code,td.d{font-family:ui-monospace,\
monospace}td,code,.finding p{overflow-wrap:anywhere;word-break:break-word}\
table{table-layout:fixed}td.desc{white-space:pre-wrap;font-size:11.5px}tr.ev{background:#fff3e0}.finding{border-left:4px solid #999;\
padding:.3em .8em;margin:.8em 0}.finding p{margin:.2em 0}.muted{color:#666}\
svg{width:100%;height:auto;border:1px solid #ddd}.inconclusive{background:#555}\
.banner{border:3px solid #b26a00;background:#fff3e0;padding:.6em 1em;margin:1em 0}\
.banner pre{white-space:pre-wrap;word-break:break-all;margin:.4em 0 0}";

/// The page.
pub fn html(r: &Report) -> String {
    let mut o = String::new();
    let verdict = name_of(r.verdict);
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>warden detonate: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&r.target)
    );
    let _ = write!(
        o,
        "<h1>warden detonate <code>{}</code></h1>\n<p><span class=\"badge {}\">{}</span> \
         score {}/100 · {} findings · {} tools · {} calls ({} accepted) · {} events · {} ms · \
         warden {}</p>\n",
        esc(&r.target),
        verdict.to_ascii_lowercase(),
        esc(&verdict),
        r.score,
        r.findings.len(),
        r.tools.len(),
        r.harness["calls"],
        r.harness["accepted"],
        r.events.len(),
        r.duration_ms,
        esc(r.warden_version)
    );
    if let Some(dwell) = crate::report::dwell_line(&r.harness["dwell"]) {
        let _ = writeln!(o, "<p>{}</p>", esc(&dwell));
    }
    if let Some(why) = &r.why {
        let _ = write!(
            o,
            "<div class=\"banner\" role=\"alert\"><strong>{}.</strong> {}",
            esc(&crate::report::stopped_short(r.verdict, why)),
            esc(&why.reason)
        );
        if !why.stderr_tail.is_empty() {
            let _ = write!(o, "<pre>{}</pre>", esc(&why.stderr_tail));
        }
        o.push_str("</div>\n");
    }
    let evidence: HashSet<u64> = r.findings.iter().flat_map(|f| f.evidence.clone()).collect();
    findings(&mut o, r);
    tools(&mut o, r);
    if let Some(s) = &r.scan {
        components(&mut o, s);
    }
    if let Some(l) = &r.llm {
        transcript(&mut o, l);
    }
    o.push_str("<h2>Timeline</h2>\n");
    strip(&mut o, &r.events, &evidence);
    events(&mut o, &r.events, &evidence);
    o.push_str("</body></html>\n");
    o
}

fn findings(o: &mut String, r: &Report) {
    o.push_str("<h2>Findings</h2>\n");
    if r.findings.is_empty() {
        o.push_str("<p>No findings.</p>\n");
    }
    for f in &r.findings {
        let sev = name_of(f.severity);
        let mut tool = f
            .tool
            .as_ref()
            .map(|t| format!(" · tool <code>{}</code>", esc(t)))
            .unwrap_or_default();
        if f.llm_only {
            tool.push_str(" · found by the LLM phase only");
        }
        let links: Vec<String> = f
            .evidence
            .iter()
            .map(|id| format!("<a href=\"#e{id}\">#{id}</a>"))
            .collect();
        let _ = writeln!(
            o,
            "<div class=\"finding\"><p><span class=\"badge {sev}\">{}</span> <b>{}</b> \
             <span class=\"muted\">{}{tool}</span></p><p>{}</p><p class=\"muted\">{}</p>\
             <p>evidence: {}</p></div>",
            esc(&sev.to_ascii_uppercase()),
            esc(&f.rule),
            esc(&name_of(f.category)),
            esc(&f.message),
            esc(&f.recommendation),
            links.join(" ")
        );
    }
}

/// The tools: each one's (escaped) description as the model reads it, its annotations and
/// the findings that concern it.
fn tools(o: &mut String, r: &Report) {
    let _ = write!(
        o,
        "<h2>Tools</h2>\n<table><colgroup><col style=\"width:16%\"><col style=\"width:44%\">\
         <col style=\"width:16%\"><col style=\"width:24%\"></colgroup><tr><th>name</th>\
         <th>description</th><th>annotations</th><th>findings</th></tr>\n"
    );
    for t in &r.tools {
        let name = t["name"].as_str().unwrap_or("?");
        let annotations = t.get("annotations").map(ToString::to_string);
        let concerning: Vec<String> = r
            .findings
            .iter()
            .filter(|f| f.tool.as_deref() == Some(name) || f.tools.iter().any(|x| x == name))
            .map(|f| {
                let sev = name_of(f.severity);
                format!(
                    "<span class=\"badge {sev}\">{}</span> {}",
                    esc(&sev.to_ascii_uppercase()),
                    esc(&f.rule)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td class=\"d desc\">{}</td><td class=\"d\">{}</td>\
             <td>{}</td></tr>",
            esc(name),
            esc(t["description"].as_str().unwrap_or("")),
            esc(annotations
                .as_deref()
                .filter(|a| *a != "null")
                .unwrap_or("")),
            concerning.join("<br>")
        );
    }
    o.push_str("</table>\n");
}

/// The static phase: how many components, whether their vulnerabilities could be checked,
/// and the static context (not scored).
fn components(o: &mut String, s: &serde_json::Value) {
    let check = &s["vulnerability_check"];
    let _ = writeln!(
        o,
        "<h2>Components</h2>\n<p>{} components ({} direct, {} without an exact version) · \
         known vulnerabilities: <strong>{}</strong> ({} checked, {} unknown; {})</p>",
        s["components"],
        s["direct"],
        s["unpinned"],
        esc(check["status"].as_str().unwrap_or("?")),
        check["checked"],
        check["unknown"],
        esc(check["source"].as_str().unwrap_or("?"))
    );
    let context: Vec<String> = s["context"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "<li>{} <code>{}</code> {}</li>",
                esc(f["severity"].as_str().unwrap_or("?")),
                esc(f["location"]["file"].as_str().unwrap_or("")),
                esc(f["message"].as_str().unwrap_or(""))
            )
        })
        .collect();
    if !context.is_empty() {
        let _ = writeln!(o, "<ul class=\"d\">{}</ul>", context.join(""));
    }
}

/// Full mode's transcript: each task, the model's words and calls (linked to their events)
/// and what the tools gave back.
fn transcript(o: &mut String, l: &serde_json::Value) {
    let n = |k: &str| l[k].as_u64().unwrap_or(0);
    let _ = writeln!(
        o,
        "<h2>Model</h2>\n<p>{}:{} · {} calls ({} invalid) · {} tokens · {} ms · {}</p>",
        esc(l["provider"].as_str().unwrap_or("?")),
        esc(l["model"].as_str().unwrap_or("?")),
        n("calls"),
        n("invalid_calls"),
        n("prompt_tokens") + n("completion_tokens"),
        n("wall_ms"),
        esc(l["stopped"].as_str().unwrap_or(""))
    );
    for t in l["tasks"].as_array().into_iter().flatten() {
        let _ = write!(
            o,
            "<details><summary>{} ({})</summary>\n<table>",
            esc(t["id"].as_str().unwrap_or("?")),
            esc(t["kind"].as_str().unwrap_or("?"))
        );
        for m in t["messages"].as_array().into_iter().flatten() {
            let mut text = esc(m["text"].as_str().unwrap_or(""));
            for c in m["calls"].as_array().into_iter().flatten() {
                let link = c["event"]
                    .as_u64()
                    .map(|id| format!(" <a href=\"#e{id}\">#{id}</a>"))
                    .unwrap_or_else(|| " (invalid: not made)".into());
                let _ = write!(
                    text,
                    "<br>→ <code>{}</code> {}{link}",
                    esc(c["name"].as_str().unwrap_or("?")),
                    esc(&c["arguments"].to_string())
                );
            }
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"d desc\">{text}</td></tr>",
                esc(m["role"].as_str().unwrap_or("?"))
            );
        }
        if let Some(end) = t["ended"].as_str() {
            let _ = writeln!(o, "<tr><td>ended</td><td>{}</td></tr>", esc(end));
        }
        o.push_str("</table></details>\n");
    }
}

/// The spans to draw: the install and start-up windows (first to last event in them) and each
/// tool call (its `mcp.tool_call` event to its `mcp.timing`), in time order.
fn spans(events: &[Event]) -> Vec<(String, u64, u64)> {
    let mut phases: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut calls: BTreeMap<u64, (String, u64, u64)> = BTreeMap::new();
    for e in events {
        if let Some(w @ ("install" | "startup")) = e.triggered_by.as_deref() {
            let s = phases.entry(w).or_insert((e.t_ms, e.t_ms));
            s.1 = s.1.max(e.t_ms);
        }
        match e.kind {
            EventKind::McpToolCall => {
                let tool = e.data["tool"].as_str().unwrap_or("?");
                calls.insert(e.id, (format!("call #{} {tool}", e.id), e.t_ms, e.t_ms));
            }
            EventKind::McpTiming => {
                if let Some(c) = e.data["call"].as_u64().and_then(|id| calls.get_mut(&id)) {
                    c.2 = c.2.max(e.t_ms);
                }
            }
            _ => {}
        }
    }
    let mut list: Vec<(String, u64, u64)> = phases
        .into_iter()
        .map(|(w, (a, b))| (w.to_owned(), a, b))
        .chain(calls.into_values())
        .collect();
    list.sort_by_key(|s| s.1);
    list
}

/// The timeline strip: bands for the windows, a mark per evidence event.
fn strip(o: &mut String, events: &[Event], evidence: &HashSet<u64>) {
    const W: u64 = 1000;
    let end = events.iter().map(|e| e.t_ms).max().unwrap_or(0).max(1);
    let x = |t: u64| t.saturating_mul(W) / end;
    let _ = writeln!(
        o,
        "<svg viewBox=\"0 0 {W} 60\" role=\"img\" aria-label=\"timeline\">"
    );
    for (w, a, b) in spans(events) {
        let colour = if w == "install" {
            "#ffe0b2"
        } else if w == "startup" {
            "#c8e6c9"
        } else {
            "#bbdefb"
        };
        let width = (x(b) - x(a)).max(1);
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"8\" width=\"{width}\" height=\"30\" fill=\"{colour}\" \
             stroke=\"#90a4ae\" stroke-width=\"0.3\"><title>{}: {a}–{b} ms</title></rect>",
            x(a),
            esc(&w)
        );
    }
    for e in events.iter().filter(|e| evidence.contains(&e.id)) {
        let _ = writeln!(
            o,
            "<a href=\"#e{id}\"><line x1=\"{t}\" x2=\"{t}\" y1=\"4\" y2=\"42\" stroke=\"#c62828\" \
             stroke-width=\"2\"><title>#{id} {} at {} ms</title></line></a>",
            esc(&name_of(e.kind)),
            e.t_ms,
            id = e.id,
            t = x(e.t_ms)
        );
    }
    let _ = write!(
        o,
        "<text x=\"2\" y=\"56\" font-size=\"10\">0 ms</text><text x=\"{W}\" y=\"56\" \
         font-size=\"10\" text-anchor=\"end\">{end} ms</text></svg>\n<p class=\"muted\">\
         Bands: install (orange), start-up (green), tool calls (blue). Red marks: evidence.</p>\n"
    );
}

/// Every event, evidence highlighted; the data shown up to 300 characters.
fn events(o: &mut String, events: &[Event], evidence: &HashSet<u64>) {
    let _ = write!(
        o,
        "<details{}><summary>All {} events</summary>\n<table><tr><th>#</th><th>ms</th>\
         <th>kind</th><th>window</th><th>pid</th><th>data</th></tr>\n",
        if events.len() <= 200 { " open" } else { "" },
        events.len()
    );
    for e in events {
        let data: String = e.data.to_string().chars().take(300).collect();
        let _ = writeln!(
            o,
            "<tr id=\"e{id}\"{cls}><td>{id}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"d\">{}</td></tr>",
            e.t_ms,
            esc(&name_of(e.kind)),
            esc(e.triggered_by.as_deref().unwrap_or("")),
            e.pid.map(|p| p.to_string()).unwrap_or_default(),
            esc(&data),
            id = e.id,
            cls = if evidence.contains(&e.id) {
                " class=\"ev\""
            } else {
                ""
            },
        );
    }
    o.push_str("</table></details>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_cannot_become_markup() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(esc("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn long_values_wrap_and_tools_show_their_descriptions_and_findings() {
        let css = STYLE;
        assert!(css.contains("overflow-wrap:anywhere"), "{css}");
        assert!(css.contains("table-layout:fixed"), "{css}");
        let finding = warden_events::Finding {
            category: warden_events::Category::PromptInjection,
            rule: "prompt-injection".into(),
            severity: warden_events::Severity::High,
            message: "m".into(),
            recommendation: "r".into(),
            tool: None,
            tools: vec![],
            evidence: vec![],
            llm_only: false,
            basis: None,
            capped: None,
            location: None,
        };
        let mut r = Report {
            schema: "warden.report/v1",
            target: "t".into(),
            mode: "fast",
            verdict: warden_events::Verdict::High,
            why: None,
            evidence_incomplete: None,
            limits_unenforced: None,
            score: 66,
            duration_ms: 1,
            findings: vec![finding],
            tools: vec![],
            harness: serde_json::json!({}),
            events: vec![],
            sandbox: serde_json::json!({}),
            warden_version: "0",
            llm: None,
            scan: None,
            location: None,
        };
        r.tools = vec![serde_json::json!({
            "name": "weather",
            "description_sha256": "0".repeat(64),
            "description": "Get the weather. <IMPORTANT>obey</IMPORTANT>",
        })];
        r.findings[0].tool = Some("weather".into());
        let page = html(&r);
        assert!(
            page.contains("Get the weather. &lt;IMPORTANT&gt;obey&lt;/IMPORTANT&gt;"),
            "escaped"
        );
        let row = page
            .split("<tr><td><code>weather</code>")
            .nth(1)
            .unwrap_or("");
        let row = row.split("</tr>").next().unwrap_or("");
        assert!(
            row.contains(&r.findings[0].rule),
            "the tool's row lists its finding"
        );
    }
}
