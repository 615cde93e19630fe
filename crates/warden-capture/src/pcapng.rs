//! The session's traffic as a pcapng file (`--pcap FILE`): one interface of raw IP packets
//! (link type 101, nanosecond timestamps), every packet the jail's namespace sent or was sent,
//! each once. Writing is `pcap-file`'s; this module bounds it.
//!
//! Guarantees: the file never grows past its byte cap ([`MAX_BYTES`] by default); packets past
//! it are counted, not written, and a last comment block says how many were left out.

use std::borrow::Cow;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::{Duration, SystemTime};

use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};

/// Bytes a capture file may take, by default.
pub const MAX_BYTES: u64 = 256 << 20;

/// A pcapng file being written.
pub struct Pcap {
    writer: PcapNgWriter<BufWriter<File>>,
    written: u64,
    cap: u64,
    left_out: u64,
}

impl std::fmt::Debug for Pcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pcap")
            .field("written", &self.written)
            .field("left_out", &self.left_out)
            .finish_non_exhaustive()
    }
}

/// What a finished capture file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// Packets written.
    pub packets: u64,
    /// Packets past the cap, not written.
    pub left_out: u64,
}

fn io(e: pcap_file::PcapError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Pcap {
    /// Create `path` (it must not exist, nor be a link: a capture never overwrites or follows;
    /// mode 0600, the traffic may carry secrets) with at most `cap` bytes.
    pub fn create(path: &Path, cap: u64) -> std::io::Result<Pcap> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        let mut writer = PcapNgWriter::new(BufWriter::new(file)).map_err(io)?;
        writer
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::RAW,
                snaplen: 0,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Borrowed("warden-jail")),
                    InterfaceDescriptionOption::IfDescription(Cow::Borrowed(
                        "every packet of the jail's network namespace (its loopback)",
                    )),
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })
            .map_err(io)?;
        Ok(Pcap {
            writer,
            written: 0,
            cap,
            left_out: 0,
        })
    }

    /// Write one packet seen at `at`, unless the cap is reached.
    pub fn packet(&mut self, at: SystemTime, data: &[u8]) {
        let size = data.len() as u64 + 40;
        if self.written + size > self.cap {
            self.left_out += 1;
            return;
        }
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: at
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO),
            original_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            data: Cow::Borrowed(data),
            options: Vec::<EnhancedPacketOption>::new(),
        };
        match self.writer.write_pcapng_block(block) {
            Ok(n) => self.written += n as u64,
            Err(e) => {
                tracing::debug!(error = %e, "pcapng write");
                self.left_out += 1;
            }
        }
    }

    /// Flush and close; what was written and left out.
    pub fn finish(self, packets: u64) -> std::io::Result<Written> {
        use std::io::Write;
        let left_out = self.left_out;
        let mut inner = self.writer.into_inner();
        inner.flush()?;
        Ok(Written {
            packets: packets.saturating_sub(left_out),
            left_out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_written_and_the_cap_holds() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("a.pcapng");
        let mut p = Pcap::create(&path, 400).unwrap();
        for _ in 0..10 {
            p.packet(SystemTime::now(), &[0x45; 100]);
        }
        let w = p.finish(10).unwrap();
        assert!(w.left_out > 0 && w.packets > 0, "{w:?}");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            &bytes[..4],
            &[0x0a, 0x0d, 0x0d, 0x0a],
            "a section header first"
        );
        assert!(
            Pcap::create(&path, 400).is_err(),
            "an existing file is never overwritten"
        );
    }
}
