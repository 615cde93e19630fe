//! The list of targets: one per line, either a target as `warden detonate` takes it
//! (`npm:NAME[@VERSION]`, `pypi:…`, `github:…`, a folder or file) or a JSON object with
//! `target`, and optionally `command` (the start command), `transport` (`stdio`; others are
//! refused until detonate speaks them) and `env` (an object of strings). Blank lines and lines
//! starting with `#` are skipped; a target listed twice is judged once.
//!
//! Each target has a stable [`Target::key`] (its spec and command), the [`Target::version`] a
//! resumed sweep compares, and a file-name [`Target::slug`].

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

/// Most targets in one list.
pub const MAX_TARGETS: usize = 1_000_000;

/// One target of the sweep.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Target {
    /// What `detonate` gets as TARGET (absent: the command alone).
    #[serde(default)]
    pub target: Option<String>,
    /// The start command (`--mcp-command`).
    #[serde(default)]
    pub command: Option<String>,
    /// The transport (`stdio` only, today).
    #[serde(default)]
    pub transport: Option<String>,
    /// Extra environment for the server.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Arguments after a registry or GitHub target's own start command (`--server-arg`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The file could not be read.
    #[error("{path}: {why}")]
    Unreadable {
        /// The list.
        path: String,
        /// Why.
        why: String,
    },
    /// A line is neither a target nor a JSON object with one.
    #[error("{path}:{line}: {why}")]
    BadLine {
        /// The list.
        path: String,
        /// The line number (from 1).
        line: usize,
        /// Why.
        why: String,
    },
}

impl Target {
    /// A target from its spec alone.
    pub fn spec(s: &str) -> Self {
        Target {
            target: Some(s.to_owned()),
            command: None,
            transport: None,
            env: Default::default(),
            args: Vec::new(),
        }
    }

    /// What identifies it across runs and shards: the spec (with its arguments), then the
    /// command.
    pub fn key(&self) -> String {
        let spec = self.target.as_ref().map(|t| {
            let mut s = t.clone();
            for a in &self.args {
                s.push(' ');
                s.push_str(&shell_word(a));
            }
            s
        });
        match (&spec, &self.command) {
            (Some(t), Some(c)) => format!("{t} :: {c}"),
            (Some(t), None) => t.clone(),
            (None, Some(c)) => format!(":: {c}"),
            (None, None) => String::new(),
        }
    }

    /// The version a resumed sweep compares: the spec's `@VERSION` for a registry or GitHub
    /// target, a hash of a local target's manifest (or file), else `unpinned` (the registry's
    /// latest, which a resume does not re-check: pin versions to re-judge changed packages).
    pub fn version(&self) -> String {
        let Some(t) = &self.target else {
            return "command".into();
        };
        for scheme in ["npm:", "pypi:", "github:"] {
            if let Some(rest) = t.strip_prefix(scheme) {
                // `@scope/name@1.0`: the version follows the last `@` after the first char.
                return match rest.rfind('@') {
                    Some(i) if i > 0 => rest[i + 1..].to_owned(),
                    _ => "unpinned".into(),
                };
            }
        }
        let path = Path::new(t);
        let candidates = [
            path.join("package.json"),
            path.join("pyproject.toml"),
            path.join("requirements.txt"),
            path.to_path_buf(),
        ];
        for c in candidates {
            if c.is_file()
                && let Ok(bytes) = std::fs::read(&c)
            {
                return format!("local-{:016x}", fnv(&bytes));
            }
        }
        "local".into()
    }

    /// A file name for its report: the key's safe characters, and a hash that keeps two
    /// targets with the same safe characters apart.
    pub fn slug(&self) -> String {
        let key = self.key();
        let mut safe: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        safe.truncate(80);
        let safe = safe.trim_matches(['.', '_']).to_owned();
        format!("{safe}-{:08x}", fnv(key.as_bytes()) & 0xffff_ffff)
    }
}

