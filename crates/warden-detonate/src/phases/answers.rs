//! The chamber's DNS answers: which name each of its fake addresses stood for, read from the
//! run's `net.dns` events. A program connects to the address the chamber gave it for a name,
//! so that name (never the TLS server name or `Host` header the program wrote itself) says
//! where a connection was going.
//!
//! Guarantees: an address is looked up as the kernel saw it or in its IPv4-mapped IPv6 form
//! (`::ffff:198.18.0.2`, what a dual-stack socket reports) alike; an address the chamber never
//! gave has no name.

use std::collections::HashMap;
use std::net::IpAddr;

use warden_events::{Event, EventKind};

/// The names the chamber's DNS answered, by the address it gave.
#[derive(Debug, Default, Clone)]
pub struct Answers(HashMap<IpAddr, String>);

/// `address` as one form: an IPv4-mapped IPv6 address is its IPv4 address.
fn plain(address: &str) -> Option<IpAddr> {
    let ip: IpAddr = address.trim_matches(['[', ']']).parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

impl Answers {
    /// The answers in `events`.
    pub fn of(events: &[Event]) -> Answers {
        Answers(
            events
                .iter()
                .filter(|e| e.kind == EventKind::NetDns)
                .filter_map(|e| {
                    let a = plain(e.data["answer"].as_str()?)?;
                    let n = e.data["name"].as_str()?.trim_end_matches('.');
                    Some((a, n.to_owned()))
                })
                .collect(),
        )
    }

    /// The name `address` stood for, if the chamber gave it.
    pub fn name(&self, address: &str) -> Option<&str> {
        self.0.get(&plain(address)?).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mapped_and_plain_addresses_name_the_same_host() {
        let dns = Event {
            id: 1,
            t_ms: 0,
            kind: EventKind::NetDns,
            pid: None,
            triggered_by: None,
            data: json!({ "name": "centralus-2.in.applicationinsights.azure.com.", "answer": "198.18.0.2" }),
        };
        let a = Answers::of(&[dns]);
        let host = Some("centralus-2.in.applicationinsights.azure.com");
        assert_eq!(a.name("198.18.0.2"), host);
        assert_eq!(a.name("::ffff:198.18.0.2"), host);
        assert_eq!(a.name("[::ffff:198.18.0.2]"), host);
        assert_eq!(a.name("198.18.0.3"), None);
        assert_eq!(a.name("not an address"), None);
    }
}
