//! The supervisor's end of the command's stdin, stdout and stderr.
//!
//! [`Output`] reads one output stream without blocking, counts every byte, and keeps or forwards
//! at most the output limit; [`StdinPump`] forwards bytes (the request's, or our own stdin) to
//! the command without ever blocking the supervisor's loop.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// One output stream of the command, as seen by the supervisor.
pub struct Output {
    pub fd: Option<OwnedFd>,
    pub kept: Vec<u8>,
    pub total: u64,
    pub emitted: u64,
    pub truncated: bool,
    /// Forward to this descriptor of ours instead of keeping.
    pub forward: Option<i32>,
}

impl Output {
    /// Watch `fd`; forward to our descriptor `forward` instead of keeping, when given.
    pub fn new(fd: OwnedFd, forward: Option<i32>) -> Output {
        Output {
            fd: Some(fd),
            kept: Vec::new(),
            total: 0,
            emitted: 0,
            truncated: false,
            forward,
        }
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
                match self.forward {
                    Some(to) => write_all_raw(to, &buf[..take]),
                    None => self.kept.extend_from_slice(&buf[..take]),
                }
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
}

fn write_all_raw(fd: i32, mut bytes: &[u8]) {
    // SAFETY: `fd` is one of our own standard descriptors (1 or 2), open for the whole run.
    let out = unsafe { BorrowedFd::borrow_raw(fd) };
    while !bytes.is_empty() {
        match nix::unistd::write(out, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                let mut fds = [PollFd::new(out, PollFlags::POLLOUT)];
                let _ = poll(&mut fds, PollTimeout::from(100u16));
            }
            Err(_) => return,
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
