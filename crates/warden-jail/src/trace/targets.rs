//! Direct targets: connections the jail may open to listed addresses and networks (a recon
//! tool's scan targets, private ranges included), relayed from the supervisor's side so that
//! what the program sees is what the target answered.
//!
//! How a connect is answered: the tracer stops it (seccomp user notification) and asks
//! [`Targets::decide`]. A destination outside the list fails with `EACCES` and is recorded;
//! one inside is connected for real first, from the supervisor's network namespace, and the
//! program's connect gets the same answer: refused (`ECONNREFUSED`, a closed port), no answer
//! within the connect time (`ETIMEDOUT`, a filtered port), unreachable (the real errno), or —
//! only when the real connection is open — a capture listener at the destination and the
//! connect let through, whose accepted connection is then spliced to the open one. So a port
//! scanner inside the jail reports the states it would report scanning directly.
//!
//! Guarantees: the check that matters is made on the accepted connection's own local address
//! (the destination the kernel really used), not on the notified one a task could change
//! between our read and the kernel's: a connection accepted for an address outside the list is
//! closed without a byte. A network entry never covers the host's own addresses (list such an
//! address alone to allow it). No name is ever resolved. Every relayed connection is recorded
//! when it ends (`net.send` with `captured: "target"`, bytes each way); relays are bounded in
//! number, bytes and idle time, and end when the run stops.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Duration;

use ipnet::IpNet;

/// Entries in a target list, at most.
pub const MAX_TARGETS: usize = 64;
/// Real connections opened ahead of the program's and not yet accepted, at most.
const MAX_PENDING: usize = 64;
/// How long a real connect may take before the port counts as filtered.
pub const DEFAULT_CONNECT: Duration = Duration::from_millis(1500);

