//! Evaluating rules: events in, findings out. Each rule groups its matching events by the tool
//! whose call they happened in (or, outside tool calls, by attribution window); a group with at
//! least `threshold` matches gives one finding whose evidence is the matching events' ids (at
//! most [`MAX_EVIDENCE`]). A correlated rule keeps only the matches its parts complete (joined
//! on their keys), and its evidence is the whole chain. Every finding carries its rule's basis;
//! a shape's says why it is not higher (its rule's first false positive).

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex_lite::Regex;
use serde_json::Value;
use warden_events::{Basis, Event, EventKind, Finding};

use crate::rule::{Condition, Rule, WindowFilter, Within};

/// Evidence ids kept per finding, at most.
pub const MAX_EVIDENCE: usize = 20;

/// A validated rule, ready to run.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The rule as written.
    pub rule: Rule,
    conditions: Conditions,
    /// The correlation's parts: kinds, window, conditions and key.
    parts: Vec<(Vec<EventKind>, WindowFilter, Conditions, Vec<String>)>,
    /// The rule's own key, when it correlates.
    key: Vec<String>,
}

type Conditions = Vec<(Vec<String>, CompiledCondition)>;

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

fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_owned).collect()
}

fn compile(
    conditions: &std::collections::BTreeMap<String, Condition>,
) -> Result<Conditions, (String, String)> {
    let mut out = Vec::new();
    for (path, c) in conditions {
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
        out.push((split(path), compiled));
    }
    Ok(out)
}

fn admits(
    kinds: &[EventKind],
    window: WindowFilter,
    conditions: &Conditions,
    event: &Event,
    home: &str,
) -> bool {
    kinds.contains(&event.kind)
        && window.admits(event.triggered_by.as_deref())
        && conditions
            .iter()
            .all(|(path, c)| c.holds(field(event, path).as_deref(), home))
}

/// The decoy home of a trace's paths when its first event does not say (traces written before
/// the chamber drew a persona).
pub const DEFAULT_HOME: &str = "/home/sandbox";

/// The decoy home the paths of `events` name: the `home` of their `sandbox.started`.
pub fn home_of(events: &[Event]) -> &str {
    events
        .iter()
        .find(|e| e.kind == EventKind::SandboxStarted)
        .and_then(|e| e.data["home"].as_str())
        .filter(|h| h.starts_with("/home/"))
        .unwrap_or(DEFAULT_HOME)
}

/// `text` as a glob sees it: a path in `home` is written `~/…` (so a rule names the user's
/// files whoever the chamber's user is), anything else unchanged.
fn tilde<'a>(text: &'a str, home: &str) -> std::borrow::Cow<'a, str> {
    match text.strip_prefix(home) {
        Some("") => "~".into(),
        Some(rest) if rest.starts_with('/') => format!("~{rest}").into(),
        _ => text.into(),
    }
}

impl Compiled {
    /// Compile `rule`; errors carry a text to find the offending line by, and a message.
    pub fn new(rule: Rule) -> Result<Compiled, (String, String)> {
        let conditions = compile(&rule.matcher.conditions)?;
        let mut parts = Vec::new();
        let mut key = Vec::new();
        if let Some(c) = &rule.correlate {
            key = split(&c.key);
            for p in &c.all {
                parts.push((
                    p.kinds.clone(),
                    p.window,
                    compile(&p.conditions)?,
                    split(&p.key),
                ));
            }
        }
        Ok(Compiled {
            rule,
            conditions,
            parts,
            key,
        })
    }

    /// Whether `event` matches the rule's own match (a correlated rule needs its parts too:
    /// see [`evaluate`]).
    pub fn matches(&self, event: &Event) -> bool {
        self.matches_in(event, DEFAULT_HOME)
    }

    /// [`Compiled::matches`] for a trace whose decoy home is `home` (see [`home_of`]).
    pub fn matches_in(&self, event: &Event, home: &str) -> bool {
        let m = &self.rule.matcher;
        admits(&m.kinds, m.window, &self.conditions, event, home)
    }

    /// The events that complete `own` (this rule's matches): for each of them whose key every
    /// part matches too (in the same session or window), it and one event per part. Empty when
    /// no match is completed. A rule without `correlate` keeps `own` as it is.
    fn complete<'a>(&self, own: &[&'a Event], events: &'a [Event], home: &str) -> Vec<&'a Event> {
        let Some(c) = &self.rule.correlate else {
            return own.to_vec();
        };
        let mut chain: Vec<&Event> = Vec::new();
        for e in own {
            let Some(k) = field(e, &self.key) else {
                continue;
            };
            let same_scope =
                |x: &Event| c.within == Within::Session || x.triggered_by == e.triggered_by;
            let found: Option<Vec<&Event>> = self
                .parts
                .iter()
                .map(|(kinds, window, conditions, key)| {
                    events.iter().find(|x| {
                        same_scope(x)
                            && admits(kinds, *window, conditions, x, home)
                            && field(x, key).is_some_and(|v| v == k)
                    })
                })
                .collect();
            if let Some(found) = found {
                chain.push(e);
                for x in found {
                    if !chain.iter().any(|y| y.id == x.id) {
                        chain.push(x);
                    }
                }
            }
        }
        chain
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
    fn holds(&self, v: Option<&Value>, home: &str) -> bool {
        let c = &self.raw;
        let text = v.and_then(Value::as_str);
        let path = text.map(|t| tilde(t, home));
        let path = path.as_deref();
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
                .is_none_or(|g| path.is_some_and(|t| g.is_match(t)))
            && self
                .not_glob
                .as_ref()
                .is_none_or(|g| path.is_none_or(|t| !g.is_match(t)))
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
            && c.not_contains.as_ref().is_none_or(|x| match (v, x) {
                (Some(Value::String(s)), Value::String(n)) => !s.contains(n.as_str()),
                (Some(Value::Array(a)), x) => !a.contains(x),
                _ => true,
            })
            && c.gt.is_none_or(|x| num.is_some_and(|n| n > x))
            && c.gte.is_none_or(|x| num.is_some_and(|n| n >= x))
            && c.lt.is_none_or(|x| num.is_some_and(|n| n < x))
            && c.lte.is_none_or(|x| num.is_some_and(|n| n <= x))
    }
}

/// `template` with each `{dotted.path}` replaced by that field of `event` (`?` when it is
/// missing, or the text after a `|`: `{data.during|the run}`).
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
        // `{data.a.b|fallback}`: the fallback when the field is missing (else `?`).
        let inner = &rest[start + 1..start + len];
        let (field_path, fallback) = inner.split_once('|').unwrap_or((inner, "?"));
        let path: Vec<String> = field_path.split('.').map(str::to_owned).collect();
        let shown = match lookup(&value, &path) {
            Some(Value::String(s)) => s.chars().take(200).collect(),
            Some(v) => v.to_string().chars().take(200).collect(),
            None => fallback.to_owned(),
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
    let home = home_of(events);
    for r in rules {
        // One finding per rule and tool (events outside any tool call: per window).
        let mut groups: Vec<(String, Option<String>, Vec<&Event>)> = Vec::new();
        for e in events.iter().filter(|e| r.matches_in(e, home)) {
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
            let list = r.complete(&list, events, home);
            let Some(first) = list.first().copied() else {
                continue;
            };
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
                basis: Some(r.rule.basis),
                capped: (r.rule.basis == Basis::Shape)
                    .then(|| r.rule.falsepositives.first().cloned())
                    .flatten(),
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
