//! The capture network: a thread that joins the jail's network namespace (and nothing else),
//! makes every address local to its loopback, answers DNS on 127.0.0.53:53 and accepts the
//! connections programs attempt to anywhere, recording what they send first.
//!
//! Guarantees: nothing here creates a route or an interface that leads out of the namespace,
//! so no packet leaves it; the thread never runs code from the jail and writes nothing back to
//! a connection (it reads, records, closes) but the decoy answer of a cloud instance metadata
//! service to a request for the host's credentials ([`warden_trace::imds`]). Everything is bounded: listeners,
//! connections at once, bytes captured per connection and the time a connection is held — a
//! connection is closed as soon as its first message is whole (a TLS ClientHello record, an
//! HTTP request with its body), so a client that waits for an answer fails at once instead of
//! after the hold (servers whose every tool calls an API otherwise spend half a second a call).

use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::json;
use warden_events::EventKind;
use warden_trace::{DnsMode, Stub};

use super::Hub;
use super::egress::Forwarder;
use super::park::{Connector, Job, Parking, Waiting};
use super::targets::{Decision, Started, Targets};

/// Where the stub listens (the jail's resolv.conf names it).
pub const DNS_ADDR: &str = "127.0.0.53:53";
/// Bytes captured per connection, at most.
pub const MAX_CAPTURE: usize = 4096;
/// How long a connection is held open waiting for its first bytes.
const HOLD: Duration = Duration::from_millis(500);
/// Capture listeners, at most (one per destination).
const MAX_LISTENERS: usize = 256;
/// Listeners for direct targets (one per open port met), at most.
const MAX_TARGET_LISTENERS: usize = 2048;
/// Connections held at once, at most (more are accepted and closed at once).
const MAX_CONNECTIONS: usize = 64;
/// How long a connect waits for its listener to be set up.
const ENSURE_WAIT: Duration = Duration::from_millis(500);

type Ack = mpsc::SyncSender<()>;

/// Asks the network thread for capture listeners.
#[derive(Debug)]
struct Listeners {
    requests: Mutex<mpsc::Sender<(SocketAddr, Ack)>>,
    wake: OwnedFd,
}

impl Listeners {
    /// Make sure a capture listener waits at `addr` (bounded wait for the thread's answer).
    fn ensure(&self, addr: SocketAddr) {
        if !captured(&addr) {
            return;
        }
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let sent = self
            .requests
            .lock()
            .map(|tx| tx.send((addr, ack_tx)).is_ok())
            .unwrap_or(false);
        if sent {
            let _ = nix::unistd::write(&self.wake, b"x");
            let _ = ack_rx.recv_timeout(ENSURE_WAIT);
        }
    }
}

/// How a connect to a direct target is answered: now, or later by the connector (the
/// program's connect is told `EINPROGRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetAnswer {
    /// Answered now.
    Now(Decision),
    /// Parked: the connector answers when the target does, and records the event.
    Deferred,
    /// Held: the syscall stays stopped; the connector replies to its notification when the
    /// target answers, and records the event.
    Held,
    /// Not a stream socket (a UDP "connect" only sets a default destination): let it go on,
    /// with no listener; its datagrams land in the capture network, never on a target.
    NotStream,
}

/// The boundary capture of a run (see `warden-capture`).
#[derive(Debug, Clone, Default)]
pub struct Capture {
    /// Run the packet tap (every flow's bytes to the matcher, `net.flow` events).
    pub tap: bool,
    /// Write the traffic to this pcapng file.
    pub pcap: Option<std::path::PathBuf>,
    /// Open TLS with this authority (the jail trusts it).
    pub authority: Option<Arc<warden_capture::Authority>>,
}

/// TLS connections opened at once, at most (more are closed after their hello, as before).
const MAX_TLS: usize = 32;
/// How long an opened TLS connection is read, at most.
const TLS_TIME: Duration = Duration::from_secs(3);
/// Plaintext read from an opened TLS connection, at most.
const TLS_CAPTURE: usize = 1 << 20;

