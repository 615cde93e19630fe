//! The first layer of the recon tools' target control: a tool's address or URL is checked
//! against the configured targets before anything runs (the second layer is the sandbox's
//! network, which reaches nothing else whatever the program does).
//!
//! Guarantees: only literal IP addresses are accepted (a name is refused, never resolved);
//! an address is on the list by the same rule the sandbox applies ([`covered`]); a URL is
//! `http` or `https`, carries no credentials and no fragment, and is handed to the program in
//! its normalised form (so `http://3221225986/` reaches the program as `http://192.0.2.2/`,
//! the address that was checked).

use std::net::IpAddr;

use ipnet::IpNet;
use warden_jail::trace::targets::{covered, parse_target};

use crate::tools::ToolError;

/// The marker `ffuf_discover` replaces with each word.
pub const FUZZ: &str = "FUZZ";

/// The configured targets, parsed, and the host's own addresses (which a network entry never
/// covers).
#[derive(Debug, Clone)]
pub struct Allowed {
    nets: Vec<IpNet>,
    own: Vec<IpAddr>,
}

impl Allowed {
    /// The list `entries` (already validated by the configuration).
    pub fn new(entries: &[String]) -> Allowed {
        Allowed {
            nets: entries
                .iter()
                .filter_map(|e| parse_target(e).ok())
                .collect(),
            own: warden_jail::trace::egress::own_addresses(),
        }
    }

    /// `text`, an IPv4 or IPv6 literal on the list.
    pub fn address(&self, text: &str) -> Result<IpAddr, ToolError> {
        let ip: IpAddr = text.trim().parse().map_err(|_| {
            ToolError::TargetNotAllowed(format!(
                "{text:?} is not an IP address (names are never resolved)"
            ))
        })?;
        self.check(ip)?;
        Ok(ip)
    }

    fn check(&self, ip: IpAddr) -> Result<(), ToolError> {
        if covered(&self.nets, ip, &self.own) || unchecked_for_tests() {
            Ok(())
        } else {
            Err(ToolError::TargetNotAllowed(format!(
                "{ip} is not among the configured targets (see warden://policy)"
            )))
        }
    }

    /// `text`, an `http(s)` URL whose host is a literal address on the list; with `fuzz`, it
    /// must hold exactly one `FUZZ` marker, in its path or query. Returns the normalised URL
    /// and its address.
    pub fn url(&self, text: &str, fuzz: bool) -> Result<(String, IpAddr), ToolError> {
        let bad = |why: String| crate::tools::invalid("/url", why);
        let url = url::Url::parse(text.trim()).map_err(|e| bad(format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!(
                "scheme {:?}: only http and https",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("credentials in the URL are not accepted".into()));
        }
        if url.fragment().is_some() {
            return Err(bad("a fragment is never sent; leave it out".into()));
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(url::Host::Domain(name)) => {
                return Err(ToolError::TargetNotAllowed(format!(
                    "{name:?} is a name; give the target's address (names are never resolved)"
                )));
            }
            None => return Err(bad("the URL has no host".into())),
        };
        self.check(ip)?;
        let normal = url.as_str().to_owned();
        if fuzz {
            let in_place = url.path().matches(FUZZ).count()
                + url.query().map_or(0, |q| q.matches(FUZZ).count());
            if normal.matches(FUZZ).count() != 1 || in_place != 1 {
                return Err(bad(format!(
                    "the URL must hold exactly one {FUZZ} marker, in its path or query"
                )));
            }
        } else if normal.contains(FUZZ) {
            return Err(bad(format!("{FUZZ} markers are for ffuf_discover only")));
        }
        Ok((normal, ip))
    }
}

/// In a debug build only, `WARDEN_TEST_UNCHECKED_RECON_TARGETS=1` turns this first layer off,
/// so the tests can show the second (the sandbox's network) holding on its own. Release builds
/// have no such switch.
fn unchecked_for_tests() -> bool {
    cfg!(debug_assertions)
        && std::env::var_os("WARDEN_TEST_UNCHECKED_RECON_TARGETS").is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Allowed {
        Allowed {
            nets: ["192.0.2.2", "10.20.0.0/24", "fd00:77::/64"]
                .iter()
                .map(|e| parse_target(e).unwrap())
                .collect(),
            own: vec!["10.20.0.1".parse().unwrap()],
        }
    }

    #[test]
    fn addresses_must_be_literals_on_the_list() {
        let a = allowed();
        assert!(a.address("192.0.2.2").is_ok());
        assert!(a.address("10.20.0.77").is_ok());
        assert!(a.address("fd00:77::2").is_ok());
        for no in [
            "192.0.2.3",
            "10.20.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "example.org",
            "192.0.2.2/32",
            "-sV",
            "",
            "fd00:78::2",
        ] {
            let e = a.address(no).unwrap_err();
            assert_eq!(e.kind(), "target_not_allowed", "{no}");
        }
    }

    #[test]
    fn urls_are_checked_and_normalised() {
        let a = allowed();
        let (u, ip) = a.url("http://192.0.2.2:8080/search", false).unwrap();
        assert_eq!(u, "http://192.0.2.2:8080/search");
        assert_eq!(ip.to_string(), "192.0.2.2");
        // A decimal IPv4 host is normalised to the address that was checked.
        assert_eq!(
            a.url("http://3221225986/x", false).unwrap().0,
            "http://192.0.2.2/x"
        );
        assert!(a.url("https://[fd00:77::2]:8443/", false).is_ok());
        assert!(a.url("http://192.0.2.2/FUZZ", true).is_ok());
        assert!(a.url("http://192.0.2.2/?q=FUZZ", true).is_ok());
        let kind = |u: &str, fuzz: bool| a.url(u, fuzz).unwrap_err().kind();
        assert_eq!(kind("http://lab.test/", false), "target_not_allowed");
        assert_eq!(kind("http://192.0.2.3/", false), "target_not_allowed");
        assert_eq!(kind("http://10.20.0.1/", false), "target_not_allowed");
        assert_eq!(kind("file:///etc/passwd", false), "invalid_arguments");
        assert_eq!(kind("gopher://192.0.2.2/", false), "invalid_arguments");
        assert_eq!(kind("http://u:p@192.0.2.2/", false), "invalid_arguments");
        assert_eq!(kind("http://192.0.2.2/#x", false), "invalid_arguments");
        assert_eq!(kind("http://192.0.2.2/FUZZ", false), "invalid_arguments");
        assert_eq!(kind("http://192.0.2.2/", true), "invalid_arguments");
        assert_eq!(
            kind("http://192.0.2.2/FUZZ/FUZZ", true),
            "invalid_arguments"
        );
        assert_eq!(kind("http://FUZZ/", true), "target_not_allowed");
        assert_eq!(kind("not a url", false), "invalid_arguments");
    }
}
