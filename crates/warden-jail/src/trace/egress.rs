//! Egress through the capture network: a connection the jail makes to an address the DNS stub
//! handed out for an allowlisted name is forwarded to the real host, from the supervisor's own
//! network namespace, and recorded when it ends (`net.send` with `captured: forwarded`, bytes
//! each way, SNI or request line, and a canary scan of the first bytes sent).
//!
//! Guarantees: the name comes from the stub's own record of what the program asked for and is
//! checked against the policy's list ([`warden_trace::hosts`]); it is resolved on the host, and
//! a name that resolves to a loopback, link-local, unspecified or multicast address is refused,
//! so an allowlisted name cannot be bent into a path to the host's own services or a cloud
//! metadata endpoint. Each forward is bounded in bytes and idle time, and ends when the run
//! stops.

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

/// What every forward shares: the supervisor's network namespace to connect from, the hub, the
/// run's stop flag and the forwards still running.
#[derive(Debug)]
pub struct Forwarder {
    host_ns: OwnedFd,
    hub: Arc<Hub>,
    stop: Arc<AtomicBool>,
    running: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// Whether a real address is one a forward may reach.
fn reachable(ip: IpAddr) -> bool {
    let v4_bad = |v4: std::net::Ipv4Addr| {
        v4.is_loopback()
            || v4.is_link_local()
            || v4.is_unspecified()
            || v4.is_multicast()
            || v4.is_broadcast()
    };
    match ip {
        IpAddr::V4(v4) => !v4_bad(v4),
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            !(v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || link_local)
                && v6.to_ipv4_mapped().is_none_or(|v4| !v4_bad(v4))
        }
    }
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
        }
    }

    /// Forward `inner` (accepted from the jail, addressed to `dest`) to `host`.
    pub fn start(self: &Arc<Self>, inner: TcpStream, dest: SocketAddr, host: String) {
        let Ok(mut running) = self.running.lock() else {
            return;
        };
        running.retain(|t| !t.is_finished());
        if running.len() >= MAX_FORWARDS {
            tracing::debug!(%dest, "too many forwards; refused");
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("warden-egress".into())
            .spawn(move || me.forward(inner, dest, &host));
        match spawned {
            Ok(t) => running.push(t),
            Err(e) => tracing::debug!(error = %e, "no forward thread"),
        }
    }

    /// Wait for every forward to end (the run has stopped, so they end within a tick).
    pub fn join(&self) {
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
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {host}: {e}"))?
            .collect();
        let mut last = format!("{host} resolves to no reachable address");
        for a in addrs.iter().filter(|a| reachable(a.ip())) {
            match TcpStream::connect_timeout(a, CONNECT) {
                Ok(s) => return Ok(s),
                Err(e) => last = format!("connecting to {a}: {e}"),
            }
        }
        Err(last)
    }

    fn forward(&self, inner: TcpStream, dest: SocketAddr, host: &str) {
        let outer = match self.connect(host, dest.port()) {
            Ok(s) => s,
            Err(e) => {
                let _ = inner.shutdown(Shutdown::Both);
                self.record(dest, host, &[], 0, 0, Some(&e));
                return;
            }
        };
        let clock = Instant::now();
        let last = Arc::new(AtomicU64::new(0));
        let (Ok(inner2), Ok(outer2)) = (inner.try_clone(), outer.try_clone()) else {
            return;
        };
        let (stop, last2) = (self.stop.clone(), last.clone());
        let back = std::thread::Builder::new()
            .name("warden-egress".into())
            .spawn(move || copy(outer2, inner2, &stop, &last2, clock, None));
        let mut first = Vec::new();
        let sent = copy(inner, outer, &self.stop, &last, clock, Some(&mut first));
        let received = back.map_or(0, |t| t.join().unwrap_or(0));
        self.record(dest, host, &first, sent, received, None);
    }

    fn record(
        &self,
        dest: SocketAddr,
        host: &str,
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
            "captured": "forwarded",
            "egress": "allowed",
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

/// Copy `from` to `to` until either side ends, the cap is reached, the run stops or both
/// directions have been idle for [`IDLE`]; the first bytes are kept in `first` when given.
/// Returns the bytes copied.
fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    stop: &AtomicBool,
    last: &AtomicU64,
    clock: Instant,
    mut first: Option<&mut Vec<u8>>,
) -> u64 {
    let _ = from.set_read_timeout(Some(TICK));
    let _ = to.set_write_timeout(Some(IDLE));
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
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
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
    total
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
        ] {
            assert!(!reachable(ip(bad)), "{bad}");
        }
        for ok in ["203.0.113.80", "10.1.2.3", "2001:db8::1"] {
            assert!(reachable(ip(ok)), "{ok}");
        }
    }
}
