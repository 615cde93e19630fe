//! Direct targets: connections the jail may open to listed addresses and networks (a recon
//! tool's scan targets, private ranges included), relayed from the supervisor's side so that
//! what the program sees is what the target answered.
//!
//! How a connect is answered: the tracer stops it (seccomp user notification). A destination
//! outside the list fails with `EACCES` and is recorded. For one on the list the supervisor
//! starts the real connect first, from its own network namespace, and gives the program the
//! same answer: refused (`ECONNREFUSED`, a closed port), unreachable (the real errno), or —
//! only when the real connection is open — a capture listener at the destination and the
//! connect let through, whose accepted connection is then spliced to the open one. A blocking
//! connect waits up to the connect time for that answer (then `ETIMEDOUT`: filtered); a
//! non-blocking one waits a short, per-address hold ([`Targets::hold_for`]) and, unanswered,
//! is parked and answered later ([`super::park`]), so a scanner's connects to a filtered host
//! overlap as they do outside the jail. So a port scanner inside the jail reports the states
//! it would report scanning directly.
//!
//! Guarantees: the check that matters is made on the accepted connection's own local address
//! (the destination the kernel really used), not on the notified one a task could change
//! between our read and the kernel's: a connection accepted for an address outside the list is
//! closed without a byte. A network entry never covers the host's own addresses (list such an
//! address alone to allow it). No name is ever resolved. Every relayed connection is recorded
//! when it ends (`net.send` with `captured: "target"`, bytes each way); relays are bounded in
//! number, bytes and idle time, and end when the run stops.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, SockFlag, SockType, SockaddrStorage, connect, getsockopt, socket, sockopt,
};

use ipnet::IpNet;

/// Entries in a target list, at most.
pub const MAX_TARGETS: usize = 64;
/// Real connections opened ahead of the program's and not yet accepted, at most.
const MAX_PENDING: usize = 64;
/// The hold of an address that has not answered yet, and the shortest hold.
const FIRST_HOLD: Duration = Duration::from_millis(250);
const MIN_HOLD: Duration = Duration::from_millis(5);
/// Addresses whose answer times are remembered, at most.
const MAX_HOSTS: usize = 4096;

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
/// entry that names exactly that address. Loopback, unspecified (`0.0.0.0` reaches loopback),
/// `0.0.0.0/8`, multicast and broadcast addresses are never covered, whatever the list says.
pub fn covered(nets: &[IpNet], ip: IpAddr, own: &[IpAddr]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    // Never loopback (0.0.0.0 and its mapped form connect there too), multicast or broadcast.
    let special = match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified() || v6.is_multicast(),
    };
    let single = |n: &IpNet| n.prefix_len() == n.max_prefix_len();
    !special
        && nets
            .iter()
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
    /// How long connects to each address are held for their answer (see [`Targets::hold_for`]).
    holds: Mutex<HashMap<IpAddr, Duration>>,
}

/// A real connect under way.
#[derive(Debug)]
pub struct InFlight {
    /// The supervisor's socket, connecting.
    pub real: OwnedFd,
    /// When it began.
    pub begun: Instant,
}

/// A real connect, answered at once or under way.
#[derive(Debug)]
pub enum Started {
    /// Answered.
    Done(Decision),
    /// Under way.
    Pending(InFlight),
}

