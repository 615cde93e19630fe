//! Deferred answers for non-blocking connects to direct targets, so a scanner's many connects
//! overlap as they would outside the jail.
//!
//! A non-blocking connect does not wait for its answer, and a program such as nmap keeps
//! hundreds in flight. The tracer holds each one briefly for the target's answer (see
//! [`super::targets::Targets::hold_for`]): most targets answer within that (open or refused)
//! and the program gets the answer exactly. One still unanswered — a filtered port — is
//! parked: the tracer takes a duplicate of the program's socket, starts it connecting to a
//! *parking spot* in the jail's own namespace (a listener whose accept queue is kept full, so
//! its SYNs go unanswered and the socket stays honestly "in progress"), answers the program's
//! connect with `EINPROGRESS` and hands the real connect to the [`Connector`] thread, which
//! waits for it up to the connect time:
//! - open after all: a capture listener is made at the destination and the program's socket
//!   is reconnected to it (loopback: it completes at once, and is relayed like any target);
//! - refused late, unreachable, or no answer at all: it stays parked, in progress, as a
//!   connect to a filtered port stays (until the program gives up, or the kernel's SYN
//!   retries run out: `ETIMEDOUT`). A late refusal is not passed on (see `Run::late`); the
//!   event says what the target answered (`late_answer`).
//!
//! A blocking connect is *held* instead: its syscall stays stopped and the connector gives the
//! seccomp reply when the target answers (or `ETIMEDOUT` at the connect time), so the tracer
//! never waits on a target and the jail's other syscalls go on meanwhile. A signal that
//! interrupts a held connect ends its notification: with `SA_RESTART` the kernel restarts the
//! connect as a new one (the old job is dropped, no reply, no event); without it the program
//! sees `EINTR` on a socket that never started connecting — where the kernel's own connect
//! would have gone on in the background. (Known limit: a program that then waits for the
//! socket, as Python does, reads it as connected. Parking blocking sockets too would close it.)
//!
//! Guarantees: the program's socket is only ever connected by us to a parking spot or to the
//! destination that was checked against the list, and the relay checks the accepted side again
//! (see [`super::targets`]); connects in flight are bounded (past the bound, the tracer waits
//! for the answer itself); every deferred connect ends with exactly one `net.connect` event
//! giving the state the program was given, and no held connect outlives the run unanswered;
//! the thread ends with the run.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage, connect, getsockopt, listen,
    setsockopt, socket, sockopt,
};
use serde_json::Value;
use warden_events::EventKind;

use super::Hub;
use super::refuse::Refuser;
use super::targets::{Decision, InFlight, Targets};

/// Connects in flight at once, at most.
pub const MAX_IN_FLIGHT: usize = 256;
/// The parking port, on the addresses below.
const PARK_PORT: u16 = 9;
/// Addresses of the spots: loopback for IPv4, a unique-local address for IPv6 (every address
/// is local in the capture network).
const SPOT_V4: Ipv4Addr = Ipv4Addr::new(127, 255, 255, 254);
const SPOT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xffff, 0xffff, 0xffff, 0, 0, 0, 0xfe);

/// The parking spots of one run, made in the jail's network namespace and held open.
#[derive(Debug)]
pub struct Parking {
    v4: bool,
    v6: bool,
    _held: Vec<OwnedFd>,
    refuser: Option<Refuser>,
}

impl Parking {
    /// Make the spots (call in the jail's namespace); a family whose spot cannot be made has
    /// none, and its connects are held instead.
    pub fn open() -> Parking {
        let mut held = Vec::new();
        let mut one = |ip: IpAddr| match spot(SocketAddr::new(ip, PARK_PORT)) {
            Ok(fds) => {
                held.extend(fds);
                true
            }
            Err(e) => {
                tracing::debug!(%ip, error = %e, "no parking spot");
                false
            }
        };
        let v4 = one(IpAddr::V4(SPOT_V4));
        let v6 = one(IpAddr::V6(SPOT_V6));
        Parking {
            v4,
            v6,
            _held: held,
            refuser: Refuser::open(),
        }
    }

