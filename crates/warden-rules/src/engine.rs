//! Evaluating rules: events in, findings out. Each rule groups its matching events by the tool
//! whose call they happened in (or, outside tool calls, by attribution window); a group with at
//! least `threshold` matches gives one finding whose evidence is the matching events' ids (at
//! most [`MAX_EVIDENCE`]).

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex_lite::Regex;
use serde_json::Value;
use warden_events::{Event, Finding};

use crate::rule::{Condition, Rule};

/// Evidence ids kept per finding, at most.
pub const MAX_EVIDENCE: usize = 20;

/// A validated rule, ready to run.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The rule as written.
    pub rule: Rule,
    conditions: Vec<(Vec<String>, CompiledCondition)>,
}

#[derive(Debug, Clone)]
struct CompiledCondition {
    raw: Condition,
    glob: Option<GlobSet>,
    not_glob: Option<GlobSet>,
    regex: Option<Regex>,
    not_regex: Option<Regex>,
}

fn globset(patterns: &[&str]) -> Result<GlobSet, (String, String)> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = Glob::new(p).map_err(|e| ((*p).to_owned(), format!("glob {p:?}: {e}")))?;
        b.add(g);
    }
    b.build()
        .map_err(|e| (String::new(), format!("globs: {e}")))
}

fn regex(r: &str) -> Result<Regex, (String, String)> {
    Regex::new(r).map_err(|e| (r.to_owned(), format!("regex {r:?}: {e}")))
}

impl Compiled {
    /// Compile `rule`; errors carry a text to find the offending line by, and a message.
    pub fn new(rule: Rule) -> Result<Compiled, (String, String)> {
        let mut conditions = Vec::new();
        for (path, c) in &rule.matcher.conditions {
            let compiled = CompiledCondition {
                raw: c.clone(),
                glob: c
                    .glob
                    .as_ref()
                    .map(|g| globset(&g.patterns()))
                    .transpose()?,
                not_glob: c
                    .not_glob
                    .as_ref()
                    .map(|g| globset(&g.patterns()))
                    .transpose()?,
                regex: c.regex.as_deref().map(regex).transpose()?,
                not_regex: c.not_regex.as_deref().map(regex).transpose()?,
            };
            conditions.push((path.split('.').map(str::to_owned).collect(), compiled));
        }
        Ok(Compiled { rule, conditions })
    }

    /// Whether `event` matches.
    pub fn matches(&self, event: &Event) -> bool {
        let m = &self.rule.matcher;
        if !m.kinds.contains(&event.kind) || !m.window.admits(event.triggered_by.as_deref()) {
            return false;
        }
        self.conditions
            .iter()
            .all(|(path, c)| c.holds(field(event, path).as_deref()))
    }
}

/// The value at `path` in `event` (`kind`, `pid`, `triggered_by`, `id`, `t_ms` or `data.…`,
/// the paths the loader admits), read from its fields: nothing is serialised per match.
fn field<'a>(e: &'a Event, path: &[String]) -> Option<std::borrow::Cow<'a, Value>> {
    use std::borrow::Cow;
    let (first, rest) = path.split_first()?;
    let top: Value = match first.as_str() {
        "data" => return lookup(&e.data, rest).map(Cow::Borrowed),
        "kind" => serde_json::to_value(e.kind).ok()?,
        "pid" => e.pid?.into(),
        "triggered_by" => e.triggered_by.as_deref()?.into(),
        "id" => e.id.into(),
        "t_ms" => e.t_ms.into(),
        _ => return None,
    };
    rest.is_empty().then_some(Cow::Owned(top))
}

fn lookup<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |v, k| v.get(k.as_str()))
        .filter(|v| !v.is_null())
}

