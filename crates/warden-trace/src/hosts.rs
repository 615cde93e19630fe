//! Host-name allowlists for egress: which names a sandboxed program may reach for real.
//!
//! A pattern is a host name (`pypi.org`, matched exactly) or `*.` and a name
//! (`*.pythonhosted.org`, matching every name below it but not the name itself). Matching is on
//! the name the program asked the DNS stub for, case-insensitively, with a trailing dot ignored.
//! Addresses are never patterns: a program that connects to a literal address reaches the
//! capture sink, whatever the list says.

/// Longest host name DNS allows.
const MAX_NAME: usize = 253;

/// Whether `pattern` is a valid allowlist entry.
pub fn valid_pattern(pattern: &str) -> bool {
    let name = pattern.strip_prefix("*.").unwrap_or(pattern);
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

/// Whether `name` is allowed by any of `patterns`.
pub fn allowed(patterns: &[String], name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if !valid_name(&name) {
        return false;
    }
    patterns.iter().any(|p| {
        let p = p.to_ascii_lowercase();
        match p.strip_prefix("*.") {
            Some(suffix) => name
                .strip_suffix(suffix)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            None => name == p,
        }
    })
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
        assert!(allowed(&l, "pypi.org"));
        assert!(allowed(&l, "PyPI.org."));
        assert!(allowed(&l, "files.pythonhosted.org"));
        assert!(
            !allowed(&l, "pythonhosted.org"),
            "the wildcard needs a label"
        );
        assert!(!allowed(&l, "evilpythonhosted.org"));
        assert!(!allowed(&l, "pypi.org.evil.test"));
        assert!(!allowed(&l, "xpypi.org"));
        assert!(!allowed(&l, "a..pythonhosted.org"));
        assert!(!allowed(&[], "pypi.org"));
    }

    #[test]
    fn patterns_are_names() {
        for ok in ["pypi.org", "*.npmjs.org", "a-b.example.test"] {
            assert!(valid_pattern(ok), "{ok}");
        }
        for bad in [
            "", "*", "*.", "org", "1.2.3.4", "-a.org", "a_b.org", "a.org/x", "a .org", "**.org",
            "*.*.org",
        ] {
            assert!(!valid_pattern(bad), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_names_never_panic_and_empty_lists_allow_nothing(name in ".{0,300}") {
            prop_assert!(!allowed(&[], &name));
            let _ = allowed(&list(&["*.example.test", "example.test"]), &name);
        }

        #[test]
        fn a_wildcard_allows_exactly_its_subdomains(label in "[a-z0-9]{1,20}", other in "[a-z0-9]{1,20}") {
            let l = list(&["*.example.test"]);
            let sub = format!("{label}.example.test");
            let elsewhere = format!("{label}.{other}-example.test");
            prop_assert!(allowed(&l, &sub));
            prop_assert!(!allowed(&l, &elsewhere));
        }
    }
}
