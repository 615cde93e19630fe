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
