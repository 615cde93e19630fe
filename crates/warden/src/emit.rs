//! Where a report goes: `--out FILE`, or stdout ending in a newline.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Write `text` to `out`, or to stdout (with a final newline) when there is none.
pub fn emit(text: &str, out: Option<&Path>) -> Result<()> {
    match out {
        Some(path) => std::fs::write(path, text.as_bytes())
            .with_context(|| format!("--out {}", path.display())),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                stdout.write_all(b"\n")?;
            }
            Ok(())
        }
    }
}

/// The absolute path a `--pcap FILE` is written to: an existing regular file is removed first
/// (the capture creates its file and never follows a link); anything else there is an error.
pub fn pcap_file(file: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let path = std::path::absolute(file).context("--pcap")?;
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => {
            std::fs::remove_file(&path).with_context(|| format!("--pcap: {}", path.display()))?;
        }
        Ok(_) => anyhow::bail!(
            "--pcap: {} exists and is not a regular file",
            path.display()
        ),
        Err(_) => {}
    }
    Ok(path)
}
