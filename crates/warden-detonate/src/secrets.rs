//! Credentials in text the model reads (tool results, error messages, resource contents,
//! prompts): well-known token formats and high-entropy assignments, found with gitleaks'
//! published rule set (`data/gitleaks.toml`, MIT, kept as data and loaded unchanged: its
//! keywords, `secretGroup`, entropy thresholds, stop words and allowlists apply as gitleaks
//! applies them to content; path and commit criteria have no meaning here and never match).
//!
//! Guarantees: a rule is compiled once, when a text first holds one of its keywords; a rule
//! whose regex does not compile is skipped (a unit test checks that none is); every scan is bounded by the text it is given; a secret is never returned
//! whole — only the rule and a redacted form (its first four characters and its length).

use std::sync::LazyLock;

// Go's regexp (gitleaks') is ASCII-only for `\w`, `\s`, `\b`: byte regexes without Unicode
// classes read the rules as written, and compile an order of magnitude faster.
use regex::bytes::Regex;
use serde::Deserialize;

/// The published rule set, as gitleaks ships it.
const RULES: &str = include_str!("../data/gitleaks.toml");

/// gitleaks' rules that match an assignment by its key (`password = …`, `api_key: …`) rather
/// than a token of a known format: templates, documentation and example configurations match
/// them too, so what they find alone is a shape.
const GENERIC: &[&str] = &[
    "generic-api-key",
    "hashicorp-tf-password",
    "nuget-config-password",
    "kubernetes-secret-yaml",
];

/// Whether the gitleaks rule `id` matches assignments rather than a token format.
pub fn generic(id: &str) -> bool {
    GENERIC.contains(&id)
}

/// One credential found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    /// The gitleaks rule id (`aws-access-token`, `github-pat`, `generic-api-key`…).
    pub rule: String,
    /// The secret, redacted: `ghp_…(40 chars)`.
    pub redacted: String,
    /// Where it starts in the text (bytes).
    pub at: usize,
    /// The secret itself, for the caller's own comparisons (never reported).
    pub(crate) value: String,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    allowlist: AllowFile,
    #[serde(default)]
    rules: Vec<RuleFile>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AllowFile {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleFile {
    id: String,
    regex: Option<String>,
    #[serde(default)]
    secret_group: usize,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowFile>,
}

struct Allow {
    regexes: Lazy<Vec<Regex>>,
    stopwords: Vec<String>,
    /// `secret` (default), `match` or `line`.
    target: String,
    /// All criteria must hold (`AND`); otherwise any one does.
    all: bool,
    /// Path or commit criteria, which never hold on content.
    other_criteria: bool,
}

/// A value compiled on first use from its source (most rules never pass their keyword test).
struct Lazy<T> {
    source: Vec<String>,
    compiled: std::sync::OnceLock<T>,
}

impl Lazy<Vec<Regex>> {
    fn get(&self) -> &Vec<Regex> {
        self.compiled
            .get_or_init(|| self.source.iter().filter_map(|r| compile(r).ok()).collect())
    }
}

impl Lazy<Option<Regex>> {
    fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| self.source.first().and_then(|r| compile(r).ok()))
            .as_ref()
    }
}

fn lazy<T>(source: Vec<String>) -> Lazy<T> {
    Lazy {
        source,
        compiled: std::sync::OnceLock::new(),
    }
}

fn compile(re: &str) -> Result<Regex, regex::Error> {
    regex::bytes::RegexBuilder::new(re)
        .unicode(false)
        .size_limit(1 << 26)
        .build()
}

struct Rule {
    id: String,
    regex: Lazy<Option<Regex>>,
    secret_group: usize,
    entropy: Option<f64>,
    keywords: Vec<String>,
    allow: Vec<Allow>,
}

struct Set {
    rules: Vec<Rule>,
    global: Allow,
}

fn allow(a: AllowFile) -> Allow {
    Allow {
        regexes: lazy(a.regexes),
        stopwords: a.stopwords.iter().map(|s| s.to_lowercase()).collect(),
        target: a.regex_target.unwrap_or_else(|| "secret".into()),
        all: a.condition.as_deref() == Some("AND"),
        other_criteria: !a.paths.is_empty() || !a.commits.is_empty(),
    }
}