fn as_f64(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

impl CompiledCondition {
    fn holds(&self, v: Option<&Value>) -> bool {
        let c = &self.raw;
        let text = v.and_then(Value::as_str);
        let num = as_f64(v);
        c.exists.is_none_or(|e| e == v.is_some())
            && c.equals.as_ref().is_none_or(|x| v == Some(x))
            && c.not_equals.as_ref().is_none_or(|x| v != Some(x))
            && c.one_of
                .as_ref()
                .is_none_or(|l| v.is_some_and(|v| l.contains(v)))
            && c.not_one_of
                .as_ref()
                .is_none_or(|l| v.is_none_or(|v| !l.contains(v)))
            && self
                .glob
                .as_ref()
                .is_none_or(|g| text.is_some_and(|t| g.is_match(t)))
            && self
                .not_glob
                .as_ref()
                .is_none_or(|g| text.is_none_or(|t| !g.is_match(t)))
            && self
                .regex
                .as_ref()
                .is_none_or(|r| text.is_some_and(|t| r.is_match(t)))
            && self
                .not_regex
                .as_ref()
                .is_none_or(|r| text.is_none_or(|t| !r.is_match(t)))
            && c.contains.as_ref().is_none_or(|x| match (v, x) {
                (Some(Value::String(s)), Value::String(n)) => s.contains(n.as_str()),
                (Some(Value::Array(a)), x) => a.contains(x),
                _ => false,
            })
            && c.gt.is_none_or(|x| num.is_some_and(|n| n > x))
            && c.gte.is_none_or(|x| num.is_some_and(|n| n >= x))
            && c.lt.is_none_or(|x| num.is_some_and(|n| n < x))
            && c.lte.is_none_or(|x| num.is_some_and(|n| n <= x))
    }
}

/// `template` with each `{dotted.path}` replaced by that field of `event`.
pub fn render(template: &str, event: &Event) -> String {
    let value = serde_json::to_value(event).unwrap_or(Value::Null);
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let path: Vec<String> = rest[start + 1..start + len]
            .split('.')
            .map(str::to_owned)
            .collect();
        let shown = match lookup(&value, &path) {
            Some(Value::String(s)) => s.chars().take(200).collect(),
            Some(v) => v.to_string().chars().take(200).collect(),
            None => "?".to_owned(),
        };
        out.push_str(&shown);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Run `rules` over `events`. `tool_of` names the tool a window belongs to (if any).
pub fn evaluate(
    rules: &[Compiled],
    events: &[Event],
    tool_of: &dyn Fn(Option<&str>) -> Option<String>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for r in rules {
        // One finding per rule and tool (events outside any tool call: per window).
        let mut groups: Vec<(String, Option<String>, Vec<&Event>)> = Vec::new();
        for e in events.iter().filter(|e| r.matches(e)) {
            let tool = e
                .data
                .get("tool")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| tool_of(e.triggered_by.as_deref()));
            let key = match &tool {
                Some(t) => format!("tool:{t}"),
                None => format!("window:{}", e.triggered_by.as_deref().unwrap_or("")),
            };
            match groups.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, _, list)) => list.push(e),
                None => groups.push((key, tool, vec![e])),
            }
        }
        for (_, tool, list) in groups {
            if list.len() < r.rule.threshold as usize {
                continue;
            }
            let first = list[0];
            findings.push(Finding {
                category: r.rule.category,
                rule: r.rule.id.clone(),
                severity: r.rule.severity,
                message: render(&r.rule.message, first),
                recommendation: r.rule.recommendation.clone(),
                tool,
                tools: Vec::new(),
                evidence: list.iter().take(MAX_EVIDENCE).map(|e| e.id).collect(),
                llm_only: false,
                location: None,
            });
        }
    }
    let mut findings = group_across_tools(findings);
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(&b.rule)));
    findings
}

/// The same finding (rule and message) from several tools is one finding that lists them: a
/// server whose ten tools each start `git` has one finding, not ten.
fn group_across_tools(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for f in findings {
        let same = out.iter_mut().find(|g| {
            g.rule == f.rule && g.message == f.message && g.tool.is_some() && f.tool.is_some()
        });
        match same {
            Some(g) => {
                if g.tools.is_empty() {
                    g.tools.extend(g.tool.clone());
                }
                g.tools.extend(f.tool);
                let room = MAX_EVIDENCE.saturating_sub(g.evidence.len());
                g.evidence.extend(f.evidence.into_iter().take(room));
            }
            None => out.push(f),
        }
    }
    out
}
