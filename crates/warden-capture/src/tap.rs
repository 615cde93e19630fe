//! The tap: a thread in the jail's network namespace reading every packet of it from a packet
//! socket, and handing flows to an [`Observer`] (and every packet to a pcapng file).
//!
//! Why a packet socket and not a TUN device with a userspace stack: the jail's namespace has
//! one interface, its loopback, and the capture routes make every address local to it, so
//! every IP packet any socket of the namespace sends — TCP, UDP, ICMP, raw, v4 or v6, from
//! `write`, `sendmmsg`, `sendfile`, `splice` or `io_uring` alike — passes the loopback's
//! transmit path, where a packet socket sees it once (`PACKET_OUTGOING`). The answers stay the
//! kernel's own TCP/IP (the sink's listeners, the DNS stub), so no userspace stack can answer
//! differently from a real host. The program cannot reach the tap: it is a socket of this
//! thread, in a namespace where the program has no capability.
//!
//! Guarantees: the thread joins the network namespace only; it never sends a packet. Bounded:
//! the socket's buffer (packets past it are dropped by the kernel and counted in
//! [`Summary::dropped`]), the flow table ([`crate::flow`]), the pcapng file
//! ([`crate::pcapng`]). [`Tap::sync`] returns once every packet sent before it was handed to
//! the observer (the caller does so before it opens a new attribution window), and
//! [`Tap::stop`] reads what is still queued before it returns.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, LinkAddr, SockFlag, SockProtocol, SockType, recvfrom, setsockopt, socket,
    sockopt,
};

use crate::flow::{Flow, Table};
use crate::pcapng::{Pcap, Written};

/// `PACKET_OUTGOING`: a packet this host sent (on the loopback each packet is also seen once
/// more, received).
const PACKET_OUTGOING: u8 = 4;
/// The packet socket's receive buffer.
const SOCKET_BUFFER: usize = 16 << 20;
/// The largest packet read whole (the loopback's GSO packets are at most 64 KiB).
const PACKET_MAX: usize = 256 << 10;
/// Packets read in one pass, at most (then syncs and expiry get their turn).
const PASS: usize = 4096;
/// How long a sync waits for the tap, at most.
const SYNC_WAIT: Duration = Duration::from_secs(2);

/// What the capture tells its user.
pub trait Observer: Send + Sync {
    /// A flow's first packet.
    fn began(&self, flow: &Flow);
    /// Bytes the flow's initiator sent, newly in order.
    fn outbound(&self, flow: &Flow, bytes: &[u8]);
    /// A flow is over (or the capture is).
    fn ended(&self, flow: &Flow);
}

/// How to capture.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Write every packet to this pcapng file (created; an existing file is an error).
    pub pcap: Option<PathBuf>,
    /// The pcapng file's cap in bytes (0: [`crate::pcapng::MAX_BYTES`]).
    pub pcap_cap: u64,
}

/// What a capture saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Packets seen (each once).
    pub packets: u64,
    /// Flows seen.
    pub flows: u64,
    /// Packets the kernel dropped because the tap fell behind.
    pub dropped: u64,
    /// Packets that were not IP or could not be read.
    pub unreadable: u64,
    /// The pcapng file, when one was asked for.
    pub pcap: Option<Written>,
    /// Why the pcapng file could not be written, if it could not.
    pub pcap_error: Option<String>,
}

/// A running capture.
#[derive(Debug)]
pub struct Tap {
    stop: Arc<AtomicBool>,
    /// The packet socket (shared: a sync looks at its queue before it asks the thread).
    sock: Arc<OwnedFd>,
    /// Set while the thread is reading and handing over packets.
    busy: Arc<AtomicBool>,
    wake: OwnedFd,
    syncs: Mutex<mpsc::Sender<mpsc::SyncSender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<Summary>>>,
}