fn set() -> &'static Set {
    static SET: LazyLock<Set> = LazyLock::new(|| {
        let file: File = toml::from_str(RULES).unwrap_or(File {
            allowlist: AllowFile::default(),
            rules: Vec::new(),
        });
        let mut rules: Vec<Rule> = file
            .rules
            .into_iter()
            .filter_map(|r| {
                // Path-only rules (file names) say nothing about content.
                let re = r.regex?;
                Some(Rule {
                    id: r.id,
                    regex: lazy(vec![re]),
                    secret_group: r.secret_group,
                    entropy: r.entropy,
                    keywords: r.keywords.iter().map(|k| k.to_lowercase()).collect(),
                    allow: r.allowlists.into_iter().map(allow).collect(),
                })
            })
            .collect();
        // A value both a specific rule and a catch-all one match is the specific rule's.
        rules.sort_by_key(|r| r.id.starts_with("generic"));
        Set {
            rules,
            global: allow(file.allowlist),
        }
    });
    &SET
}

/// How many content rules are in force, and which of them do not compile (compiling all is
/// slow; a scan compiles only the rules whose keywords the text holds).
pub fn rule_count() -> (usize, Vec<String>) {
    let s = set();
    let broken = s
        .rules
        .iter()
        .filter(|r| r.regex.get().is_none())
        .map(|r| r.id.clone())
        .collect();
    (s.rules.len(), broken)
}

/// Shannon entropy of `s`, bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let n = s.chars().count() as f64;
    for c in s.chars() {
        *counts.entry(c).or_insert(0u32) += 1;
    }
    counts
        .values()
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

impl Allow {
    /// Whether this allowlist lets the finding go.
    fn allows(&self, secret: &str, matched: &[u8], line: &[u8]) -> bool {
        let target = match self.target.as_str() {
            "match" => matched,
            "line" => line,
            _ => secret.as_bytes(),
        };
        let lower = secret.to_lowercase();
        let mut results = Vec::new();
        if !self.regexes.source.is_empty() {
            results.push(self.regexes.get().iter().any(|r| r.is_match(target)));
        }
        if !self.stopwords.is_empty() {
            results.push(self.stopwords.iter().any(|w| lower.contains(w.as_str())));
        }
        if self.other_criteria {
            results.push(false);
        }
        if self.all {
            !results.is_empty() && results.iter().all(|r| *r)
        } else {
            results.iter().any(|r| *r)
        }
    }
}

/// The line of `text` around byte range `start..end`, at most [`LINE_WINDOW`] bytes each side.
fn line_of(text: &[u8], start: usize, end: usize) -> &[u8] {
    let lo = start.saturating_sub(LINE_WINDOW);
    let hi = (end + LINE_WINDOW).min(text.len());
    let a = text[lo..start]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(lo, |i| lo + i + 1);
    let b = text[end..hi]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(hi, |i| end + i);
    &text[a..b]
}

/// `secret` shown without giving it away.
fn redact(secret: &str) -> String {
    let head: String = secret.chars().take(4).collect();
    format!("{head}…({} chars)", secret.chars().count())
}

/// Credentials reported per text, at most: past a few, more say nothing new, and a hostile
/// text of thousands of tokens must cost bounded time.
pub const MAX_SECRETS: usize = 32;
/// Candidate matches examined per rule and text, at most.
const MAX_CANDIDATES: usize = 256;
/// Bytes of a line examined around a match, each side (a line-target allowlist).
const LINE_WINDOW: usize = 4096;