/// The running capture network.
#[derive(Debug)]
pub struct Net {
    listeners: Arc<Listeners>,
    stub: Arc<Mutex<Stub>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    egress: Vec<String>,
    forwarder: Option<Arc<Forwarder>>,
    targets: Option<Arc<Targets>>,
    parking: Option<Arc<Parking>>,
    connector: Option<Connector>,
    tap: Option<warden_capture::Tap>,
    /// What the tap saw, once stopped (or why there was none).
    capture: Mutex<serde_json::Value>,
}

/// Direct targets of a run: the parsed list and how long a real connect may take.
#[derive(Debug, Clone, Default)]
pub struct TargetList {
    /// Addresses and networks.
    pub nets: Vec<ipnet::IpNet>,
    /// How long a real connect may take before the port counts as filtered.
    pub connect_time: Duration,
}

/// Whether a connection to `addr` should land on a capture listener (anything but loopback and
/// the unspecified address, which behave as usual).
pub fn captured(addr: &SocketAddr) -> bool {
    !(local(addr.ip()) || addr.port() == 0)
}

/// Whether `ip` stays in the jail: loopback or unspecified (a v4-mapped 0.0.0.0 connects to
/// loopback, as 0.0.0.0 does).
pub fn local(ip: IpAddr) -> bool {
    let mapped_loopback = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified()),
        IpAddr::V4(_) => false,
    };
    ip.is_loopback() || ip.is_unspecified() || mapped_loopback
}

/// The name the DNS stub gave the fake address `ip` for; a dual-stack socket's IPv4-mapped
/// address is the IPv4 address it maps.
pub(crate) fn name_for(stub: &Mutex<Stub>, ip: IpAddr) -> Option<String> {
    let IpAddr::V4(v4) = ip.to_canonical() else {
        return None;
    };
    stub.lock().ok()?.name_of(v4).map(str::to_owned)
}