impl Tap {
    /// Join `netns` on a new thread and capture there until [`Tap::stop`]. Returns once the
    /// packet socket is open (or why it could not be).
    pub fn start(
        netns: OwnedFd,
        observer: Arc<dyn Observer>,
        config: Config,
    ) -> Result<Tap, String> {
        let (wake_r, wake_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(|e| format!("pipe: {e}"))?;
        let pcap = match &config.pcap {
            Some(p) => {
                let cap = if config.pcap_cap == 0 {
                    crate::pcapng::MAX_BYTES
                } else {
                    config.pcap_cap
                };
                Some(Pcap::create(p, cap).map_err(|e| format!("{}: {e}", p.display()))?)
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (sync_tx, sync_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stop2 = stop.clone();
        let busy = Arc::new(AtomicBool::new(false));
        let busy2 = busy.clone();
        let thread = std::thread::Builder::new()
            .name("warden-tap".into())
            .spawn(move || {
                let sock = match open(&netns) {
                    Ok(s) => {
                        let s = Arc::new(s);
                        let _ = ready_tx.send(Ok(s.clone()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Summary::default();
                    }
                };
                let mut run = Run {
                    sock,
                    busy: busy2,
                    wake: wake_r,
                    syncs: sync_rx,
                    observer,
                    table: Table::new(),
                    pcap,
                    summary: Summary::default(),
                    buf: vec![0u8; PACKET_MAX],
                };
                run.serve(&stop2);
                run.finish()
            })
            .map_err(|e| format!("thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(sock)) => Ok(Tap {
                stop,
                sock,
                busy,
                wake: wake_w,
                syncs: Mutex::new(sync_tx),
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err("the tap ended during set-up".into()),
        }
    }

    /// Wait (at most two seconds) until every packet sent before this call was handed to the
    /// observer.
    pub fn sync(&self) {
        // Nothing queued and nothing in hand: every packet sent so far was handed over (the
        // thread marks itself busy before it takes a packet off the queue).
        if !self.busy.load(Ordering::SeqCst) && queued(&self.sock) == Some(0) {
            return;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let sent = self
            .syncs
            .lock()
            .map(|s| s.send(tx).is_ok())
            .unwrap_or(false);
        if sent {
            let _ = nix::unistd::write(&self.wake, b"s");
            let _ = rx.recv_timeout(SYNC_WAIT);
        }
    }

    /// Read what is still queued, end every flow and stop; what was seen.
    pub fn stop(&self) -> Summary {
        self.stop.store(true, Ordering::Release);
        let _ = nix::unistd::write(&self.wake, b"x");
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        thread.and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Join `netns` and open the packet socket (every protocol, link headers removed).
fn open(netns: &OwnedFd) -> Result<OwnedFd, String> {
    nix::sched::setns(netns, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("joining the jail's network namespace: {e}"))?;
    let sock = socket(
        AddressFamily::Packet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        SockProtocol::EthAll,
    )
    .map_err(|e| match e {
        nix::errno::Errno::EPERM => format!(
            "packet socket: {e} (in a container, give Warden CAP_NET_RAW: the socket lives in \
             the jail's own network namespace)"
        ),
        e => format!("packet socket: {e}"),
    })?;
    if setsockopt(&sock, sockopt::RcvBufForce, &SOCKET_BUFFER).is_err() {
        let _ = setsockopt(&sock, sockopt::RcvBuf, &SOCKET_BUFFER);
    }
    Ok(sock)
}

struct Run {
    sock: Arc<OwnedFd>,
    busy: Arc<AtomicBool>,
    wake: OwnedFd,
    syncs: mpsc::Receiver<mpsc::SyncSender<()>>,
    observer: Arc<dyn Observer>,
    table: Table,
    pcap: Option<Pcap>,
    summary: Summary,
    buf: Vec<u8>,
}

impl Run {
    fn serve(&mut self, stop: &AtomicBool) {
        let mut last_expire = Instant::now();
        while !stop.load(Ordering::Acquire) {
            let (sock_ready, wake_ready) = {
                let mut fds = [
                    PollFd::new(self.sock.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
                ];
                let _ = poll(&mut fds, PollTimeout::from(250u16));
                let ready = |f: &PollFd| f.revents().is_some_and(|e| !e.is_empty());
                (ready(&fds[0]), ready(&fds[1]))
            };
            if wake_ready {
                let mut b = [0u8; 64];
                while nix::unistd::read(&self.wake, &mut b).is_ok_and(|n| n > 0) {}
            }
            if sock_ready || wake_ready {
                self.read_queued();
            }
            // Syncs are answered after what was queued when they came was read (a pass at a
            // time; a flood that never ends gets the sync's own time limit).
            while let Ok(done) = self.syncs.try_recv() {
                self.read_queued();
                let _ = done.send(());
            }
            if last_expire.elapsed() >= Duration::from_millis(500) {
                last_expire = Instant::now();
                for f in self.table.expire(last_expire) {
                    self.observer.ended(&f);
                }
            }
        }
        self.read_all();
        while let Ok(done) = self.syncs.try_recv() {
            let _ = done.send(());
        }
    }

    /// Read the packets queued now, at most [`PASS`] (a flood cannot starve the rest).
    /// Returns how many it read.
    fn read_queued(&mut self) -> usize {
        self.busy.store(true, Ordering::SeqCst);
        let n = self.read_pass();
        self.busy.store(false, Ordering::SeqCst);
        n
    }

    fn read_pass(&mut self) -> usize {
        for n in 0..PASS {
            match recvfrom::<LinkAddr>(self.sock.as_raw_fd(), &mut self.buf) {
                Ok((len, from)) => {
                    if from.is_some_and(|a| a.pkttype() != PACKET_OUTGOING) {
                        continue;
                    }
                    let len = len.min(self.buf.len());
                    let packet = std::mem::take(&mut self.buf);
                    self.packet(&packet[..len]);
                    self.buf = packet;
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return n,
            }
        }
        PASS
    }

    /// Read everything queued (at the end: the jail is gone, nothing more arrives).
    fn read_all(&mut self) {
        while self.read_queued() == PASS {}
    }

    fn packet(&mut self, bytes: &[u8]) {
        self.summary.packets += 1;
        if let Some(p) = &mut self.pcap {
            p.packet(SystemTime::now(), bytes);
        }
        let Some(parsed) = crate::packet::parse(bytes) else {
            self.summary.unreadable += 1;
            return;
        };
        let mut evicted = Vec::new();
        let fed = self.table.feed(&parsed, Instant::now(), &mut evicted);
        for f in &evicted {
            self.observer.ended(f);
        }
        let Some(flow) = fed.flow else { return };
        if fed.began {
            self.summary.flows += 1;
            self.observer.began(&flow);
        }
        if !fed.outbound.is_empty() {
            self.observer.outbound(&flow, &fed.outbound);
        }
        if fed.ended {
            self.observer.ended(&flow);
        }
    }

    fn finish(mut self) -> Summary {
        for f in self.table.drain() {
            self.observer.ended(&f);
        }
        self.summary.dropped = kernel_drops(&self.sock);
        if let Some(p) = self.pcap.take() {
            match p.finish(self.summary.packets) {
                Ok(w) => self.summary.pcap = Some(w),
                Err(e) => self.summary.pcap_error = Some(e.to_string()),
            }
        }
        self.summary
    }
}

/// The size of the next packet queued on `sock` (`FIONREAD`, which is `SIOCINQ`; 0: none), `None` when it cannot
/// say.
fn queued(sock: &OwnedFd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one `int` through the pointer, which points at `n`, alive for the
    // call; the descriptor is owned by `sock`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::FIONREAD, &raw mut n) };
    if rc == 0 {
        usize::try_from(n).ok()
    } else {
        None
    }
}

/// Packets the kernel dropped for this socket (`PACKET_STATISTICS`; 0 when it cannot say).
fn kernel_drops(sock: &OwnedFd) -> u64 {
    let mut stats = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len =
        libc::socklen_t::try_from(std::mem::size_of::<libc::tpacket_stats>()).unwrap_or(0);
    // SAFETY: `stats` is a live, writable `tpacket_stats` and `len` holds its size, which is
    // what PACKET_STATISTICS writes (at most `len` bytes); the descriptor is owned by `sock`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&raw mut stats).cast(),
            &raw mut len,
        )
    };
    if rc == 0 {
        u64::from(stats.tp_drops)
    } else {
        0
    }
}
