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
pub const MAX_JSON_FRAME: u32 = 1 << 20;

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