/// The decision for a real connect that failed with `errno`.
fn errno_decision(errno: Option<i32>) -> Decision {
    match errno {
        Some(libc::ECONNREFUSED) => Decision::Fail(libc::ECONNREFUSED),
        Some(libc::ETIMEDOUT) | None => Decision::Fail(libc::ETIMEDOUT),
        Some(e) => Decision::Fail(e),
    }
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
            holds: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `ip` may be reached.
    pub fn allows(&self, ip: IpAddr) -> bool {
        covered(&self.nets, ip, &self.own)
    }

    /// Start the real connect to `dest` (on the list), from the supervisor's namespace.
    pub fn start(&self, dest: SocketAddr) -> Started {
        let begun = Instant::now();
        let family = if dest.is_ipv6() {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
        if let Err(e) = self.join_host() {
            return Started::Done(errno_decision(e.raw_os_error()));
        }
        // Never the host itself, whatever the list covers: an address the kernel delivers
        // locally (a `local` route such as an AnyIP range, broadcast, multicast) is refused as
        // an address off the list is; a lookup that fails refuses too.
        if !matches!(super::route::delivered_locally(dest.ip()), Ok(None)) {
            return Started::Done(Decision::Fail(libc::EACCES));
        }
        let real = match socket(family, SockType::Stream, flags, None) {
            Ok(s) => s,
            Err(e) => return Started::Done(errno_decision(Some(e as i32))),
        };
        match connect(real.as_raw_fd(), &SockaddrStorage::from(dest)) {
            Ok(()) => Started::Done(self.opened(dest, real, begun)),
            Err(Errno::EINPROGRESS) => Started::Pending(InFlight { real, begun }),
            Err(e) => {
                self.answered(dest.ip(), begun.elapsed());
                Started::Done(errno_decision(Some(e as i32)))
            }
        }
    }

    /// Wait up to `wait` for `f`'s answer; `Err(f)` when there is none yet.
    pub fn wait(
        &self,
        dest: SocketAddr,
        f: InFlight,
        wait: Duration,
    ) -> Result<Decision, InFlight> {
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(f.real.as_fd(), PollFlags::POLLOUT)];
        let ready = matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0);
        if !ready {
            return Err(f);
        }
        Ok(self.finish(dest, f))
    }

    /// The answer of `f`, whose socket is ready; an open connection is kept.
    pub fn finish(&self, dest: SocketAddr, f: InFlight) -> Decision {
        match getsockopt(&f.real, sockopt::SocketError) {
            Ok(0) => self.opened(dest, f.real, f.begun),
            Ok(e) => {
                self.answered(dest.ip(), f.begun.elapsed());
                errno_decision(Some(e))
            }
            Err(e) => errno_decision(Some(e as i32)),
        }
    }

    fn opened(&self, dest: SocketAddr, real: OwnedFd, begun: Instant) -> Decision {
        self.answered(dest.ip(), begun.elapsed());
        let stream = TcpStream::from(real);
        let _ = stream.set_nonblocking(false);
        self.keep(dest, stream);
        Decision::Open
    }

    /// How long a connect to `ip` is held for its answer before it is parked: eight times
    /// the time this address took to answer, or, while it has not answered, a quarter of a
    /// second halved after each connect it leaves unanswered (a host that drops everything
    /// costs a few milliseconds a port, not the connect time).
    pub fn hold_for(&self, ip: IpAddr) -> Duration {
        self.holds
            .lock()
            .ok()
            .and_then(|h| h.get(&ip).copied())
            .unwrap_or(FIRST_HOLD)
            .min(self.connect_time)
    }

    fn answered(&self, ip: IpAddr, took: Duration) {
        if let Ok(mut h) = self.holds.lock()
            && (h.len() < MAX_HOSTS || h.contains_key(&ip))
        {
            h.insert(ip, (took * 8).clamp(MIN_HOLD, FIRST_HOLD));
        }
    }

    /// `ip` left a connect unanswered for its whole hold.
    pub fn unanswered(&self, ip: IpAddr) {
        if let Ok(mut h) = self.holds.lock()
            && (h.len() < MAX_HOSTS || h.contains_key(&ip))
        {
            let now = h.get(&ip).copied().unwrap_or(FIRST_HOLD);
            h.insert(ip, (now / 2).max(MIN_HOLD));
        }
    }

    /// Keep `s`, a real connection to `dest`, for the accept of the program's connection.
    pub fn keep(&self, dest: SocketAddr, s: TcpStream) {
        if let Ok(mut p) = self.pending.lock() {
            let total: usize = p.values().map(Vec::len).sum();
            if total >= MAX_PENDING {
                p.clear();
            }
            p.entry(dest).or_default().push(s);
        }
    }

    /// How long a real connect may take before the port counts as filtered.
    pub fn connect_time(&self) -> Duration {
        self.connect_time
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
        self.join_host()?;
        TcpStream::connect_timeout(&dest, self.connect_time)
    }

    /// Move the calling thread into the supervisor's network namespace (it may be one that
    /// joined the jail's): real connects are made from there.
    fn join_host(&self) -> std::io::Result<()> {
        thread_local! {
            /// Whether this thread has joined it (once is enough: nothing moves it back).
            static JOINED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        if !JOINED.get() {
            nix::sched::setns(&self.host_ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
            JOINED.set(true);
        }
        Ok(())
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