/// `s` as one shell word (quoted when it needs to be).
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Whether `s` has the shape [`Target::slug`] gives: at most 80 of `[a-z0-9._-]` (not starting
/// with a dot), a dash and eight lowercase hex digits. Nothing else is a report's name: a slug
/// read back from a file (a shard's `results.jsonl`) is checked with this before it names a
/// file, so `../` or `/` can never reach a path.
pub fn is_slug(s: &str) -> bool {
    let Some((safe, hash)) = s.rsplit_once('-') else {
        return false;
    };
    safe.len() <= 80
        && !safe.starts_with('.')
        && safe
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
        && hash.len() == 8
        && hash
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// FNV-1a, 64 bits: stable across runs and machines (shards, slugs, versions).
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Parse a list's text; `path` names it in errors.
pub fn parse(text: &str, path: &str) -> Result<Vec<Target>, ListError> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| ListError::BadLine {
            path: path.to_owned(),
            line: i + 1,
            why,
        };
        let t = if line.starts_with('{') {
            let t: Target = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            if t.target.is_none() && t.command.is_none() {
                return Err(bad("an object needs `target` or `command`".into()));
            }
            t
        } else {
            Target::spec(line)
        };
        if line.chars().any(char::is_control) {
            return Err(bad("control characters".into()));
        }
        if seen.insert(t.key()) {
            out.push(t);
        }
        if out.len() > MAX_TARGETS {
            return Err(bad(format!("more than {MAX_TARGETS} targets")));
        }
    }
    Ok(out)
}

/// Read and parse the list at `path`.
pub fn read(path: &Path) -> Result<Vec<Target>, ListError> {
    let text = std::fs::read_to_string(path).map_err(|e| ListError::Unreadable {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    parse(&text, &path.display().to_string())
}

/// A shard: this worker's index and the number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// From 0 (Kubernetes' `JOB_COMPLETION_INDEX`).
    pub index: u64,
    /// How many.
    pub count: u64,
}

impl Shard {
    /// `I/N`, with `0 <= I < N`.
    pub fn parse(s: &str) -> Option<Shard> {
        let (i, n) = s.split_once('/')?;
        let (index, count) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
        (count > 0 && index < count).then_some(Shard { index, count })
    }

    /// Whether `t` is this shard's: its key's stable hash, modulo the count (a list edited
    /// between runs moves no other target between shards).
    pub fn takes(&self, t: &Target) -> bool {
        fnv(t.key().as_bytes()) % self.count == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_objects_comments_and_duplicates() {
        let list = parse(
            "# a registry\nnpm:a@1.0\n\n{\"target\":\"pypi:b\",\"env\":{\"K\":\"v\"}}\nnpm:a@1.0\n{\"command\":\"python3 s.py\"}\n",
            "l",
        )
        .unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].env["K"], "v");
        assert_eq!(list[2].key(), ":: python3 s.py");
        assert!(parse("{\"env\":{}}", "l").is_err());
        assert!(parse("{not json", "l").is_err());
    }

    #[test]
    fn only_the_slugs_a_sweep_makes_are_slugs() {
        for t in [
            "npm:@scope/x@1.2.3",
            "pypi:mcp-server-time",
            "./a b/c",
            "..",
            "",
        ] {
            let slug = Target::spec(t).slug();
            assert!(is_slug(&slug), "{t}: {slug}");
        }
        for bad in [
            "../../../victim/config",
            "/etc/passwd-0000abcd",
            "a/b-0000abcd",
            ".hidden-0000abcd",
            "x-0000ABCD",
            "x-123",
            "x",
            "",
            "x-0000abcd\n",
        ] {
            assert!(!is_slug(bad), "{bad}");
        }
    }

    #[test]
    fn versions_and_slugs() {
        assert_eq!(Target::spec("npm:@scope/x@1.2.3").version(), "1.2.3");
        assert_eq!(Target::spec("npm:@scope/x").version(), "unpinned");
        assert_eq!(
            Target::spec("pypi:mcp-server-time@2026.1").version(),
            "2026.1"
        );
        let s = Target::spec("npm:@scope/x@1.2.3").slug();
        assert!(s.starts_with("npm__scope_x_1.2.3-"), "{s}");
        assert_ne!(Target::spec("a/b").slug(), Target::spec("a_b").slug());
    }

    #[test]
    fn shards_split_without_overlap() {
        let targets: Vec<Target> = (0..200)
            .map(|i| Target::spec(&format!("npm:p{i}")))
            .collect();
        let shards: Vec<Shard> = (0..4).map(|i| Shard { index: i, count: 4 }).collect();
        for t in &targets {
            assert_eq!(shards.iter().filter(|s| s.takes(t)).count(), 1);
        }
        assert!(
            shards
                .iter()
                .all(|s| targets.iter().filter(|t| s.takes(t)).count() > 20)
        );
        assert_eq!(Shard::parse("3/4"), Some(Shard { index: 3, count: 4 }));
        assert_eq!(Shard::parse("4/4"), None);
        assert_eq!(Shard::parse("0/0"), None);
    }
}
