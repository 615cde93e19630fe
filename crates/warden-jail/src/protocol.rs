//! Messages between the jail's processes, over pipes.
//!
//! Two channels:
//! - library ↔ helper: length-prefixed frames (`u32` little-endian length, then the bytes),
//!   each bounded by a maximum that the reader checks before allocating;
//! - init and command → supervisor: one JSON object per line, each shorter than `PIPE_BUF` so
//!   concurrent writers never interleave.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::error::SetupFailure;
use crate::outcome::LandlockReport;

/// Largest JSON frame accepted (policies, outcomes).
pub const MAX_JSON_FRAME: u32 = 16 << 20;

/// Write one frame.
pub fn write_frame(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(bytes)
}

/// Read one frame of at most `max` bytes.
pub fn read_frame(r: &mut impl Read, max: u32) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame over its size limit",
        ));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// What the jail's init and the command (before exec) report to the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusMessage {
    /// Set-up failed.
    Failed(SetupFailure),
    /// Landlock was applied at this level (sent by the command just before exec).
    Landlock(LandlockReport),
    /// How the jail's root was switched (sent with the Landlock report).
    Root(crate::mounts::RootSwitch),
    /// The command ended.
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Killing signal.
        signal: Option<i32>,
    },
}

impl StatusMessage {
    /// Encode as one line of at most 4000 bytes (long details are cut).
    pub fn encode(&self) -> Vec<u8> {
        let mut msg = self.clone();
        if let StatusMessage::Failed(f) = &mut msg
            && f.detail.len() > 3000
        {
            let mut cut = 3000;
            while !f.detail.is_char_boundary(cut) {
                cut -= 1;
            }
            f.detail.truncate(cut);
        }
        let mut line = serde_json::to_vec(&msg).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// What the supervisor hands the init: the detached mounts of the policy's own paths (their
/// descriptors travel alongside as `SCM_RIGHTS`, in order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handoff {
    /// Target and is-directory of each mount, in the order of the descriptors.
    pub mounts: Vec<(std::path::PathBuf, bool)>,
    /// Paths readable by the command (for Landlock).
    pub readable: Vec<std::path::PathBuf>,
    /// Paths writable by the command (for Landlock).
    pub writable: Vec<std::path::PathBuf>,
    /// Where the jail's `/proc` comes from.
    #[serde(default)]
    pub proc: crate::procfs::ProcSource,
}

/// Most descriptors one handoff may carry (the kernel's SCM_RIGHTS limit is 253).
pub const MAX_HANDOFF_FDS: usize = 250;
const MAX_HANDOFF_BYTES: usize = 1 << 16;

/// Send `body` and `fds` as one record on a `SOCK_SEQPACKET` socket.
pub(crate) fn send_record(
    sock: &std::os::fd::OwnedFd,
    body: &[u8],
    fds: &[std::os::fd::RawFd],
) -> Result<(), nix::errno::Errno> {
    use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, sendmsg};
    use std::os::fd::AsRawFd;
    let cmsgs = if fds.is_empty() {
        vec![]
    } else {
        vec![ControlMessage::ScmRights(fds)]
    };
    let iov = [std::io::IoSlice::new(body)];
    sendmsg::<UnixAddr>(sock.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), None)?;
    Ok(())
}

/// Receive one record of at most `max` bytes and its descriptors; EOF is `EPIPE`.
pub(crate) fn recv_record(
    sock: &std::os::fd::OwnedFd,
    max: usize,
) -> Result<(Vec<u8>, Vec<std::os::fd::OwnedFd>), nix::errno::Errno> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixAddr, recvmsg};
    use std::os::fd::AsRawFd;
    let mut body = vec![0u8; max];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; MAX_HANDOFF_FDS]);
    let mut iov = [std::io::IoSliceMut::new(&mut body)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(list) = c {
            fds.extend(crate::sys::adopt_received(list));
        }
    }
    let len = msg.bytes;
    if len == 0 {
        return Err(nix::errno::Errno::EPIPE);
    }
    body.truncate(len);
    Ok((body, fds))
}

/// Send `handoff` and `fds` as one record.
pub fn send_handoff(
    sock: &std::os::fd::OwnedFd,
    handoff: &Handoff,
    fds: &[std::os::fd::OwnedFd],
) -> Result<(), nix::errno::Errno> {
    use std::os::fd::AsRawFd;
    let body = serde_json::to_vec(handoff).map_err(|_| nix::errno::Errno::EINVAL)?;
    if body.len() > MAX_HANDOFF_BYTES || fds.len() > MAX_HANDOFF_FDS {
        return Err(nix::errno::Errno::E2BIG);
    }
    let raw: Vec<i32> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    send_record(sock, &body, &raw)
}

/// Receive what [`send_handoff`] sent.
pub fn recv_handoff(
    sock: &std::os::fd::OwnedFd,
) -> Result<(Handoff, Vec<std::os::fd::OwnedFd>), nix::errno::Errno> {
    let (body, fds) = recv_record(sock, MAX_HANDOFF_BYTES)?;
    let handoff = serde_json::from_slice(&body).map_err(|_| nix::errno::Errno::EBADMSG)?;
    Ok((handoff, fds))
}