/// Parse one target entry: an address (`192.0.2.7`, `2001:db8::7`) or a network in CIDR
/// notation (`10.20.0.0/24`, `2001:db8::/64`). Host bits set in a network are refused (a typo
/// such as `10.20.0.7/16` would silently widen the list).
pub fn parse_target(entry: &str) -> Result<IpNet, String> {
    let e = entry.trim();
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    let net: IpNet = e
        .parse()
        .map_err(|_| format!("{entry:?} is not an IP address or a CIDR network"))?;
    if net.trunc() != net {
        return Err(format!(
            "{entry:?} has host bits set (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Whether `ip` is on the list `nets`; `own` are the host's own addresses, covered only by an
/// entry that names exactly that address.
pub fn covered(nets: &[IpNet], ip: IpAddr, own: &[IpAddr]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let single = |n: &IpNet| n.prefix_len() == n.max_prefix_len();
    nets.iter()
        .any(|n| n.contains(&ip) && (single(n) || !own.contains(&ip)))
}

/// What the program's connect is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The real connection is open: let the connect through to a capture listener.
    Open,
    /// Fail the connect with this errno (refused by the list, or the target's own answer).
    Fail(i32),
}

impl Decision {
    /// The state a port scanner would report, for the event.
    pub fn state(self) -> &'static str {
        match self {
            Decision::Open => "open",
            Decision::Fail(libc::EACCES) => "not_allowed",
            Decision::Fail(libc::ECONNREFUSED) => "closed",
            Decision::Fail(libc::ETIMEDOUT) => "filtered",
            Decision::Fail(_) => "unreachable",
        }
    }
}

/// The run's target list and its connections opened ahead.
#[derive(Debug)]
pub struct Targets {
    nets: Vec<IpNet>,
    own: Vec<IpAddr>,
    connect_time: Duration,
    host_ns: OwnedFd,
    pending: Mutex<HashMap<SocketAddr, Vec<TcpStream>>>,
}

impl Targets {
    /// A list connecting from the network namespace `host_ns` (the supervisor's).
    pub fn new(nets: Vec<IpNet>, connect_time: Duration, host_ns: OwnedFd) -> Targets {
        Targets {
            nets,
            own: super::egress::own_addresses(),
            connect_time,
            host_ns,
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `ip` may be reached.
    pub fn allows(&self, ip: IpAddr) -> bool {
        covered(&self.nets, ip, &self.own)
    }

    /// Answer a connect to `dest` (see the module docs); an open connection is kept for the
    /// accept that follows.
    pub fn decide(&self, dest: SocketAddr) -> Decision {
        if !self.allows(dest.ip()) {
            return Decision::Fail(libc::EACCES);
        }
        match self.connect(dest) {
            Ok(s) => {
                if let Ok(mut p) = self.pending.lock() {
                    let total: usize = p.values().map(Vec::len).sum();
                    if total >= MAX_PENDING {
                        p.clear();
                    }
                    p.entry(dest).or_default().push(s);
                }
                Decision::Open
            }
            Err(e) => Decision::Fail(match e.kind() {
                ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
                ErrorKind::TimedOut | ErrorKind::WouldBlock => libc::ETIMEDOUT,
                _ => e.raw_os_error().unwrap_or(libc::EHOSTUNREACH),
            }),
        }
    }

    /// The connection opened for the program's connect to `dest`, or a new one (a connect
    /// that was not seen first, such as one whose address changed after it was read); `None`
    /// when `dest` is not on the list or cannot be reached.
    pub fn take(&self, dest: SocketAddr) -> Option<TcpStream> {
        if !self.allows(dest.ip()) {
            return None;
        }
        let ready = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.get_mut(&dest).and_then(Vec::pop));
        ready.or_else(|| self.connect(dest).ok())
    }

    fn connect(&self, dest: SocketAddr) -> std::io::Result<TcpStream> {
        // The calling thread may be one that joined the jail's namespace: connect from ours.
        nix::sched::setns(&self.host_ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(std::io::Error::from)?;
        TcpStream::connect_timeout(&dest, self.connect_time)
    }

    /// Drop every connection still waiting for its accept.
    pub fn clear(&self) {
        if let Ok(mut p) = self.pending.lock() {
            p.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_addresses_or_exact_networks() {
        assert_eq!(
            parse_target("192.0.2.7").unwrap().to_string(),
            "192.0.2.7/32"
        );
        assert_eq!(
            parse_target("10.20.0.0/24").unwrap().to_string(),
            "10.20.0.0/24"
        );
        assert_eq!(
            parse_target("2001:db8::/64").unwrap().to_string(),
            "2001:db8::/64"
        );
        assert!(
            parse_target("10.20.0.7/16")
                .unwrap_err()
                .contains("10.20.0.0/16")
        );
        for bad in [
            "example.org",
            "10.0.0.0/33",
            "",
            "1.2.3.4/",
            "::/129",
            "10.0.0.1:80",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn networks_never_cover_the_hosts_own_addresses() {
        let nets: Vec<IpNet> = ["10.20.0.0/24", "192.0.2.9", "2001:db8::/64"]
            .iter()
            .map(|e| parse_target(e).unwrap())
            .collect();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let own = [ip("10.20.0.1"), ip("192.0.2.9")];
        assert!(covered(&nets, ip("10.20.0.5"), &own));
        assert!(
            !covered(&nets, ip("10.20.0.1"), &own),
            "the host's own, in a network"
        );
        assert!(covered(&nets, ip("192.0.2.9"), &own), "listed alone");
        assert!(covered(&nets, ip("::ffff:10.20.0.5"), &own), "v4-mapped");
        assert!(covered(&nets, ip("2001:db8::5"), &own));
        for no in [
            "10.20.1.5",
            "127.0.0.1",
            "169.254.169.254",
            "2001:db9::1",
            "::1",
        ] {
            assert!(!covered(&nets, ip(no), &own), "{no}");
        }
    }

    #[test]
    fn decisions_name_the_port_state() {
        assert_eq!(Decision::Open.state(), "open");
        assert_eq!(Decision::Fail(libc::ECONNREFUSED).state(), "closed");
        assert_eq!(Decision::Fail(libc::ETIMEDOUT).state(), "filtered");
        assert_eq!(Decision::Fail(libc::EACCES).state(), "not_allowed");
        assert_eq!(Decision::Fail(libc::EHOSTUNREACH).state(), "unreachable");
    }
}
