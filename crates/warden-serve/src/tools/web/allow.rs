//! Which URLs the web tools may ask for: `http` or `https`, a host *name* (never a literal
//! address), and a name and port that the `[web] allow` list admits (the same patterns as
//! `warden run --egress`: `docs.rs` for port 443, `*.python.org`, `svc.test:8080`).
//!
//! This is the tools' own check, made before a sandbox starts and again on every redirect hop;
//! the sandbox's network enforces the same list on every connection whatever the program
//! inside does (see `warden_jail::trace::egress`).

use url::{Host, Url};

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a URL at all.
    #[error("{0:?} is not a URL")]
    Unparsable(String),
    /// Not `http` or `https`.
    #[error("{0}: only http and https URLs can be fetched")]
    Scheme(String),
    /// A literal address instead of a name.
    #[error("{0}: the host must be a name from the allowlist, not an address")]
    Address(String),
    /// Credentials in the URL.
    #[error("{0}: URLs with a user name or password are refused")]
    Credentials(String),
    /// A name or port that is not on the list.
    #[error("{host}:{port} is not on the web allowlist ({list})")]
    NotListed {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The list, as configured.
        list: String,
    },
}

/// Parse `text` and check it against `allow`.
pub fn check_str(text: &str, allow: &[String]) -> Result<Url, Refused> {
    let url = Url::parse(text).map_err(|_| Refused::Unparsable(text.to_owned()))?;
    check(&url, allow)?;
    Ok(url)
}

/// Check `url` against `allow`.
pub fn check(url: &Url, allow: &[String]) -> Result<(), Refused> {
    let shown = || url.as_str().to_owned();
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused::Scheme(shown()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refused::Credentials(shown()));
    }
    let host = match url.host() {
        Some(Host::Domain(name)) => name.to_owned(),
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => return Err(Refused::Address(shown())),
        None => return Err(Refused::Unparsable(shown())),
    };
    let port = url.port_or_known_default().unwrap_or(443);
    if warden_trace::hosts::allowed(allow, &host, port) {
        Ok(())
    } else {
        Err(Refused::NotListed {
            host,
            port,
            list: allow.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list() -> Vec<String> {
        ["docs.rs", "*.python.org", "svc.test:8080", "plain.test:80"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    #[test]
    fn names_and_ports_on_the_list_pass() {
        for ok in [
            "https://docs.rs/serde",
            "https://docs.python.org/3/",
            "http://svc.test:8080/a?b=c",
            "http://plain.test/",
            "HTTPS://DOCS.RS/x",
        ] {
            assert!(check_str(ok, &list()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn everything_else_is_refused_with_its_reason() {
        let l = list();
        let kind = |u: &str| check_str(u, &l).unwrap_err();
        assert!(matches!(
            kind("http://docs.rs/"),
            Refused::NotListed { port: 80, .. }
        ));
        assert!(matches!(
            kind("https://python.org/"),
            Refused::NotListed { .. }
        ));
        assert!(matches!(
            kind("https://docs.rs.evil.test/"),
            Refused::NotListed { .. }
        ));
        assert!(matches!(
            kind("http://svc.test:9090/"),
            Refused::NotListed { .. }
        ));
        assert!(matches!(kind("ftp://docs.rs/"), Refused::Scheme(_)));
        assert!(matches!(kind("file:///etc/passwd"), Refused::Scheme(_)));
        assert!(matches!(kind("https://127.0.0.1/"), Refused::Address(_)));
        assert!(matches!(kind("https://[::1]/"), Refused::Address(_)));
        assert!(matches!(kind("https://0x7f.1/"), Refused::Address(_)));
        assert!(matches!(
            kind("https://u:p@docs.rs/"),
            Refused::Credentials(_)
        ));
        assert!(matches!(kind("not a url"), Refused::Unparsable(_)));
    }

    proptest! {
        /// Whatever the text, a URL that passes names an allowlisted host on its port.
        #[test]
        fn a_passing_url_is_always_on_the_list(s in "[a-zA-Z0-9:/.@%\\[\\]_?#-]{0,60}") {
            let l = list();
            for text in [s.clone(), format!("https://{s}"), format!("http://svc.test:8080{s}")] {
                if let Ok(u) = check_str(&text, &l) {
                    let host = u.host_str().unwrap_or_default().to_owned();
                    let port = u.port_or_known_default().unwrap_or(0);
                    prop_assert!(warden_trace::hosts::allowed(&l, &host, port), "{text}");
                }
            }
        }
    }
}
