//! The supervisor's end of the command's stdin, stdout and stderr.
//!
//! [`Output`] reads one output stream without blocking, counts every byte, and keeps or forwards
//! at most the output limit; [`StdinPump`] forwards bytes (the request's, or our own stdin) to
//! the command without ever blocking the supervisor's loop.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Most forwarded output held while our own stdout is slow; past it we stop reading the
/// command's pipe, so the command blocks instead of the supervisor.
const MAX_BACKLOG: usize = 256 << 10;

/// Largest write after a POLLOUT: a pipe with a free slot takes a page without blocking.
const WRITE_CHUNK: usize = 4096;

/// One output stream of the command, as seen by the supervisor.
pub struct Output {
    /// Our end of the command's pipe (`None` once it reached EOF).
    pub fd: Option<OwnedFd>,
    /// Capture mode: what is kept. Stream mode: bytes waiting to be forwarded (from `sent` on).
    pub kept: Vec<u8>,
    /// Stream mode: how much of `kept` was written out.
    sent: usize,
    /// Bytes the command wrote.
    pub total: u64,
    /// Bytes accepted (kept or forwarded), at most the limit.
    pub emitted: u64,
    /// Whether output was cut at the limit.
    pub truncated: bool,
    /// Stream mode: our descriptor to forward to.
    pub forward: Option<BorrowedFd<'static>>,
    /// Whether this stream is forwarded (stream mode) rather than kept.
    pub streamed: bool,
}

impl Output {
    /// Watch `fd`; forward to our descriptor `forward` instead of keeping, when given.
    pub fn new(fd: OwnedFd, forward: Option<BorrowedFd<'static>>) -> Output {
        Output {
            fd: Some(fd),
            kept: Vec::new(),
            sent: 0,
            total: 0,
            emitted: 0,
            truncated: false,
            streamed: forward.is_some(),
            forward,
        }
    }

    /// Whether to poll the command's pipe (not while too much output waits to be forwarded).
    pub fn wants_read(&self) -> bool {
        self.fd.is_some() && (self.forward.is_none() || self.kept.len() - self.sent < MAX_BACKLOG)
    }

    /// Whether output waits to be forwarded.
    pub fn wants_flush(&self) -> bool {
        self.forward.is_some() && self.sent < self.kept.len()
    }

    /// Read what is available; returns true when the limit was just exceeded.
    pub fn pump(&mut self, limit: u64) -> bool {
        let Some(fd) = &self.fd else { return false };
        let mut buf = [0u8; 65536];
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => {
                self.fd = None;
                false
            }
            Ok(n) => {
                self.total += n as u64;
                let room =
                    usize::try_from(limit.saturating_sub(self.emitted)).unwrap_or(usize::MAX);
                let take = n.min(room);
                self.kept.extend_from_slice(&buf[..take]);
                self.emitted += take as u64;
                if n > room && !self.truncated {
                    self.truncated = true;
                    return true;
                }
                false
            }
            Err(Errno::EAGAIN | Errno::EINTR) => false,
            Err(_) => {
                self.fd = None;
                false
            }
        }
    }

    /// Forward one chunk; call when the destination polled writable, so it does not block.
    pub fn flush_some(&mut self) {
        let Some(out) = self.forward else { return };
        let end = self.kept.len().min(self.sent + WRITE_CHUNK);
        match nix::unistd::write(out, &self.kept[self.sent..end]) {
            Ok(n) => self.sent += n,
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            // Our reader went away: stop forwarding and close the command's pipe, so the command
            // gets EPIPE/SIGPIPE as it would at the end of a shell pipeline.
            Err(_) => {
                self.forward = None;
                self.fd = None;
                self.kept.clear();
                self.sent = 0;
            }
        }
        if self.sent == self.kept.len() || self.sent > MAX_BACKLOG {
            self.kept.drain(..self.sent);
            self.sent = 0;
        }
    }

    /// Forward everything left, blocking (the run is over; the caller's signals are unblocked).
    pub fn flush_all(&mut self) {
        while self.wants_flush() {
            let Some(out) = self.forward else { return };
            let mut fds = [PollFd::new(out, PollFlags::POLLOUT)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => self.flush_some(),
                Err(_) => return,
            }
        }
    }
}

/// Forwards bytes to the command's stdin.
pub struct StdinPump {
    /// Our stdin in stream mode.
    pub source: Option<BorrowedFd<'static>>,
    pub buf: Vec<u8>,
    pub pos: usize,
    pub sink: Option<OwnedFd>,
}

impl StdinPump {
    /// Whether to poll the source.
    pub fn wants_input(&self) -> bool {
        self.source.is_some() && self.pos >= self.buf.len() && self.sink.is_some()
    }
    /// Whether to poll the sink.
    pub fn wants_output(&self) -> bool {
        self.sink.is_some() && self.pos < self.buf.len()
    }
    /// Read a chunk from the source.
    pub fn read_source(&mut self) {
        let Some(src) = self.source else { return };
        let mut chunk = vec![0u8; 65536];
        match nix::unistd::read(src, &mut chunk) {
            Ok(0) | Err(Errno::EBADF | Errno::EIO) => {
                self.source = None;
            }
            Ok(n) => {
                chunk.truncate(n);
                self.buf = chunk;
                self.pos = 0;
            }
            Err(_) => {}
        }
        self.close_if_done();
    }
    /// Write what is buffered to the sink.
    pub fn write_sink(&mut self) {
        let Some(sink) = &self.sink else { return };
        match nix::unistd::write(sink, &self.buf[self.pos..]) {
            Ok(n) => self.pos += n,
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Err(_) => {
                // The command closed its stdin: stop forwarding.
                self.sink = None;
                self.source = None;
            }
        }
        self.close_if_done();
    }
    /// Close the sink once the source is exhausted and everything was written.
    pub fn close_if_done(&mut self) {
        if self.source.is_none() && self.pos >= self.buf.len() {
            self.sink = None;
        }
    }
}

/// Drain an output stream to EOF after the tree is gone (bounded by the output limit).
pub fn drain(o: &mut Option<Output>, cap: u64) {
    let Some(o) = o else { return };
    let until = Instant::now() + Duration::from_secs(1);
    while o.fd.is_some() && Instant::now() < until {
        if let Some(fd) = &o.fd {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(100u16));
        }
        o.pump(cap);
    }
}
