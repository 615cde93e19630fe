//! Standard input and output for the stdio transport, waited on by the runtime itself.
//!
//! tokio's `stdin()` and `stdout()` read and write on a blocking thread: every message then
//! crosses one more thread on its way in and out. MCP clients give their servers a pipe
//! (Python's `subprocess`) or a Unix stream socket (Node's `child_process`), both of which the
//! runtime can poll; anything else (a terminal, a file) keeps tokio's blocking reader and writer.
//!
//! Guarantees: the descriptions the client (or a wrapper that started us) shares are left as
//! they were. A pipe is reopened through `/proc/self/fd` into a description of our own, which
//! alone is made nonblocking; a socket is never made nonblocking: each `recv` and `send` asks
//! not to wait (`MSG_DONTWAIT`), and a send never raises SIGPIPE. Closing our side closes only
//! our copy of the descriptor (no `shutdown` of a socket another process may share).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{
    MsgFlags, SockType, UnixAddr, getsockname, getsockopt, recv, send, sockopt,
};
use nix::sys::stat::SFlag;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A pipe's own description of `fd`, nonblocking, for reading or writing.
fn private_pipe(fd: BorrowedFd<'_>, write: bool) -> Option<OwnedFd> {
    let mode = if write {
        nix::fcntl::OFlag::O_WRONLY
    } else {
        nix::fcntl::OFlag::O_RDONLY
    };
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::fcntl::open(
        path.as_str(),
        mode | nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}

/// What `fd` is, if the runtime can wait on it: a pipe or a Unix stream socket.
fn kind(fd: BorrowedFd<'_>) -> Option<SFlag> {
    let kind = SFlag::from_bits_truncate(nix::sys::stat::fstat(fd).ok()?.st_mode) & SFlag::S_IFMT;
    let unix_stream = || {
        getsockopt(&fd, sockopt::SockType).ok() == Some(SockType::Stream)
            && getsockname::<UnixAddr>(fd.as_raw_fd()).is_ok()
    };
    match kind {
        SFlag::S_IFIFO => Some(kind),
        SFlag::S_IFSOCK if unix_stream() => Some(kind),
        _ => None,
    }
}

/// A Unix stream socket read and written without waiting, whatever its description's mode.
struct Socket(AsyncFd<OwnedFd>);

impl Socket {
    fn of(fd: BorrowedFd<'_>) -> Option<Socket> {
        let copy = fd.try_clone_to_owned().ok()?;
        // `new` is deprecated because a generic `T` may change or close the descriptor it
        // reports (tokio#8587); an `OwnedFd` keeps the same open descriptor until it is
        // dropped with the `AsyncFd`, which is what `register`'s contract asks (this crate
        // has no unsafe code to call it with).
        #[allow(deprecated)]
        let registered = AsyncFd::new(copy);
        registered.ok().map(Socket)
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let got = guard.try_io(|fd| {
                recv(fd.as_raw_fd(), unfilled, MsgFlags::MSG_DONTWAIT).map_err(io::Error::from)
            });
            match got {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            let sent = guard.try_io(|fd| {
                send(
                    fd.as_raw_fd(),
                    data,
                    MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                )
                .map_err(io::Error::from)
            });
            if let Ok(result) = sent {
                return Poll::Ready(result);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// `fd` as a reader or writer the runtime polls itself, if it is one it can poll: a pipe
/// through `pipe` (given our own description of it), a socket through `socket`.
fn direct<T: ?Sized>(
    fd: BorrowedFd<'_>,
    write: bool,
    pipe: impl FnOnce(OwnedFd) -> Option<Box<T>>,
    socket: impl FnOnce(Socket) -> Box<T>,
) -> Option<Box<T>> {
    match kind(fd)? {
        SFlag::S_IFIFO => private_pipe(fd, write).and_then(pipe),
        _ => Socket::of(fd).map(socket),
    }
}

/// Standard input for the framing (see the module's documentation).
pub(crate) fn input() -> Box<dyn AsyncRead + Unpin + Send> {
    let stdin = io::stdin();
    direct::<dyn AsyncRead + Unpin + Send>(
        stdin.as_fd(),
        false,
        |p| Some(Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(p).ok()?) as _),
        |s| Box::new(s) as _,
    )
    .unwrap_or_else(|| Box::new(tokio::io::stdin()))
}

/// Standard output for the framing (see the module's documentation).
pub(crate) fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    let stdout = io::stdout();
    direct::<dyn AsyncWrite + Unpin + Send>(
        stdout.as_fd(),
        true,
        |p| Some(Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(p).ok()?) as _),
        |s| Box::new(s) as _,
    )
    .unwrap_or_else(|| Box::new(tokio::io::stdout()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        nix::fcntl::OFlag::from_bits_truncate(flags).contains(nix::fcntl::OFlag::O_NONBLOCK)
    }

    #[tokio::test]
    async fn a_pipe_is_reopened_and_the_shared_description_stays_blocking() {
        let (r, w) = nix::unistd::pipe().unwrap();
        assert_eq!(kind(r.as_fd()), Some(SFlag::S_IFIFO));
        let mut ours = tokio::net::unix::pipe::Receiver::from_owned_fd(
            private_pipe(r.as_fd(), false).unwrap(),
        )
        .unwrap();
        assert!(
            !nonblocking(r.as_fd()),
            "the shared description was changed"
        );
        nix::unistd::write(&w, b"line\n").unwrap();
        drop(w);
        let mut got = String::new();
        ours.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "line\n");
    }

    #[tokio::test]
    async fn a_socket_is_read_and_written_without_changing_its_mode() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(kind(a.as_fd()), Some(SFlag::S_IFSOCK));
        let mut ours = Socket::of(a.as_fd()).unwrap();
        ours.write_all(b"out\n").await.unwrap();
        let mut peer = tokio::net::UnixStream::from_std({
            b.set_nonblocking(true).unwrap();
            b
        })
        .unwrap();
        let mut buf = [0u8; 4];
        peer.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"out\n");
        peer.write_all(b"in\n").await.unwrap();
        drop(peer);
        let mut got = String::new();
        ours.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "in\n");
        assert!(!nonblocking(a.as_fd()), "the socket was made nonblocking");
    }

    #[test]
    fn a_file_is_left_to_tokios_blocking_reader() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(kind(f.as_fd()), None);
    }
}
