//! Egress through the capture network: a connection the jail makes to an address the DNS stub
//! handed out for an allowlisted name is forwarded to the real host, from the supervisor's own
//! network namespace, and recorded when it ends (`net.send` with `captured: forwarded`, bytes
//! each way, SNI or request line, and a canary scan of the first bytes sent).
//!
//! Guarantees: the name comes from the stub's own record of what the program asked for and is
//! checked, with the port, against the policy's list ([`warden_trace::hosts`]); the program's
//! first bytes must name that same host (the TLS SNI, or the HTTP `Host`), and on a plaintext
//! HTTP connection so must every later request kept alive on it (found by its framing,
//! [`warden_trace::requests`], before the bytes that complete its head are forwarded; a stream
//! that cannot be framed, or is framed ambiguously, is closed), so a shared front end cannot be asked for another site; inside TLS nothing after
//! the ClientHello can be read without opening it, so a TLS connection is checked by its SNI
//! alone; the name is resolved on the host as a fully qualified
//! name, and an answer that is loopback, link-local, private (RFC 1918, CGNAT, unique-local),
//! unspecified, multicast, one of the host's own addresses, or one the kernel's route lookup
//! says it delivers to the host itself (a `local` route such as an AnyIP range, broadcast,
//! multicast: [`super::route`]) is refused, so an allowlisted name
//! cannot be bent into a path to the host's own services, its network or a cloud metadata
//! endpoint. Each forward is bounded in bytes, idle time and connect time, is shut down when
//! the run stops, and every refusal is recorded.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use warden_events::EventKind;

use super::Hub;
use super::net::MAX_CAPTURE;
use super::targets::Targets;

/// Forwards running at once, at most (more are refused: closed at once).
pub const MAX_FORWARDS: usize = 32;
/// Bytes forwarded per direction and connection, at most.
pub const MAX_BYTES: u64 = 1 << 30;
/// A forward with no traffic either way for this long is closed.
const IDLE: Duration = Duration::from_secs(120);
/// How long connecting to the real host may take.
const CONNECT: Duration = Duration::from_secs(10);
/// How often a blocked copy looks at the stop flag and the idle clock.
const TICK: Duration = Duration::from_millis(200);
/// How long the program has to say which host it wants (its ClientHello or request).
const FIRST: Duration = Duration::from_secs(5);
/// Bytes read to find the host, at most: a whole request head up to the framing's own bound
/// (the longest URL the web tools accept, 4 KiB, with its headers fits many times over).
const FIRST_MAX: usize = warden_trace::requests::MAX_HEAD;
/// How long one write to either side may block.
const WRITE: Duration = Duration::from_secs(10);

/// Whether a real address is one a forward may reach (the host's own addresses are checked
/// separately).
fn reachable(ip: IpAddr) -> bool {
    let v4_bad = |v4: std::net::Ipv4Addr| {
        let [a, b, ..] = v4.octets();
        v4.is_loopback()
            || v4.is_link_local()
            || v4.is_unspecified()
            || v4.is_multicast()
            || v4.is_broadcast()
            || v4.is_private()
            || (a == 100 && (64..128).contains(&b)) // CGNAT, 100.64.0.0/10
            || a == 0
    };
    match ip {
        IpAddr::V4(v4) => !v4_bad(v4),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            let link_local = (first & 0xffc0) == 0xfe80;
            let site_local = (first & 0xffc0) == 0xfec0;
            let unique_local = (first & 0xfe00) == 0xfc00;
            let nat64 = v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || link_local
                || site_local
                || unique_local
                || nat64)
                && v6.to_ipv4_mapped().is_none_or(|v4| !v4_bad(v4))
        }
    }
}

