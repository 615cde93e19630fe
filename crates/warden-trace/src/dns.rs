//! The DNS stub's logic: decode a query, answer it from a fake address range (or with
//! NXDOMAIN), and remember which name each fake address stands for, so that a later connection
//! to that address can be reported with the name the program asked for.
//!
//! Fake addresses come from 198.18.0.0/15 (reserved for benchmarking, never routed). The jail's
//! network namespace routes every address to its loopback, so a program that resolves a name and
//! connects to the answer reaches the capture sink instead of any real host.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use simple_dns::rdata::{A, RData};
use simple_dns::{CLASS, Packet, PacketFlag, Question, RCODE, ResourceRecord};

/// How the stub answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DnsMode {
    /// A fresh address from the fake range for every name (so the program goes on to connect).
    #[default]
    FakeIp,
    /// Every name does not exist.
    Nxdomain,
}

/// First fake address (198.18.0.1) and how many there are.
const FAKE_BASE: u32 = u32::from_be_bytes([198, 18, 0, 1]);
const FAKE_COUNT: u32 = (1 << 17) - 2;

/// Names handed fake addresses, at most (later names share the last address).
const MAX_NAMES: usize = 65_536;

/// One decoded question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Query {
    /// The name asked for, without the trailing dot.
    pub name: String,
    /// The record type (`A`, `AAAA`, `TXT`… or `TYPE<n>`).
    pub qtype: String,
    /// The answer given: a fake address, `nodata` or `nxdomain`.
    pub answer: String,
}

/// The stub's state: the fake addresses handed out so far.
#[derive(Debug, Default)]
pub struct Stub {
    mode: DnsMode,
    egress: Vec<String>,
    by_name: HashMap<String, Ipv4Addr>,
    by_addr: HashMap<Ipv4Addr, String>,
}

fn type_name(code: u16) -> String {
    match code {
        1 => "A".into(),
        2 => "NS".into(),
        5 => "CNAME".into(),
        12 => "PTR".into(),
        15 => "MX".into(),
        16 => "TXT".into(),
        28 => "AAAA".into(),
        33 => "SRV".into(),
        64 => "SVCB".into(),
        65 => "HTTPS".into(),
        255 => "ANY".into(),
        n => format!("TYPE{n}"),
    }
}

/// The questions of a DNS query seen on the wire (a datagram a program sent to some other
/// resolver): name and type, no answer.
pub fn questions(packet: &[u8]) -> Vec<(String, String)> {
    let Ok(p) = Packet::parse(packet) else {
        return Vec::new();
    };
    if p.has_flags(PacketFlag::RESPONSE) {
        return Vec::new();
    }
    p.questions
        .iter()
        .take(4)
        .map(|q| {
            let name = q.qname.to_string().trim_end_matches('.').to_owned();
            (name, type_name(u16::from(q.qtype)))
        })
        .collect()
}

impl Stub {
    /// A stub answering in `mode`.
    pub fn new(mode: DnsMode) -> Stub {
        Stub {
            mode,
            ..Stub::default()
        }
    }

    /// Names on this egress allowlist (see [`crate::hosts`]) get a fake address whatever the
    /// mode, so the connection that follows can be forwarded.
    pub fn set_egress(&mut self, patterns: Vec<String>) {
        self.egress = patterns;
    }

    /// The name a fake address was handed out for.
    pub fn name_of(&self, addr: Ipv4Addr) -> Option<&str> {
        self.by_addr.get(&addr).map(String::as_str)
    }

    fn fake(&mut self, name: &str) -> Ipv4Addr {
        if let Some(a) = self.by_name.get(name) {
            return *a;
        }
        let n = u32::try_from(self.by_name.len().min(MAX_NAMES)).unwrap_or(0) % FAKE_COUNT;
        let addr = Ipv4Addr::from(FAKE_BASE + n);
        if self.by_name.len() < MAX_NAMES {
            self.by_name.insert(name.to_owned(), addr);
            self.by_addr.insert(addr, name.to_owned());
        }
        addr
    }

