//! The rule format: one YAML document per rule, validated when loaded.
//!
//! ```yaml
//! id: canary-in-dns
//! category: data_exfiltration
//! severity: critical
//! basis: consequence       # consequence | shape: a shape is never above medium
//! falsepositives: []       # what honest software shows the same (required of shapes)
//! match:
//!   kinds: [canary.seen]
//!   window: any            # install | startup | tool_call | any
//!   where:
//!     data.where: { equals: dns }
//!     data.planted: { glob: "env:*" }
//! threshold: 1             # matching events needed in one window
//! message: "{data.planted} left in a DNS query for {data.name}"
//! recommendation: Do not run this server with real credentials.
//! ```
//!
//! A rule can also require other matches beside its own (`correlate`): every part must match
//! an event whose `key` field equals the `key` field of one of the rule's own matches, in the
//! same session (`within: session`) or the same window (`within: window`); the finding's
//! evidence is the whole chain (a decoy read *and* its canary leaving).
//!
//! Conditions name a field by dotted path (`kind`, `pid`, `triggered_by`, `data.a.b`) and test
//! it with `equals`, `not_equals`, `one_of`, `not_one_of`, `glob`, `not_glob`, `regex`,
//! `not_regex`, `contains`, `not_contains`, `gt`, `gte`, `lt`, `lte` or `exists`; all tests of all conditions
//! must hold. A glob names the decoy home's files as `~/…` (`~/.ssh/**`): the path a trace
//! records under the home its `sandbox.started` names (`/home/alex/.ssh/id_rsa`) is matched as
//! `~/.ssh/id_rsa`, whoever the chamber's user was. Unknown keys, kinds, categories and severities, bad globs and bad regexes are
//! errors with the file and line.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_events::{Basis, Category, EventKind, Severity};

/// Which attribution window an event must fall in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WindowFilter {
    /// Any window, or none.
    #[default]
    Any,
    /// Installing the package.
    Install,
    /// Starting the server.
    Startup,
    /// Any tool call.
    ToolCall,
    /// Outside the install and startup windows (tool calls and the rest of the session).
    AfterStartup,
}

impl WindowFilter {
    /// Whether an event attributed to `window` passes.
    pub fn admits(self, window: Option<&str>) -> bool {
        match self {
            WindowFilter::Any => true,
            WindowFilter::Install => window == Some("install"),
            WindowFilter::Startup => window == Some("startup"),
            WindowFilter::ToolCall => window.is_some_and(|w| w.starts_with("tool_call:")),
            WindowFilter::AfterStartup => !matches!(window, Some("install" | "startup")),
        }
    }
}

/// Tests on one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Equal to this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// Not equal to this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_equals: Option<Value>,
    /// Equal to one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
    /// Equal to none of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_one_of: Option<Vec<Value>>,
    /// A string matching one of these globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<Globs>,
    /// Missing, or a string matching none of these globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_glob: Option<Globs>,
    /// A string matching this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Missing, or a string not matching this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_regex: Option<String>,
    /// A string containing this, or an array with this element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<Value>,
    /// Missing, or a string not containing this, or an array without this element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_contains: Option<Value>,
    /// A number greater than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// A number at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gte: Option<f64>,
    /// A number less than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// A number at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lte: Option<f64>,
    /// Present and not null (`true`), or absent or null (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
}

/// One glob or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Globs {
    /// One pattern.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

impl Globs {
    /// The patterns.
    pub fn patterns(&self) -> Vec<&str> {
        match self {
            Globs::One(p) => vec![p.as_str()],
            Globs::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// Event kinds (any of them).
    pub kinds: Vec<EventKind>,
    /// The window the events must fall in.
    #[serde(default)]
    pub window: WindowFilter,
    /// Conditions on fields, by dotted path.
    #[serde(default, rename = "where")]
    pub conditions: BTreeMap<String, Condition>,
}

/// Where the parts of a correlation must fall together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Within {
    /// Anywhere in the session.
    #[default]
    Session,
    /// In the same attribution window.
    Window,
}

/// One more match a correlated rule needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// Event kinds (any of them).
    pub kinds: Vec<EventKind>,
    /// The window the events must fall in.
    #[serde(default)]
    pub window: WindowFilter,
    /// Conditions on fields, by dotted path.
    #[serde(default, rename = "where")]
    pub conditions: BTreeMap<String, Condition>,
    /// The field (dotted path) that must equal the rule's own key.
    pub key: String,
}

/// Other matches a rule needs beside its own, joined on a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Correlate {
    /// The field (dotted path) of the rule's own matches that joins them to the parts.
    pub key: String,
    /// Session or window.
    #[serde(default)]
    pub within: Within,
    /// Every one of these must match too.
    pub all: Vec<Part>,
}

/// One detection rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Stable identifier (lower-case, digits and dashes); a rule file with the same id as a
    /// built-in rule replaces it.
    pub id: String,
    /// The finding category.
    pub category: Category,
    /// How bad a finding is.
    pub severity: Severity,
    /// Whether a match shows harm (`consequence`) or only its shape (`shape`, at most medium).
    pub basis: Basis,
    /// What honest software shows the same (Sigma's `falsepositives`): required of a shape,
    /// whose findings quote the first as the reason they are not higher.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub falsepositives: Vec<String>,
    /// Other matches needed beside this rule's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlate: Option<Correlate>,
    /// What to match.
    #[serde(rename = "match")]
    pub matcher: Match,
    /// Matching events needed in one window for a finding.
    #[serde(default = "one")]
    pub threshold: u32,
    /// The finding's message; `{path}` is replaced by that field of the first matching event.
    pub message: String,
    /// What the operator should do.
    pub recommendation: String,
    /// Whether the rule is off (a user file can switch a built-in rule off by id).
    #[serde(default)]
    pub disabled: bool,
}

fn one() -> u32 {
    1
}