/// The addresses of the host's own interfaces (in the namespace the caller is in).
pub fn own_addresses() -> Vec<IpAddr> {
    nix::ifaddrs::getifaddrs()
        .map(|list| {
            list.filter_map(|i| i.address)
                .filter_map(|a| {
                    a.as_sockaddr_in()
                        .map(|v4| IpAddr::V4(v4.ip()))
                        .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the first bytes name `host`: the SNI of a TLS ClientHello, or the `Host` of an HTTP
/// request (its port dropped).
fn names_host(first: &[u8], host: &str) -> Result<(), String> {
    let sniffed = warden_trace::sniff(first);
    let claimed = match sniffed.protocol {
        "tls" => sniffed.sni,
        "http" => sniffed
            .host
            .map(|h| h.rsplit_once(':').map_or(h.clone(), |(n, _)| n.to_owned())),
        _ => None,
    };
    let same = |c: &str| {
        c.trim_end_matches('.')
            .eq_ignore_ascii_case(host.trim_end_matches('.'))
    };
    match claimed {
        Some(c) if same(&c) => Ok(()),
        Some(c) => Err(format!("the connection asks for {c:?}, not {host}")),
        None => Err(format!(
            "the connection does not name its host ({} without SNI or Host)",
            sniffed.protocol
        )),
    }
}

/// What every forward shares: the supervisor's network namespace to connect from, the hub, the
/// run's stop flag, the forwards still running and their sockets (shut down when the run
/// stops, so no copy outlives it).
#[derive(Debug)]
pub struct Forwarder {
    host_ns: OwnedFd,
    hub: Arc<Hub>,
    stop: Arc<AtomicBool>,
    running: Mutex<Vec<std::thread::JoinHandle<()>>>,
    sockets: Mutex<Vec<(u64, TcpStream)>>,
    next_socket: AtomicU64,
}

impl Forwarder {
    /// A forwarder connecting from the namespace `host_ns` (the caller's, opened before the
    /// network thread moves into the jail's).
    pub fn new(host_ns: OwnedFd, hub: Arc<Hub>, stop: Arc<AtomicBool>) -> Forwarder {
        Forwarder {
            host_ns,
            hub,
            stop,
            running: Mutex::new(Vec::new()),
            sockets: Mutex::new(Vec::new()),
            next_socket: AtomicU64::new(1),
        }
    }

    /// Forward `inner` (accepted from the jail, addressed to `dest`) to `host`.
    pub fn start(self: &Arc<Self>, inner: TcpStream, dest: SocketAddr, host: String) {
        let label = host.clone();
        self.spawn(inner, dest, Some(&label), move |me, inner| {
            me.forward(inner, dest, &host);
        });
    }

    /// Relay `inner` (accepted from the jail, addressed to `dest`, a direct target) to the
    /// connection `targets` opened for it.
    pub fn start_target(
        self: &Arc<Self>,
        inner: TcpStream,
        dest: SocketAddr,
        targets: Arc<Targets>,
    ) {
        self.spawn(inner, dest, None, move |me, inner| {
            match targets.take(dest) {
                Some(outer) => me.relay(inner, outer, dest, None, Vec::new(), NO_GUARD),
                None => {
                    let _ = inner.shutdown(Shutdown::Both);
                    me.record(dest, None, &[], 0, 0, Some("the target cannot be reached"));
                }
            }
        });
    }

    fn spawn(
        self: &Arc<Self>,
        inner: TcpStream,
        dest: SocketAddr,
        host: Option<&str>,
        work: impl FnOnce(&Forwarder, TcpStream) + Send + 'static,
    ) {
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        running.retain(|t| !t.is_finished());
        if running.len() >= MAX_FORWARDS {
            drop(running);
            let why = format!("more than {MAX_FORWARDS} forwards at once");
            self.record(dest, host, &[], 0, 0, Some(&why));
            return;
        }
        let kept = self.keep(&inner);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("warden-egress".into())
            .spawn(move || {
                work(&me, inner);
                me.forget(kept);
            });
        match spawned {
            Ok(t) => running.push(t),
            Err(e) => tracing::debug!(error = %e, "no forward thread"),
        }
    }

    /// Keep a handle on `s` so [`Forwarder::join`] can shut it down; its key for
    /// [`Forwarder::forget`].
    fn keep(&self, s: &TcpStream) -> Option<u64> {
        let id = self.next_socket.fetch_add(1, Ordering::Relaxed);
        let (Ok(mut list), Ok(c)) = (self.sockets.lock(), s.try_clone()) else {
            return None;
        };
        list.push((id, c));
        Some(id)
    }

    /// Let go of the handle kept as `id` (its forward is over: the descriptor is closed now,
    /// not at the end of the run).
    fn forget(&self, id: Option<u64>) {
        if let (Some(id), Ok(mut list)) = (id, self.sockets.lock()) {
            list.retain(|(k, _)| *k != id);
        }
    }

    /// End every forward (the run has stopped) and wait for them.
    pub fn join(&self) {
        let sockets = self
            .sockets
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        for (_, s) in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
        let all = self
            .running
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        for t in all {
            let _ = t.join();
        }
    }

    fn connect(&self, host: &str, port: u16) -> Result<TcpStream, String> {
        nix::sched::setns(&self.host_ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("joining the host's network namespace: {e}"))?;
        let deadline = Instant::now() + CONNECT;
        // Fully qualified first, so the resolver's search list does not get to rewrite it; then
        // as written (a name from /etc/hosts only resolves that way).
        let bare = host.trim_end_matches('.');
        let addrs: Vec<SocketAddr> = (format!("{bare}."), port)
            .to_socket_addrs()
            .or_else(|_| (bare, port).to_socket_addrs())
            .map_err(|e| format!("resolving {host}: {e}"))?
            .collect();
        let own = own_addresses();
        let mut last = format!("{host} resolves to no address a forward may reach");
        for a in addrs
            .iter()
            .filter(|a| reachable(a.ip()) && !own.contains(&a.ip()))
        {
            // Asked of the kernel, in the namespace that connects: an address no interface
            // carries can still be the host's own (a `local` route, broadcast, multicast).
            match super::route::delivered_locally(a.ip()) {
                Ok(None) => {}
                Ok(Some(kind)) => {
                    last = format!(
                        "{a} is this host's own: the kernel delivers it locally (a {kind} route)"
                    );
                    continue;
                }
                Err(e) => {
                    last = format!("{a}: the route lookup failed ({e}), so it is refused");
                    continue;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stop.load(Ordering::Acquire) {
                break;
            }
            match TcpStream::connect_timeout(a, left) {
                Ok(s) => return Ok(s),
                Err(e) => last = format!("connecting to {a}: {e}"),
            }
        }
        Err(last)
    }

    /// The first bytes the program sends: until they name a host (a TLS ClientHello's SNI, or
    /// a whole HTTP request head), [`FIRST_MAX`] bytes or [`FIRST`]. Nothing read is dropped:
    /// every byte is forwarded once the host is checked.
    fn first_bytes(&self, inner: &mut TcpStream) -> Vec<u8> {
        let _ = inner.set_read_timeout(Some(TICK));
        let until = Instant::now() + FIRST;
        let mut first = Vec::new();
        let mut buf = [0u8; 4096];
        while first.len() < FIRST_MAX
            && Instant::now() < until
            && !self.stop.load(Ordering::Acquire)
        {
            let room = buf.len().min(FIRST_MAX - first.len());
            match inner.read(&mut buf[..room]) {
                Ok(0) => break,
                Ok(n) => {
                    // Only the new bytes (and the three before them) can end the head.
                    let from = first.len().saturating_sub(3);
                    first.extend_from_slice(&buf[..n]);
                    let s = warden_trace::sniff(&first);
                    let complete = s.sni.is_some()
                        || (s.protocol == "http"
                            && first[from..].windows(4).any(|w| w == b"\r\n\r\n"));
                    if complete {
                        break;
                    }
                }
                Err(e) if waiting(&e) => {}
                Err(_) => break,
            }
        }
        first
    }

    fn forward(&self, mut inner: TcpStream, dest: SocketAddr, host: &str) {
        let first = self.first_bytes(&mut inner);
        let whole = warden_trace::sniff(&first).protocol != "http"
            || first.windows(4).any(|w| w == b"\r\n\r\n");
        let opened = if whole {
            names_host(&first, host)
        } else {
            Err(format!(
                "the request head did not end within {FIRST_MAX} bytes or {} s: its host is unknown",
                FIRST.as_secs()
            ))
        }
        .and_then(|()| self.connect(host, dest.port()));
        let mut outer = match opened {
            Ok(s) => s,
            Err(e) => {
                let _ = inner.shutdown(Shutdown::Both);
                self.record(dest, Some(host), &first, 0, 0, Some(&e));
                return;
            }
        };
        // Plaintext HTTP: every request on the connection must name the host, the first ones
        // (already in `first`) included.
        let mut requests = None;
        if warden_trace::sniff(&first).protocol == "http" {
            let mut r = warden_trace::requests::Requests::new();
            let checked = r
                .feed(&first)
                .map_err(|e| e.to_string())
                .and_then(|hosts| same_hosts(&hosts, host));
            if let Err(e) = checked {
                let _ = inner.shutdown(Shutdown::Both);
                self.record(dest, Some(host), &first, 0, 0, Some(&e));
                return;
            }
            requests = Some(r);
        }
        if outer.write_all(&first).is_err() {
            let _ = inner.shutdown(Shutdown::Both);
            self.record(
                dest,
                Some(host),
                &first,
                0,
                0,
                Some("the host closed at once"),
            );
            return;
        }
        let guard = requests.map(|mut r| {
            let host = host.to_owned();
            move |chunk: &[u8]| {
                r.feed(chunk)
                    .map_err(|e| format!("a later request on the kept-alive connection: {e}"))
                    .and_then(|hosts| same_hosts(&hosts, &host))
            }
        });
        self.relay(inner, outer, dest, Some(host), first, guard);
    }

    /// Copy both ways between `inner` and `outer` (`first`, already sent, counts as sent) and
    /// record the connection when it ends.
    fn relay(
        &self,
        inner: TcpStream,
        outer: TcpStream,
        dest: SocketAddr,
        host: Option<&str>,
        first: Vec<u8>,
        guard: Option<impl FnMut(&[u8]) -> Result<(), String>>,
    ) {
        let kept = self.keep(&outer);
        let clock = Instant::now();
        let last = Arc::new(AtomicU64::new(0));
        let (Ok(inner2), Ok(outer2)) = (inner.try_clone(), outer.try_clone()) else {
            self.forget(kept);
            return;
        };
        let (stop, last2) = (self.stop.clone(), last.clone());
        let back = std::thread::Builder::new()
            .name("warden-egress".into())
            .spawn(move || copy(outer2, inner2, &stop, &last2, clock, None, NO_GUARD).0);
        let mut rest = first.clone();
        let (copied, refused) = copy(
            inner,
            outer,
            &self.stop,
            &last,
            clock,
            Some(&mut rest),
            guard,
        );
        let sent = first.len() as u64 + copied;
        let received = back.map_or(0, |t| t.join().unwrap_or(0));
        self.forget(kept);
        self.record(dest, host, &rest, sent, received, refused.as_deref());
    }

    fn record(
        &self,
        dest: SocketAddr,
        host: Option<&str>,
        first: &[u8],
        sent: u64,
        received: u64,
        error: Option<&str>,
    ) {
        let sniffed = warden_trace::sniff(first);
        let preview = String::from_utf8_lossy(&first[..first.len().min(256)]).into_owned();
        let data = json!({
            "address": dest.ip().to_string(),
            "port": dest.port(),
            "host": host,
            "bytes": sent,
            "bytes_received": received,
            "captured": if host.is_some() { "forwarded" } else { "target" },
            "egress": if host.is_some() { "allowed" } else { "target" },
            "protocol": sniffed.protocol,
            "sni": sniffed.sni,
            "request_line": sniffed.request_line,
            "http_host": sniffed.host,
            "preview": preview,
            "error": error,
        });
        let id = self.hub.record(EventKind::NetSend, None, data);
        let ctx = json!({
            "where": "net",
            "address": dest.ip().to_string(),
            "port": dest.port(),
            "event": id,
        });
        self.hub.scan(first, None, &ctx);
    }
}

/// A check on the bytes of one direction: `Err(why)` stops the copy before they are written.
type Guard = fn(&[u8]) -> Result<(), String>;

/// No check on a direction's bytes.
const NO_GUARD: Option<Guard> = None;

/// Every host of `hosts` (requests found on a connection) is `host`; else why not.
fn same_hosts(hosts: &[Option<String>], host: &str) -> Result<(), String> {
    for h in hosts {
        match h {
            Some(h)
                if h.trim_end_matches('.')
                    .eq_ignore_ascii_case(host.trim_end_matches('.')) => {}
            Some(h) => {
                return Err(format!(
                    "a request on the connection asks for {h:?}, not {host}"
                ));
            }
            None => return Err("a request on the connection does not name its host".into()),
        }
    }
    Ok(())
}

/// A read that only timed out (or was interrupted): nothing is wrong yet.
fn waiting(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// Copy `from` to `to` until either side ends, the cap is reached, the run stops, both
/// directions have been idle for [`IDLE`] or `guard` refuses a chunk (which is then not
/// written, and both sides are closed); the first bytes are kept in `first` when given.
/// Returns the bytes copied and the guard's refusal, if any.
fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    stop: &AtomicBool,
    last: &AtomicU64,
    clock: Instant,
    mut first: Option<&mut Vec<u8>>,
    mut guard: Option<impl FnMut(&[u8]) -> Result<(), String>>,
) -> (u64, Option<String>) {
    let mut refused = None;
    let _ = from.set_read_timeout(Some(TICK));
    let _ = to.set_write_timeout(Some(WRITE));
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    let now_ms = || u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    loop {
        if stop.load(Ordering::Acquire) {
            break;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                if let Some(Err(e)) = guard.as_mut().map(|g| g(chunk)) {
                    refused = Some(e);
                    let _ = from.shutdown(Shutdown::Both);
                    let _ = to.shutdown(Shutdown::Both);
                    break;
                }
                if let Some(f) = first.as_deref_mut() {
                    let room = MAX_CAPTURE.saturating_sub(f.len());
                    f.extend_from_slice(&chunk[..room.min(n)]);
                }
                if to.write_all(chunk).is_err() {
                    break;
                }
                last.store(now_ms(), Ordering::Release);
                total += n as u64;
                if total >= MAX_BYTES {
                    break;
                }
            }
            Err(e) if waiting(&e) => {
                let idle = now_ms().saturating_sub(last.load(Ordering::Acquire));
                if u128::from(idle) >= IDLE.as_millis() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    // The other side learns this direction is over; a stopped run closes both.
    let _ = to.shutdown(Shutdown::Write);
    if stop.load(Ordering::Acquire) {
        let _ = from.shutdown(Shutdown::Both);
    }
    (total, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_services_and_metadata_are_unreachable() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for bad in [
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "10.1.2.3",
            "172.17.0.1",
            "192.168.1.1",
            "100.100.100.200",
            "fd00:ec2::254",
            "fec0::1",
            "64:ff9b::a9fe:a9fe",
            "0.1.2.3",
        ] {
            assert!(!reachable(ip(bad)), "{bad}");
        }
        for ok in [
            "203.0.113.80",
            "151.101.0.223",
            "2001:db8::1",
            "100.128.0.1",
        ] {
            assert!(reachable(ip(ok)), "{ok}");
        }
    }

    #[test]
    fn the_first_bytes_must_name_the_allowlisted_host() {
        let get = |host: &str| format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
        assert!(names_host(&get("pypi.org"), "pypi.org").is_ok());
        assert!(names_host(&get("PyPI.org:443"), "pypi.org").is_ok());
        assert!(names_host(&get("evil.test"), "pypi.org").is_err());
        assert!(names_host(b"GET / HTTP/1.0\r\n\r\n", "pypi.org").is_err());
        assert!(
            names_host(b"\x16\x03\x01", "pypi.org").is_err(),
            "TLS without SNI"
        );
        assert!(names_host(b"SSH-2.0-x\r\n", "pypi.org").is_err());
        assert!(names_host(b"", "pypi.org").is_err());
    }
}