impl Net {
    /// Join `netns` on a new thread, set the namespace up and start serving; connections to
    /// names on `egress` are forwarded from the caller's network namespace. Returns once the
    /// stub is listening (or the set-up failed).
    pub fn start(
        netns: OwnedFd,
        hub: Arc<Hub>,
        mode: DnsMode,
        egress: Vec<String>,
        targets: TargetList,
        capture: Capture,
    ) -> Result<Net, String> {
        let tap_ns = if capture.tap {
            Some(netns.try_clone().map_err(|e| format!("netns: {e}"))?)
        } else {
            None
        };
        let (wake_r, wake_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(|e| format!("pipe: {e}"))?;
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let mut stub = Stub::new(mode);
        stub.set_egress(egress.clone());
        let stub = Arc::new(Mutex::new(stub));
        let stop = Arc::new(AtomicBool::new(false));
        // This thread's namespace, opened before the network thread leaves it.
        let own_ns = || {
            std::fs::File::open("/proc/thread-self/ns/net")
                .map(OwnedFd::from)
                .map_err(|e| format!("the host's network namespace: {e}"))
        };
        let forwarder = if egress.is_empty() && targets.nets.is_empty() {
            None
        } else {
            Some(Arc::new(Forwarder::new(
                own_ns()?,
                hub.clone(),
                stop.clone(),
            )))
        };
        let targets = if targets.nets.is_empty() {
            None
        } else {
            // Listeners, relays and parked connects each hold descriptors.
            raise_open_files();
            Some(Arc::new(Targets::new(
                targets.nets,
                targets.connect_time,
                own_ns()?,
            )))
        };
        let (stub2, stop2) = (stub.clone(), stop.clone());
        let (egress2, forwarder2, targets2) = (egress.clone(), forwarder.clone(), targets.clone());
        let (hub2, park) = (hub.clone(), targets.is_some());
        let authority = capture.authority.clone();
        // The tap first: it must see the first packet the jail sends.
        let mut status = json!(null);
        let tap = tap_ns.and_then(|ns| {
            let observer = Arc::new(super::boundary::Boundary::new(hub.clone(), stub.clone()));
            let config = warden_capture::Config {
                pcap: capture.pcap.clone(),
                pcap_cap: 0,
            };
            warden_capture::Tap::start(ns, observer, config)
                .map_err(|e| {
                    tracing::warn!("the boundary capture is off: {e}");
                    status = json!({ "error": e });
                })
                .ok()
        });
        let thread = std::thread::Builder::new()
            .name("warden-net".into())
            .spawn(move || {
                let setup = join_and_prepare(&netns);
                let dns = match setup {
                    Ok(dns) => {
                        let _ = ready_tx.send(Ok(park.then(Parking::open)));
                        dns
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let mut serve = Serve {
                    hub: hub2,
                    stub: stub2,
                    dns,
                    wake: wake_r,
                    requests: rx,
                    listeners: Vec::new(),
                    conns: Vec::new(),
                    egress: egress2,
                    forwarder: forwarder2,
                    targets: targets2,
                    authority,
                    tls_open: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
                    split: warden_trace::SplitNames::default(),
                };
                serve.run(&stop2);
            })
            .map_err(|e| format!("thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(parking)) => {
                let parking = parking.map(Arc::new);
                let listeners = Arc::new(Listeners {
                    requests: Mutex::new(tx),
                    wake: wake_w,
                });
                let connector = match (&targets, &parking) {
                    (Some(t), Some(p)) => {
                        let l = listeners.clone();
                        let ensure: super::park::Ensure = Arc::new(move |a| l.ensure(a));
                        Connector::start(t.clone(), p.clone(), hub.clone(), ensure, stop.clone())
                            .map_err(|e| tracing::debug!(error = %e, "no connector"))
                            .ok()
                    }
                    _ => None,
                };
                Ok(Net {
                    listeners,
                    stub,
                    stop,
                    thread: Mutex::new(Some(thread)),
                    egress,
                    forwarder,
                    targets,
                    parking,
                    connector,
                    tap,
                    capture: Mutex::new(status),
                })
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err("the network thread ended during set-up".into()),
        }
    }

    /// Make sure a capture listener waits at `addr` before a connect to it proceeds.
    pub fn ensure_listener(&self, addr: SocketAddr) {
        self.listeners.ensure(addr);
    }

    /// The name a fake address stands for.
    pub fn host_of(&self, ip: IpAddr) -> Option<String> {
        name_for(&self.stub, ip)
    }

    /// How a connect to `dest` is answered when the run has direct targets (`None` without
    /// them, or for an address the DNS stub handed out: those follow the egress rules). An
    /// open target gets its capture listener before this returns.
    ///
    /// `sock` is a duplicate of the program's socket when it could be taken: a socket that is
    /// not a stream is none of the targets' business (`None`), and a non-blocking one is
    /// parked and answered later ([`super::park`]), its event recorded then from `event`.
    pub fn decide_target(
        &self,
        dest: SocketAddr,
        sock: Option<OwnedFd>,
        notif: Option<(&Arc<OwnedFd>, u64)>,
        pid: Option<i32>,
        event: &serde_json::Value,
    ) -> Option<TargetAnswer> {
        let targets = self.targets.as_ref()?;
        if !captured(&dest) || self.host_of(dest.ip()).is_some() {
            return None;
        }
        if sock.as_ref().is_some_and(|s| !super::park::is_stream(s)) {
            return Some(TargetAnswer::NotStream);
        }
        if !targets.allows(dest.ip()) {
            return Some(TargetAnswer::Now(Decision::Fail(libc::EACCES)));
        }
        let started = match targets.start(dest) {
            Started::Done(d) => return Some(TargetAnswer::Now(self.opened(d, dest))),
            Started::Pending(f) => f,
        };
        // A non-blocking connect the target has not answered yet is parked; a blocking one is
        // held, its reply given by the connector. Where a late refusal cannot be passed on to
        // a parked socket, it is held briefly first, so most answers come before parking.
        let spot = self.parking.as_ref().and_then(|p| p.park_for(&dest));
        let room = self.connector.as_ref().filter(|c| c.has_room());
        let parkable = match (&sock, room, spot) {
            (Some(s), Some(_), Some(spot)) if super::park::deferrable(s) => Some(spot),
            _ => None,
        };
        let refusable = self.parking.as_ref().is_some_and(|p| p.can_refuse(&dest));
        let wait = match (parkable, room) {
            (Some(_), _) if refusable => Duration::ZERO,
            (Some(_), _) => targets.hold_for(dest.ip()),
            (None, Some(_)) if notif.is_some() => Duration::ZERO,
            _ => targets.connect_time(),
        };
        let in_flight = match targets.wait(dest, started, wait) {
            Ok(d) => return Some(TargetAnswer::Now(self.opened(d, dest))),
            Err(f) => f,
        };
        if !wait.is_zero() {
            targets.unanswered(dest.ip());
        }
        let deadline = in_flight.begun + targets.connect_time();
        let waiting = match (parkable, sock, room, notif) {
            (Some(spot), Some(s), Some(_), _) => match super::park::park(&s, spot) {
                Ok(local) => Waiting::Parked { sock: s, local },
                Err(e) => return Some(TargetAnswer::Now(Decision::Fail(e as i32))),
            },
            (None, _, Some(_), Some((listener, id))) => Waiting::Held {
                listener: listener.clone(),
                id,
            },
            _ => return Some(TargetAnswer::Now(Decision::Fail(libc::ETIMEDOUT))),
        };
        let held = matches!(waiting, Waiting::Held { .. });
        let job = Job {
            dest,
            waiting,
            pid,
            data: event.clone(),
            deadline,
            real: in_flight,
        };
        // A connector that is gone cannot answer: a held connect is answered here (a parked
        // one stays parked, as no answer).
        let handed = room.map_or(Err(()), |c| c.submit(job).map_err(drop));
        Some(match (held, handed) {
            (true, Ok(())) => TargetAnswer::Held,
            (true, Err(())) => TargetAnswer::Now(Decision::Fail(libc::ETIMEDOUT)),
            (false, _) => TargetAnswer::Deferred,
        })
    }

    /// An open target gets its capture listener before the program's connect goes on.
    fn opened(&self, d: Decision, dest: SocketAddr) -> Decision {
        if d == Decision::Open {
            self.ensure_listener(dest);
        }
        d
    }

    /// Whether a connect to `dest` may concern the run's direct targets (the run has some and
    /// the address is one a target check applies to): then the program's socket is copied.
    pub fn concerns_targets(&self, dest: &SocketAddr) -> bool {
        self.targets.is_some() && captured(dest)
    }

    /// Whether connections to `host` on `port` are forwarded for real.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        warden_trace::hosts::allowed(&self.egress, host, port)
    }

    /// Wait until the boundary capture has seen every packet sent so far (before a new
    /// attribution window opens).
    pub fn sync_capture(&self) {
        if let Some(t) = &self.tap {
            t.sync();
        }
    }

    /// What the boundary capture saw (after [`Net::stop`]): packets, flows, drops, the pcapng
    /// file; or why there was no capture; `null` when none was asked for.
    pub fn capture_summary(&self) -> serde_json::Value {
        self.capture.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Stop serving (connections still held and forwards are recorded first).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(c) = &self.connector {
            c.stop();
        }
        let _ = nix::unistd::write(&self.listeners.wake, b"x");
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
        if let Some(tap) = &self.tap {
            let s = tap.stop();
            let pcap = s
                .pcap
                .map(|w| json!({ "packets": w.packets, "left_out": w.left_out }));
            if let Ok(mut c) = self.capture.lock() {
                *c = json!({
                    "packets": s.packets,
                    "flows": s.flows,
                    "dropped": s.dropped,
                    "unreadable": s.unreadable,
                    "pcap": pcap,
                    "pcap_error": s.pcap_error,
                });
            }
        }
        if let Some(f) = &self.forwarder {
            f.join();
        }
        if let Some(t) = &self.targets {
            t.clear();
        }
    }
}

fn join_and_prepare(netns: &OwnedFd) -> Result<UdpSocket, String> {
    nix::sched::setns(netns, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("joining the jail's network namespace: {e}"))?;
    super::netlink::capture_everything().map_err(|e| format!("capture routes: {e}"))?;
    // Unprivileged ICMP echo ("ping") sockets, as distributions' defaults allow them (systemd
    // sets this range): a new namespace allows them to nobody, which no real host looks like,
    // and an echo's data is a channel out that the boundary capture reads. Best effort: this
    // thread is in the jail's namespace, so the write concerns it only.
    let _ = std::fs::write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647");
    let dns = UdpSocket::bind(DNS_ADDR).map_err(|e| format!("DNS stub on {DNS_ADDR}: {e}"))?;
    dns.set_nonblocking(true)
        .map_err(|e| format!("DNS stub: {e}"))?;
    Ok(dns)
}

/// Raise this process's soft limit on open files to its hard limit.
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// A non-blocking listener at `addr`. Free-bound: an IPv6 address is not local merely because
/// the capture route makes every address local (IPv4 binds by route; IPv6 wants the address on
/// an interface), so without it a connection to an IPv6 destination met no listener.
fn capture_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use nix::sys::socket::{
        AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage, bind, listen, setsockopt,
        socket, sockopt,
    };
    let family = if addr.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let flags = SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK;
    let fd = socket(family, SockType::Stream, flags, None)?;
    setsockopt(&fd, sockopt::IpFreebind, &true)?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))?;
    listen(&fd, Backlog::new(128).unwrap_or(Backlog::MAXCONN))?;
    Ok(TcpListener::from(fd))
}