    /// Decode `packet` and build the reply. `None` when it is not a DNS query we can parse
    /// (the stub then stays silent, as a server would for garbage).
    pub fn answer(&mut self, packet: &[u8]) -> Option<(Vec<Query>, Vec<u8>)> {
        let query = Packet::parse(packet).ok()?;
        if query.has_flags(PacketFlag::RESPONSE) || query.questions.is_empty() {
            return None;
        }
        let mut reply = Packet::new_reply(query.id());
        reply.set_flags(PacketFlag::RECURSION_AVAILABLE);
        if query.has_flags(PacketFlag::RECURSION_DESIRED) {
            reply.set_flags(PacketFlag::RECURSION_DESIRED);
        }
        let mut seen = Vec::new();
        for q in query.questions.iter().take(4) {
            let name = q.qname.to_string().trim_end_matches('.').to_owned();
            let code = u16::from(q.qtype);
            reply
                .questions
                .push(Question::new(q.qname.clone(), q.qtype, q.qclass, false));
            let mode = if crate::hosts::name_allowed(&self.egress, &name) {
                DnsMode::FakeIp
            } else {
                self.mode
            };
            let answer = match (mode, code) {
                (DnsMode::Nxdomain, _) => {
                    *reply.rcode_mut() = RCODE::NameError;
                    "nxdomain".to_owned()
                }
                (DnsMode::FakeIp, 1) => {
                    let addr = self.fake(&name);
                    reply.answers.push(ResourceRecord::new(
                        q.qname.clone(),
                        CLASS::IN,
                        60,
                        RData::A(A {
                            address: u32::from(addr),
                        }),
                    ));
                    addr.to_string()
                }
                // Other types exist but have no records: the program falls back to A.
                (DnsMode::FakeIp, _) => "nodata".to_owned(),
            };
            seen.push(Query {
                name,
                qtype: type_name(code),
                answer,
            });
        }
        let bytes = reply.build_bytes_vec().ok()?;
        Some((seen, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use simple_dns::{Name, QCLASS, QTYPE, TYPE};

    fn query(name: &str, t: TYPE) -> Vec<u8> {
        let mut p = Packet::new_query(7);
        p.set_flags(PacketFlag::RECURSION_DESIRED);
        p.questions.push(Question::new(
            Name::new_unchecked(name),
            QTYPE::TYPE(t),
            QCLASS::CLASS(CLASS::IN),
            false,
        ));
        p.build_bytes_vec().unwrap()
    }

    #[test]
    fn allowed_names_resolve_even_in_nxdomain_mode() {
        let mut s = Stub::new(DnsMode::Nxdomain);
        s.set_egress(vec!["pypi.org".into()]);
        let (q, _) = s.answer(&query("pypi.org", TYPE::A)).unwrap();
        assert_eq!(q[0].answer, "198.18.0.1");
        let (q, _) = s.answer(&query("exfil.invalid", TYPE::A)).unwrap();
        assert_eq!(q[0].answer, "nxdomain");
    }

    #[test]
    fn fake_addresses_are_stable_and_reversible() {
        let mut s = Stub::new(DnsMode::FakeIp);
        let (q, reply) = s.answer(&query("exfil.invalid", TYPE::A)).unwrap();
        assert_eq!(q[0].name, "exfil.invalid");
        assert_eq!(q[0].qtype, "A");
        let r = Packet::parse(&reply).unwrap();
        assert_eq!(r.id(), 7);
        let RData::A(a) = &r.answers[0].rdata else {
            panic!("not an A record")
        };
        let addr = Ipv4Addr::from(a.address);
        assert_eq!(addr, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(s.name_of(addr), Some("exfil.invalid"));
        let (q2, _) = s.answer(&query("exfil.invalid", TYPE::A)).unwrap();
        assert_eq!(q2[0].answer, "198.18.0.1");
        assert_eq!(
            questions(&query("x.test", TYPE::TXT)),
            vec![("x.test".to_owned(), "TXT".to_owned())]
        );
        let (q3, r3) = s.answer(&query("other.test", TYPE::AAAA)).unwrap();
        assert_eq!(q3[0].answer, "nodata");
        assert!(Packet::parse(&r3).unwrap().answers.is_empty());
    }

    #[test]
    fn nxdomain_mode() {
        let mut s = Stub::new(DnsMode::Nxdomain);
        let (q, reply) = s.answer(&query("a.invalid", TYPE::A)).unwrap();
        assert_eq!(q[0].answer, "nxdomain");
        assert_eq!(Packet::parse(&reply).unwrap().rcode(), RCODE::NameError);
    }

    proptest! {
        /// Garbage never panics; it is either ignored or answered.
        #[test]
        fn garbage_is_harmless(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut s = Stub::new(DnsMode::FakeIp);
            let _ = s.answer(&data);
        }
    }
}