/// The credentials in `text`, once per distinct value, in order of appearance: at most
/// [`MAX_SECRETS`], from at most `MAX_CANDIDATES` matches per rule.
pub fn find(text: &str) -> Vec<Secret> {
    let set = set();
    let lower = text.to_lowercase();
    let mut out: Vec<Secret> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    'rules: for rule in &set.rules {
        if !rule.keywords.is_empty() && !rule.keywords.iter().any(|k| lower.contains(k.as_str())) {
            continue;
        }
        let Some(regex) = rule.regex.get() else {
            continue;
        };
        for caps in regex.captures_iter(text.as_bytes()).take(MAX_CANDIDATES) {
            if out.len() >= MAX_SECRETS {
                break 'rules;
            }
            let Some(whole) = caps.get(0) else { continue };
            let group = if rule.secret_group > 0 {
                caps.get(rule.secret_group)
            } else {
                // gitleaks: the first group that matched, else the whole match.
                (1..caps.len()).find_map(|i| caps.get(i))
            };
            let secret = group.unwrap_or(whole);
            let value = String::from_utf8_lossy(secret.as_bytes());
            let value = value.trim();
            if value.is_empty() || seen.contains(value) {
                continue;
            }
            if rule.entropy.is_some_and(|min| entropy(value) < min) {
                continue;
            }
            let line = line_of(text.as_bytes(), whole.start(), whole.end());
            if set.global.allows(value, whole.as_bytes(), line)
                || rule
                    .allow
                    .iter()
                    .any(|a| a.allows(value, whole.as_bytes(), line))
            {
                continue;
            }
            seen.insert(value.to_owned());
            out.push(Secret {
                rule: rule.id.clone(),
                redacted: redact(value),
                at: secret.start(),
                value: value.to_owned(),
            });
        }
    }
    out.sort_by_key(|s| s.at);
    out
}

/// `text` with every credential [`find`] reports redacted (for text kept in the report).
pub fn redacted(text: &str) -> String {
    redact_all(text, &find(text))
}

/// `text` with each of `secrets` redacted wherever it occurs, longest values first (so a
/// value inside a longer one cannot leave the longer one's tail showing).
pub fn redact_all(text: &str, secrets: &[Secret]) -> String {
    let mut order: Vec<&Secret> = secrets.iter().collect();
    order.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
    let mut out = text.to_owned();
    for s in order {
        if out.contains(&s.value) {
            out = out.replace(&s.value, &s.redacted);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generic_rule_is_a_rule_of_the_published_set() {
        for id in GENERIC {
            assert!(RULES.contains(&format!("id = \"{id}\"")), "{id}");
        }
        assert!(generic("generic-api-key") && !generic("github-pat"));
    }

    #[test]
    fn the_published_rules_load() {
        let (rules, broken) = rule_count();
        assert!(rules > 150, "{rules} rules");
        assert!(broken.is_empty(), "every content rule compiles: {broken:?}");
    }

    #[test]
    fn well_known_formats_are_found_and_redacted() {
        let cases = [
            (
                "aws_access_key_id = AKIAZ7QX4J2MWN3KD5TB",
                "aws-access-token",
            ),
            (
                "token: ghp_Zq8vN3xT5wR2yL7kP1mB9cD4fH6jS0aE2gU8",
                "github-pat",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8vN3xT5wR2yL7kP1mB9cD4fH6jS0aE2gU8Zq8vN3xT5wR2yL7kP1mB9cD4fH6jS0aE2gU8\n-----END RSA PRIVATE KEY-----",
                "private-key",
            ),
            (
                "xoxb-2415782301-5829301847263-Kq8vN3xT5wR2yL7kP1mB9cD4",
                "slack-bot-token",
            ),
        ];
        for (text, rule) in cases {
            let found = find(text);
            assert!(
                found.iter().any(|s| s.rule == rule),
                "{rule} in {text:?}: {found:?}"
            );
            for s in &found {
                assert!(s.redacted.contains('…'), "{s:?}");
                assert!(!s.redacted.contains(&s.value), "{s:?}");
            }
        }
    }

    #[test]
    fn thousands_of_tokens_cost_bounded_work() {
        let mut text = String::new();
        for i in 0..20_000u32 {
            text.push_str(&format!(
                "ghp_{:0>36} ",
                format!("{i}Zq8vN3xT5wR2yL7kP1mB9cD4")
            ));
        }
        let found = find(&text);
        assert!(found.len() <= MAX_SECRETS, "{}", found.len());
        assert!(!found.is_empty());
        let shown = redact_all(&text[..2000], &found);
        assert!(!shown.contains(&found[0].value));
    }

    #[test]
    fn ordinary_text_has_none() {
        for text in [
            "Click Save to continue.",
            "The current time in Europe/Paris is 2026-11-25T10:00:00+01:00",
            "api_key = \"${API_KEY}\"",
            "password: changeme",
            "commit 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 Author: Jane",
            "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert!(find(text).is_empty(), "{text:?}: {:?}", find(text));
        }
    }
}