struct Conn {
    stream: TcpStream,
    dest: SocketAddr,
    since: Instant,
    buf: Vec<u8>,
}

struct Serve {
    hub: Arc<Hub>,
    stub: Arc<Mutex<Stub>>,
    dns: UdpSocket,
    wake: OwnedFd,
    requests: mpsc::Receiver<(SocketAddr, Ack)>,
    listeners: Vec<(SocketAddr, TcpListener)>,
    conns: Vec<Conn>,
    egress: Vec<String>,
    forwarder: Option<Arc<Forwarder>>,
    targets: Option<Arc<Targets>>,
    /// Opens TLS, when the run has an authority.
    authority: Option<Arc<warden_capture::Authority>>,
    /// TLS connections being opened now.
    tls_open: Arc<std::sync::atomic::AtomicUsize>,
    /// The queries of the window, joined per domain.
    split: warden_trace::SplitNames,
}

impl Serve {
    fn run(&mut self, stop: &AtomicBool) {
        loop {
            if stop.load(Ordering::Acquire) {
                self.drain_requests();
                for c in std::mem::take(&mut self.conns) {
                    self.finish(c);
                }
                return;
            }
            let (dns_ready, wake_ready, ready_l, ready_c) = {
                let mut fds = vec![
                    PollFd::new(self.dns.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
                ];
                fds.extend(
                    self.listeners
                        .iter()
                        .map(|(_, l)| PollFd::new(l.as_fd(), PollFlags::POLLIN)),
                );
                fds.extend(
                    self.conns
                        .iter()
                        .map(|c| PollFd::new(c.stream.as_fd(), PollFlags::POLLIN)),
                );
                let _ = poll(&mut fds, PollTimeout::from(50u16));
                let r: Vec<bool> = fds
                    .iter()
                    .map(|f| f.revents().is_some_and(|e| !e.is_empty()))
                    .collect();
                let nl = self.listeners.len();
                (r[0], r[1], r[2..2 + nl].to_vec(), r[2 + nl..].to_vec())
            };
            if wake_ready {
                let mut buf = [0u8; 64];
                while nix::unistd::read(&self.wake, &mut buf).is_ok_and(|n| n > 0) {}
                self.drain_requests();
            }
            if dns_ready {
                self.answer_dns();
            }
            for (i, r) in ready_l.iter().enumerate() {
                if *r {
                    self.accept(i);
                }
            }
            let mut keep = Vec::new();
            let conns = std::mem::take(&mut self.conns);
            for (c, r) in conns
                .into_iter()
                .zip(ready_c.into_iter().chain(std::iter::repeat(false)))
            {
                let mut c = c;
                let done = (r && (read_some(&mut c) || whole(&c.buf))) || c.since.elapsed() >= HOLD;
                if done {
                    self.finish_or_open(c);
                } else {
                    keep.push(c);
                }
            }
            self.conns.extend(keep);
        }
    }

    fn drain_requests(&mut self) {
        while let Ok((addr, ack)) = self.requests.try_recv() {
            if !self.listeners.iter().any(|(a, _)| *a == addr) {
                // A direct target's listeners have their own, larger bound, the oldest making
                // way (it is made again by the next connect that needs it): the sink's bound
                // must not turn an open port closed, nor can a program fill it to that end.
                let target =
                    |a: &SocketAddr| self.targets.as_ref().is_some_and(|t| t.allows(a.ip()));
                let room = if target(&addr) {
                    let held = self.listeners.iter().filter(|(a, _)| target(a)).count();
                    if held >= MAX_TARGET_LISTENERS
                        && let Some(old) = self.listeners.iter().position(|(a, _)| target(a))
                    {
                        self.listeners.remove(old);
                    }
                    true
                } else {
                    self.listeners.iter().filter(|(a, _)| !target(a)).count() < MAX_LISTENERS
                };
                if room {
                    match capture_listener(addr) {
                        Ok(l) => self.listeners.push((addr, l)),
                        Err(e) => tracing::debug!(%addr, error = %e, "no capture listener"),
                    }
                }
            }
            let _ = ack.send(());
        }
    }

    fn answer_dns(&mut self) {
        let mut buf = [0u8; 1500];
        for _ in 0..64 {
            let Ok((n, from)) = self.dns.recv_from(&mut buf) else {
                return;
            };
            let answered = self.stub.lock().ok().and_then(|mut s| s.answer(&buf[..n]));
            let Some((queries, reply)) = answered else {
                continue;
            };
            for q in &queries {
                let data = json!({
                    "name": q.name,
                    "type": q.qtype,
                    "answer": q.answer,
                    "server": DNS_ADDR,
                });
                let id = self.hub.record(EventKind::NetDns, None, data);
                let ctx = json!({ "where": "dns", "name": q.name, "event": id });
                self.hub.scan_name(&q.name, None, &ctx);
                self.scan_split(&q.name, id);
            }
            let _ = self.dns.send_to(&reply, from);
        }
    }

    /// Search the joins of the queries of this window to the domain of `name` (a secret split
    /// over several queries); each canary once per window and domain, with `split: true`.
    fn scan_split(&mut self, name: &str, event: Option<u64>) {
        let Some(canaries) = self.hub.canaries() else {
            return;
        };
        let window = self.hub.window();
        // What the name shows on its own was reported by the name's own scan.
        let alone: Vec<String> = canaries
            .find_in_name(name)
            .into_iter()
            .map(|h| h.planted)
            .collect();
        for joined in self.split.add(window.as_deref(), name) {
            for hit in canaries.find(joined.as_bytes()) {
                if alone.contains(&hit.planted) || !self.split.first_report(name, &hit) {
                    continue;
                }
                let data = json!({
                    "planted": hit.planted,
                    "encoding": hit.encoding,
                    "where": "dns",
                    "name": name,
                    "split": true,
                    "event": event,
                });
                self.hub.record(EventKind::CanarySeen, None, data);
            }
        }
    }

    fn accept(&mut self, i: usize) {
        let Some((dest, l)) = self.listeners.get(i) else {
            return;
        };
        let dest = *dest;
        while let Ok((stream, _)) = l.accept() {
            let dest = stream.local_addr().unwrap_or(dest);
            // A direct target is checked again on the address really connected to.
            if let (Some(f), Some(t)) = (&self.forwarder, &self.targets)
                && t.allows(dest.ip())
                && self.allowed_host(dest).is_none()
            {
                if stream.set_nonblocking(false).is_ok() {
                    f.start_target(stream, dest, t.clone());
                }
                continue;
            }
            // Only the sink's connections count against its cap.
            if self.conns.len() >= MAX_CONNECTIONS || stream.set_nonblocking(true).is_err() {
                continue; // dropped: closed at once
            }
            if let (Some(f), Some(host)) = (&self.forwarder, self.allowed_host(dest)) {
                if stream.set_nonblocking(false).is_ok() {
                    f.start(stream, dest, host);
                }
                continue;
            }
            self.conns.push(Conn {
                stream,
                dest,
                since: Instant::now(),
                buf: Vec::new(),
            });
        }
    }

    /// The allowlisted name a fake address stands for, if a connection to it on that port is
    /// allowed.
    fn allowed_host(&self, dest: SocketAddr) -> Option<String> {
        let IpAddr::V4(v4) = dest.ip() else {
            return None;
        };
        let stub = self.stub.lock().ok()?;
        let name = stub.name_of(v4)?;
        warden_trace::hosts::allowed(&self.egress, name, dest.port()).then(|| name.to_owned())
    }

    /// A TLS hello is answered with the run's authority (on a thread of its own, at most
    /// [`MAX_TLS`] at once); anything else is recorded and closed.
    fn finish_or_open(&self, c: Conn) {
        let hello = c.buf.len() >= 6 && c.buf[0] == 0x16 && c.buf[1] == 0x03 && c.buf[5] == 0x01;
        let Some(authority) = self.authority.clone().filter(|_| hello) else {
            return self.finish(c);
        };
        if self.tls_open.fetch_add(1, Ordering::AcqRel) >= MAX_TLS {
            self.tls_open.fetch_sub(1, Ordering::AcqRel);
            return self.finish(c);
        }
        let stream = match c.stream.try_clone() {
            Ok(s) => s,
            Err(_) => {
                self.tls_open.fetch_sub(1, Ordering::AcqRel);
                return self.finish(c);
            }
        };
        let hello_id = self.record_send(&c);
        let window = self.hub.window();
        let (hub, open, host) = (
            self.hub.clone(),
            self.tls_open.clone(),
            self.host_of(c.dest),
        );
        let (dest, first) = (c.dest, c.buf);
        let spawned = std::thread::Builder::new()
            .name("warden-tls".into())
            .spawn(move || {
                let out =
                    authority.intercept(stream, &first, dest.ip(), TLS_TIME, TLS_CAPTURE, &whole);
                super::boundary::record_tls(&hub, window, dest, host, hello_id, out);
                open.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            self.tls_open.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn host_of(&self, dest: SocketAddr) -> Option<String> {
        name_for(&self.stub, dest.ip())
    }

    fn finish(&self, c: Conn) {
        let id = self.record_send(&c);
        // A request for the host's own cloud credentials gets the decoy ones (canaries).
        let metadata = warden_trace::imds::by_address(&c.dest.ip().to_canonical().to_string())
            .or_else(|| {
                self.host_of(c.dest)
                    .and_then(|h| warden_trace::imds::by_name(&h))
            });
        if metadata.is_some()
            && c.dest.port() == 80
            && let Some(answer) = self
                .hub
                .canaries()
                .and_then(|canaries| warden_trace::imds::answer(&c.buf, canaries))
        {
            use std::io::Write as _;
            // Under 2 KB into a fresh socket's empty buffer; a full one gets nothing.
            let _ = (&c.stream).write_all(&answer);
        }
        // Searched here too with the tap on: a sighting in the sink's first bytes is linked to
        // the request it was in (its line, its Host); the tap's covers every byte after.
        let ctx = json!({
            "where": "net",
            "address": c.dest.ip().to_string(),
            "port": c.dest.port(),
            "host": self.host_of(c.dest),
            "event": id,
        });
        self.hub.scan(&c.buf, None, &ctx);
    }

    /// The `net.send` event of what a connection's first message was.
    fn record_send(&self, c: &Conn) -> Option<u64> {
        let sniffed = warden_trace::sniff(&c.buf);
        let preview: String = String::from_utf8_lossy(&c.buf[..c.buf.len().min(512)]).into_owned();
        let host = self.host_of(c.dest);
        let data = json!({
            "address": c.dest.ip().to_string(),
            "port": c.dest.port(),
            "host": host,
            "bytes": c.buf.len(),
            "captured": "sink",
            "protocol": sniffed.protocol,
            "sni": sniffed.sni,
            "request_line": sniffed.request_line,
            "http_host": sniffed.host,
            "preview": preview,
        });
        self.hub.record(EventKind::NetSend, None, data)
    }
}

/// Whether `buf` holds a whole first message that waits for an answer: a TLS handshake record
/// (the ClientHello, its SNI captured), or an HTTP request with all of its body (by
/// `Content-Length`, or the last chunk). Anything else is held until it ends or the hold does.
pub fn whole(buf: &[u8]) -> bool {
    if buf.len() >= 5 && buf[0] == 0x16 && buf[1] == 0x03 {
        let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
        return buf.len() >= 5 + len;
    }
    let Some(head) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let headers = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
    let mut lines = headers.lines();
    let request = lines.next().unwrap_or("");
    if !request.ends_with("http/1.1") && !request.ends_with("http/1.0") {
        return false;
    }
    let header = |name: &str| {
        headers.lines().skip(1).find_map(|l| {
            l.strip_prefix(name)
                .map(|v| v.trim_start_matches(':').trim().to_owned())
        })
    };
    let body = &buf[head + 4..];
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        return body.ends_with(b"0\r\n\r\n");
    }
    let length = header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

/// Read what is there; true when the connection is done (closed, failed or the cap reached).
fn read_some(c: &mut Conn) -> bool {
    let mut buf = [0u8; 2048];
    loop {
        let room = MAX_CAPTURE - c.buf.len();
        if room == 0 {
            return true;
        }
        match c.stream.read(&mut buf[..room.min(2048)]) {
            Ok(0) => return true,
            Ok(n) => c.buf.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_first_message_ends_the_hold() {
        let hello = [0x16, 0x03, 0x01, 0x00, 0x03, 1, 2, 3];
        assert!(whole(&hello));
        assert!(!whole(&hello[..6]), "half a record");
        assert!(whole(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"));
        let post = b"POST /x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n0123";
        assert!(!whole(post), "the body is still coming");
        let mut all = post.to_vec();
        all.extend_from_slice(b"456789");
        assert!(whole(&all));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n";
        assert!(!whole(chunked));
        let mut done = chunked.to_vec();
        done.extend_from_slice(b"0\r\n\r\n");
        assert!(whole(&done));
        assert!(
            !whole(b"SSH-2.0-OpenSSH\r\n"),
            "other protocols wait for the hold"
        );
    }

    #[test]
    fn loopback_is_not_captured() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(captured(&a("203.0.113.7:443")));
        assert!(captured(&a("198.18.0.1:80")));
        assert!(!captured(&a("127.0.0.1:8080")));
        assert!(!captured(&a("[::1]:80")));
        assert!(!captured(&a("[::ffff:127.0.0.1]:80")));
        assert!(!captured(&a("0.0.0.0:80")));
    }
}