    /// Whether a parked connect to `dest` can be refused (see [`super::refuse`]): then
    /// connects to it are parked at once, none held.
    pub fn can_refuse(&self, dest: &SocketAddr) -> bool {
        self.park_for(dest).is_some() && self.refuser.as_ref().is_some_and(|r| r.covers(dest))
    }

    /// Refuse `sock`, parked for `dest` from `local`: true when it now fails with
    /// `ECONNREFUSED`.
    fn refuse(&self, sock: &OwnedFd, dest: &SocketAddr, local: Option<SocketAddr>) -> bool {
        match (&self.refuser, self.park_for(dest), local) {
            (Some(r), Some(spot), Some(local)) => r.refuse(sock, spot, local),
            _ => false,
        }
    }

    /// Where a socket connecting to `dest` is parked, if its family has a spot.
    pub fn park_for(&self, dest: &SocketAddr) -> Option<SocketAddr> {
        match dest {
            SocketAddr::V4(_) if self.v4 => Some(SocketAddr::new(SPOT_V4.into(), PARK_PORT)),
            SocketAddr::V6(_) if self.v6 => Some(SocketAddr::new(SPOT_V6.into(), PARK_PORT)),
            _ => None,
        }
    }
}

/// A listener at `at` with a backlog of nothing, and connections that fill its accept queue:
/// the SYN of any later connect to it is dropped.
fn spot(at: SocketAddr) -> std::io::Result<Vec<OwnedFd>> {
    let family = if at.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let l = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(&l, sockopt::IpFreebind, &true)?;
    nix::sys::socket::bind(l.as_raw_fd(), &SockaddrStorage::from(at))?;
    listen(&l, Backlog::new(0).unwrap_or(Backlog::MAXCONN))?;
    let listener = TcpListener::from(l);
    let mut held = vec![OwnedFd::from(listener)];
    for _ in 0..2 {
        let f = socket(
            family,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )?;
        match connect(f.as_raw_fd(), &SockaddrStorage::from(at)) {
            Ok(()) | Err(Errno::EINPROGRESS) => held.push(f),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(held)
}

/// Park `sock` (the program's socket, duplicated) for `dest`: `Ok` with its local address
/// when it is now connecting to the spot; `Err` with the errno the program's own connect
/// would have had otherwise (`EALREADY`, `EISCONN`…).
pub fn park(sock: &OwnedFd, spot: SocketAddr) -> Result<Option<SocketAddr>, Errno> {
    match connect(sock.as_raw_fd(), &SockaddrStorage::from(spot)) {
        Err(Errno::EINPROGRESS) => Ok(super::refuse::local_of(sock)),
        // Parked spots never answer; anything else is not a connect we can defer.
        Ok(()) => {
            let _ = crate::sys::disconnect(sock.as_fd());
            Err(Errno::EAGAIN)
        }
        Err(e) => Err(e),
    }
}

/// Whether `sock` (a stream socket: see [`is_stream`]) is non-blocking.
pub fn deferrable(sock: &OwnedFd) -> bool {
    let flags = nix::fcntl::fcntl(sock, nix::fcntl::FcntlArg::F_GETFL).unwrap_or(0);
    nix::fcntl::OFlag::from_bits_truncate(flags).contains(nix::fcntl::OFlag::O_NONBLOCK)
}

/// Whether `sock` is a stream socket.
pub fn is_stream(sock: &OwnedFd) -> bool {
    getsockopt(sock, sockopt::SockType).is_ok_and(|t| t == SockType::Stream)
}

/// How the program waits for a connect's answer.
#[derive(Debug)]
pub enum Waiting {
    /// Its non-blocking socket (a duplicate) is parked, from this local address.
    Parked {
        /// The socket.
        sock: OwnedFd,
        /// Its local address once parked (a refusal is written only to that one).
        local: Option<SocketAddr>,
    },
    /// Its blocking connect is still stopped: the answer is the seccomp notification's reply
    /// (on `listener`, for notification `id`), given when the target answers.
    Held {
        /// The seccomp listener (shared with the tracer).
        listener: Arc<OwnedFd>,
        /// The notification.
        id: u64,
    },
}

/// A connect waiting for the real answer.
#[derive(Debug)]
pub struct Job {
    /// The destination (on the list).
    pub dest: SocketAddr,
    /// How the program waits.
    pub waiting: Waiting,
    /// The process, for the event.
    pub pid: Option<i32>,
    /// The `net.connect` event's data, completed with the state when it is known.
    pub data: Value,
    /// The real connect, under way.
    pub real: InFlight,
    /// When it counts as filtered.
    pub deadline: Instant,
}

impl Job {
    /// Whether this is a held connect whose notification is no longer pending (the task was
    /// interrupted, and its connect restarted as a new one, or it died).
    fn gone(&self) -> bool {
        match &self.waiting {
            Waiting::Held { listener, id } => !crate::sys::notif_id_valid(listener.as_fd(), *id),
            Waiting::Parked { .. } => false,
        }
    }

    /// Give a held connect its last answer, `ETIMEDOUT` (the connector is going away).
    fn fail_held(&self) {
        if let Waiting::Held { listener, id } = &self.waiting {
            let _ = crate::sys::notif_fail(listener.as_fd(), *id, libc::ETIMEDOUT);
        }
    }
}

/// What the connector needs from the network: a capture listener at an address, ready.
pub type Ensure = Arc<dyn Fn(SocketAddr) + Send + Sync>;

/// The thread that makes the real connects of parked sockets and answers them.
pub struct Connector {
    jobs: Mutex<mpsc::Sender<Job>>,
    wake: OwnedFd,
    in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Start the thread (from the supervisor's network namespace: it connects from there).
    pub fn start(
        targets: Arc<Targets>,
        parking: Arc<Parking>,
        hub: Arc<Hub>,
        ensure: Ensure,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Connector> {
        let (wake_r, wake_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let (tx, rx) = mpsc::channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let run = Run {
            targets,
            parking,
            hub,
            ensure,
            stop: stop.clone(),
            in_flight: in_flight.clone(),
            jobs: rx,
            wake: wake_r,
            pending: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("warden-connect".into())
            .spawn(move || run.serve())?;
        Ok(Connector {
            jobs: Mutex::new(tx),
            wake: wake_w,
            in_flight,
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Whether another connect may be deferred now.
    pub fn has_room(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) < MAX_IN_FLIGHT
    }

    /// Hand over a parked or held connect; the job back when the thread is gone.
    pub fn submit(&self, job: Job) -> Result<(), Box<Job>> {
        let Ok(tx) = self.jobs.lock() else {
            return Err(Box::new(job));
        };
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(Box::new(job));
        }
        let _ = nix::unistd::write(&self.wake, b"x");
        Ok(())
    }

    /// End the thread (the run has stopped): connects still in flight stay parked.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = nix::unistd::write(&self.wake, b"x");
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

struct Run {
    targets: Arc<Targets>,
    parking: Arc<Parking>,
    hub: Arc<Hub>,
    ensure: Ensure,
    stop: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    jobs: mpsc::Receiver<Job>,
    wake: OwnedFd,
    pending: Vec<Job>,
}

impl Drop for Run {
    /// However the thread ends (a panic included), no held connect is left stopped.
    fn drop(&mut self) {
        for job in self
            .pending
            .iter()
            .chain(self.jobs.try_iter().collect::<Vec<_>>().iter())
        {
            job.fail_held();
        }
    }
}

impl Run {
    fn serve(mut self) {
        loop {
            if self.stop.load(Ordering::Acquire) {
                // Nothing is left stopped: held connects get no answer, as the run ends.
                let left: Vec<Job> = std::mem::take(&mut self.pending)
                    .into_iter()
                    .chain(self.jobs.try_iter())
                    .collect();
                for job in left {
                    self.expire(job);
                }
                return;
            }
            while let Ok(job) = self.jobs.try_recv() {
                self.pending.push(job);
            }
            // A held connect interrupted by a signal is restarted by the kernel as a new
            // notification: the old one is gone, and so is its job (no reply, no event).
            let pending = std::mem::take(&mut self.pending);
            for job in pending {
                if job.gone() {
                    self.in_flight.fetch_sub(1, Ordering::AcqRel);
                } else {
                    self.pending.push(job);
                }
            }
            let now = Instant::now();
            let next = self
                .pending
                .iter()
                .map(|p| p.deadline.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_millis(200))
                .min(Duration::from_millis(200));
            let ms = u16::try_from(next.as_millis().max(1)).unwrap_or(200);
            let ready: Vec<bool> = {
                let mut fds = vec![PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
                fds.extend(
                    self.pending
                        .iter()
                        .map(|p| PollFd::new(p.real.real.as_fd(), PollFlags::POLLOUT)),
                );
                let _ = poll(&mut fds, PollTimeout::from(ms));
                fds.iter()
                    .map(|f| f.revents().is_some_and(|e| !e.is_empty()))
                    .collect()
            };
            if ready[0] {
                let mut buf = [0u8; 256];
                while nix::unistd::read(&self.wake, &mut buf).is_ok_and(|n| n > 0) {}
            }
            let now = Instant::now();
            let all = std::mem::take(&mut self.pending);
            for (job, r) in all.into_iter().zip(ready[1..].iter().copied()) {
                if r {
                    self.late(job);
                } else if now >= job.deadline {
                    self.expire(job);
                } else {
                    self.pending.push(job);
                }
            }
        }
    }

    /// The target answered a parked connect. Open: the program's socket is reconnected to a
    /// capture listener at the destination (it completes at once, and is relayed; the
    /// disconnect before it leaves a reset error that a program polling the socket may read
    /// first — nmap then says "Strange read error … Connection reset by peer", tries the port
    /// again and reports it open — never a closed port). Refused: the parking spot
    /// refuses it ([`super::refuse`]), atomically. Anything else, or a refusal that cannot be
    /// written, stays parked, as no answer. A held (blocking) connect simply gets the answer.
    fn late(&self, job: Job) {
        let Job {
            dest,
            waiting,
            pid,
            data,
            real,
            ..
        } = job;
        let decision = self.targets.finish(dest, real);
        let (sock, local) = match waiting {
            Waiting::Held { listener, id } => {
                if decision == Decision::Open {
                    (self.ensure)(dest);
                }
                let replied = match decision {
                    Decision::Open => crate::sys::notif_continue(listener.as_fd(), id),
                    Decision::Fail(errno) => crate::sys::notif_fail(listener.as_fd(), id, errno),
                };
                let errno = match decision {
                    Decision::Open => 0,
                    Decision::Fail(e) => e,
                };
                // Only a reply that was taken is what the program was given.
                if replied.is_err() {
                    self.in_flight.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
                return self.record(pid, data, decision.state(), errno, None);
            }
            Waiting::Parked { sock, local } => (sock, local),
        };
        match decision {
            Decision::Open => {
                (self.ensure)(dest);
                let _ = crate::sys::disconnect(sock.as_fd());
                let _ = connect(sock.as_raw_fd(), &SockaddrStorage::from(dest));
                self.record(pid, data, "open", 0, None);
            }
            Decision::Fail(libc::ECONNREFUSED) if self.parking.refuse(&sock, &dest, local) => {
                self.record(pid, data, "closed", libc::ECONNREFUSED, None);
            }
            Decision::Fail(errno) => {
                let answer = Decision::Fail(errno).state();
                self.record(pid, data, "filtered", libc::ETIMEDOUT, Some(answer));
            }
        }
    }

    /// No answer by the deadline: a held connect fails with `ETIMEDOUT`; a parked one stays
    /// parked.
    fn expire(&self, job: Job) {
        self.targets.unanswered(job.dest.ip());
        if let Waiting::Held { listener, id } = &job.waiting
            && crate::sys::notif_fail(listener.as_fd(), *id, libc::ETIMEDOUT).is_err()
        {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        self.record(job.pid, job.data, "filtered", libc::ETIMEDOUT, None);
    }

    /// Record the parked connect's event: the state the program was given, and the target's
    /// own answer when it came too late to be given.
    fn record(
        &self,
        pid: Option<i32>,
        mut data: Value,
        state: &str,
        errno: i32,
        late: Option<&str>,
    ) {
        data["target"] = state.into();
        if errno != 0 {
            data["errno"] = errno.into();
        }
        data["deferred"] = true.into();
        if let Some(l) = late {
            data["late_answer"] = l.into();
        }
        self.hub.record(EventKind::NetConnect, pid, data);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
