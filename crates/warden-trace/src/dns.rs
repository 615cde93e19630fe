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

/// A program that splits a secret over several DNS queries (one chunk per query, as DNS
/// tunnels do) shows no whole secret in any one name. [`SplitNames`] joins, per attribution
/// window and per registered domain (the name's last two labels), the labels in front of it in
/// the order the queries came: all of them, and the first label of each query alone (for
/// `CHUNK.SEQ.domain` shapes), so the matcher sees the secret whole again.
///
/// Bounded: at most [`SPLIT_DOMAINS`] domains per window (past that, the domain queried least
/// recently makes way), [`SPLIT_BYTES`] characters per join (past that the oldest are
/// dropped); a new window starts afresh.
#[derive(Debug, Default)]
pub struct SplitNames {
    window: Option<String>,
    by_domain: std::collections::HashMap<String, Joins>,
    /// The most direct find of each canary, per domain.
    reported: std::collections::HashMap<String, crate::Reported>,
    clock: u64,
}

/// The joins of one domain, and the last name added (a resolver asks for A and AAAA, and
/// retries: a repeat of the last name adds nothing).
#[derive(Debug, Default)]
struct Joins {
    all: String,
    first: String,
    last: String,
    /// When it was last added to (the order of [`SplitNames::add`] calls).
    at: u64,
}

/// Registered domains joined per window, at most.
pub const SPLIT_DOMAINS: usize = 64;
/// Characters kept per join, at most.
pub const SPLIT_BYTES: usize = 4096;

impl SplitNames {
    /// Add the query `name` made in `window`; the joins of its domain to search, when it has
    /// labels in front of its domain (none otherwise).
    pub fn add(&mut self, window: Option<&str>, name: &str) -> Vec<String> {
        if self.window.as_deref() != window {
            self.window = window.map(str::to_owned);
            self.by_domain.clear();
            self.reported.clear();
        }
        let labels: Vec<&str> = name
            .trim_end_matches('.')
            .split('.')
            .filter(|l| !l.is_empty())
            .collect();
        if labels.len() < 3 {
            return Vec::new();
        }
        let (front, domain) = labels.split_at(labels.len() - 2);
        let domain = domain.join(".").to_ascii_lowercase();
        // Past the bound, the domain queried least recently makes way: a program cannot
        // query many junk domains first to keep its tunnel's domain out.
        if !self.by_domain.contains_key(&domain)
            && self.by_domain.len() >= SPLIT_DOMAINS
            && let Some(oldest) = self
                .by_domain
                .iter()
                .min_by_key(|(_, j)| j.at)
                .map(|(d, _)| d.clone())
        {
            self.by_domain.remove(&oldest);
        }
        self.clock += 1;
        let joins = self.by_domain.entry(domain).or_default();
        joins.at = self.clock;
        let lower = name.to_ascii_lowercase();
        if joins.last != lower {
            joins.all.push_str(&front.concat());
            joins.first.push_str(front[0]);
            joins.last = lower;
        }
        let Joins { all, first, .. } = joins;
        for s in [&mut *all, &mut *first] {
            if s.len() > SPLIT_BYTES {
                let cut = s.len() - SPLIT_BYTES;
                let cut = (cut..s.len())
                    .find(|i| s.is_char_boundary(*i))
                    .unwrap_or(s.len());
                s.drain(..cut);
            }
        }
        vec![all.clone(), first.clone()]
    }

    /// Whether `hit`, found in the joins of the domain of `name`, is worth reporting in this
    /// window: the first find of its canary there, or a more direct one than reported (a
    /// join goes on holding a secret once it does).
    pub fn first_report(&mut self, name: &str, hit: &crate::Hit) -> bool {
        let labels: Vec<&str> = name.trim_end_matches('.').rsplitn(3, '.').collect();
        let domain = match labels.as_slice() {
            [tld, sld, ..] => format!("{sld}.{tld}").to_ascii_lowercase(),
            _ => name.to_ascii_lowercase(),
        };
        self.reported.entry(domain).or_default().improves(hit)
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn chunks_over_queries_are_joined_per_domain_and_window() {
        let mut s = SplitNames::default();
        let w = Some("tool_call:3");
        assert!(s.add(w, "example.test").is_empty(), "no labels in front");
        s.add(w, "ghp_abcd.0.t.evil.invalid");
        s.add(w, "ghp_abcd.0.t.evil.invalid");
        s.add(w, "noise.other.test");
        let joins = s.add(w, "efgh1234.1.t.evil.invalid");
        assert!(
            joins.contains(&"ghp_abcd0tefgh12341t".to_owned()),
            "{joins:?}"
        );
        assert!(joins.contains(&"ghp_abcdefgh1234".to_owned()), "{joins:?}");
        // A new window starts afresh.
        let joins = s.add(Some("tool_call:9"), "zz.evil.invalid");
        assert_eq!(joins[1], "zz");
        let hit = |encoding| crate::Hit {
            planted: "env:X".into(),
            encoding,
        };
        assert!(s.first_report("a.evil.invalid", &hit(crate::Form::Fragment)));
        assert!(!s.first_report("b.c.EVIL.invalid", &hit(crate::Form::Fragment)));
        assert!(
            s.first_report("b.c.EVIL.invalid", &hit(crate::Form::Plain)),
            "a better find"
        );
        assert!(!s.first_report("d.evil.invalid", &hit(crate::Form::Xor)));
    }

    #[test]
    fn joins_are_bounded() {
        let mut s = SplitNames::default();
        for i in 0..2000 {
            s.add(None, &format!("abcdefgh{i}.x.test"));
        }
        let j = s.add(None, "end.x.test");
        assert!(j.iter().all(|j| j.len() <= SPLIT_BYTES));
        for i in 0..(SPLIT_DOMAINS + 10) {
            s.add(None, &format!("a.d{i}.test"));
        }
        assert!(s.by_domain.len() <= SPLIT_DOMAINS);
        // Junk domains first cannot keep the tunnel's out.
        let joins = s.add(None, "ghp_abcd.tunnel.test");
        s.add(None, "efgh.tunnel.test");
        assert_eq!(joins[1], "ghp_abcd");
        assert!(s.by_domain.contains_key("tunnel.test"));
    }
}
