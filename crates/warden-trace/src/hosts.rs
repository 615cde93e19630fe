//! Host-name allowlists for egress: which names (and ports) a sandboxed program may reach for
//! real.
//!
//! A pattern is a host name (`pypi.org`, matched exactly) or `*.` and a name
//! (`*.pythonhosted.org`, matching every name below it but not the name itself), optionally with
//! `:PORT`; without one, the port is 443. Matching is on the name the program asked the DNS stub
//! for, case-insensitively, with a trailing dot ignored. Addresses are never patterns: a program
//! that connects to a literal address reaches the capture sink, whatever the list says.

/// Longest host name DNS allows.
const MAX_NAME: usize = 253;

/// The port an entry without one allows.
pub const DEFAULT_PORT: u16 = 443;

/// A pattern's name part and port.
fn split(pattern: &str) -> Option<(&str, u16)> {
    match pattern.rsplit_once(':') {
        Some((name, digits)) => {
            let port = digits
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0 && p.to_string() == digits)?;
            Some((name, port))
        }
        None => Some((pattern, DEFAULT_PORT)),
    }
}

/// Whether `pattern` is a valid allowlist entry.
pub fn valid_pattern(pattern: &str) -> bool {
    let Some((name, _)) = split(pattern) else {
        return false;
    };
    let name = name.strip_prefix("*.").unwrap_or(name);
    valid_name(name) && name.contains('.') && name.parse::<std::net::Ipv4Addr>().is_err()
}

/// Whether `name` is a syntactically valid host name (letters, digits, `-`, dots between
/// labels of 1–63 characters, no label starting or ending with `-`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn name_matches(pattern: &str, name: &str) -> bool {
    let p = pattern.to_ascii_lowercase();
    match p.strip_prefix("*.") {
        Some(suffix) => name
            .strip_suffix(suffix)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => name == p,
    }
}

fn normal(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    valid_name(&name).then_some(name)
}

/// Whether `name` is allowed on some port by any of `patterns` (the DNS stub resolves it).
pub fn name_allowed(patterns: &[String], name: &str) -> bool {
    let Some(name) = normal(name) else {
        return false;
    };
    patterns
        .iter()
        .filter_map(|p| split(p))
        .any(|(p, _)| name_matches(p, &name))
}

/// Whether a connection to `name` on `port` is allowed by any of `patterns`.
pub fn allowed(patterns: &[String], name: &str, port: u16) -> bool {
    let Some(name) = normal(name) else {
        return false;
    };
    patterns
        .iter()
        .filter_map(|p| split(p))
        .any(|(p, allowed_port)| allowed_port == port && name_matches(p, &name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn exact_and_wildcard() {
        let l = list(&["pypi.org", "*.pythonhosted.org"]);
        let ok = |n: &str| allowed(&l, n, 443);
        assert!(ok("pypi.org"));
        assert!(ok("PyPI.org."));
        assert!(ok("files.pythonhosted.org"));
        assert!(!ok("pythonhosted.org"), "the wildcard needs a label");
        assert!(!ok("evilpythonhosted.org"));
        assert!(!ok("pypi.org.evil.test"));
        assert!(!ok("xpypi.org"));
        assert!(!ok("a..pythonhosted.org"));
        assert!(!ok("pypi.org.."));
        assert!(!allowed(&[], "pypi.org", 443));
    }

    #[test]
    fn ports_are_part_of_the_entry() {
        let l = list(&["pypi.org", "mirror.example.test:8443"]);
        assert!(allowed(&l, "pypi.org", 443));
        assert!(
            !allowed(&l, "pypi.org", 80),
            "443 unless the entry says otherwise"
        );
        assert!(!allowed(&l, "pypi.org", 22));
        assert!(allowed(&l, "mirror.example.test", 8443));
        assert!(!allowed(&l, "mirror.example.test", 443));
        assert!(name_allowed(&l, "mirror.example.test"));
        assert!(!name_allowed(&l, "other.example.test"));
    }

    #[test]
    fn patterns_are_names() {
        for ok in ["pypi.org", "*.npmjs.org", "a-b.example.test", "x.test:8443"] {
            assert!(valid_pattern(ok), "{ok}");
        }
        for bad in [
            "",
            "*",
            "*.",
            "org",
            "1.2.3.4",
            "-a.org",
            "a_b.org",
            "a.org/x",
            "a .org",
            "**.org",
            "*.*.org",
            "x.test:0",
            "x.test:",
            "x.test:99999",
            "x.test:+80",
            "x.test:080",
            "[::1]:80",
        ] {
            assert!(!valid_pattern(bad), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_names_never_panic_and_empty_lists_allow_nothing(name in ".{0,300}", port: u16) {
            prop_assert!(!allowed(&[], &name, port));
            prop_assert!(!name_allowed(&[], &name));
            let _ = allowed(&list(&["*.example.test", "example.test:80"]), &name, port);
            let _ = valid_pattern(&name);
        }

        #[test]
        fn a_wildcard_allows_exactly_its_subdomains(label in "[a-z0-9]{1,20}", other in "[a-z0-9]{1,20}") {
            let l = list(&["*.example.test"]);
            let sub = format!("{label}.example.test");
            let elsewhere = format!("{label}.{other}-example.test");
            prop_assert!(allowed(&l, &sub, 443));
            prop_assert!(!allowed(&l, &elsewhere, 443));
        }
    }
}
