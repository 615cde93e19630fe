//! The host side of a traced run's virtual clock ([`warden_trace::clock`]): the run's own
//! record file, which the jail shows read-only at [`warden_trace::clock::FILE_IN_JAIL`] and
//! every traced process maps, and the switches of rate the caller asks for (the detonation's
//! dwell runs its clocks fast).
//!
//! Guarantees: the file always holds a complete record (a switch is written as a sequence
//! number made odd, the new fields, then the number made even, each its own write, so a
//! reader never takes a half-written record); the clocks the program reads never jump or go
//! back at a switch; a run nobody switches runs on the real clock.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use warden_trace::clock::{Record, SIZE};

/// The run's clock.
#[derive(Debug)]
pub struct Clock {
    file: File,
    /// The record in force and its sequence number.
    state: Mutex<(Record, u32)>,
}

/// The real monotonic time, in nanoseconds.
fn now() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec()
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec())
    })
}

impl Clock {
    /// A new clock file at `path` (mode 0644, created new), on the real clock.
    pub fn create(path: &Path) -> std::io::Result<Clock> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(path)?;
        let record = Record::real(now());
        file.write_all_at(&record.encode(0), 0)?;
        Ok(Clock {
            file,
            state: Mutex::new((record, 0)),
        })
    }

    /// Run the clocks at `rate` from now on (1: real speed; the lead they have stays); returns
    /// the record now in force.
    pub fn set_rate(&self, rate: f64) -> std::io::Result<Record> {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let writing = s.1.wrapping_add(1) | 1;
        let done = writing.wrapping_add(1);
        self.file.write_all_at(&writing.to_ne_bytes(), 0)?;
        // The switch's moment is taken once readers see the record busy: a reader that read
        // the clock before it also read the old record whole, so no reading is ever computed
        // at the old rate past the new base.
        let next = s.0.switch(now(), rate);
        let written = self
            .file
            .write_all_at(&next.encode(done)[4..SIZE], 4)
            .and_then(|()| self.file.write_all_at(&done.to_ne_bytes(), 0));
        if let Err(e) = written {
            // Put the record in force back, whole: never leave readers a busy one.
            let _ = self.file.write_all_at(&s.0.encode(done), 0);
            s.1 = done;
            return Err(e);
        }
        *s = (next, done);
        Ok(next)
    }

    /// The rate in force.
    pub fn rate(&self) -> f64 {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .rate()
    }

    /// How far the clocks are ahead now, in milliseconds.
    pub fn ahead_ms(&self) -> i64 {
        let s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.0.ahead_at(now()) / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_written_whole_and_keep_the_lead() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("clock");
        let c = Clock::create(&path).unwrap();
        let read = || {
            let b = std::fs::read(&path).unwrap();
            let seq = u32::from_ne_bytes(b[0..4].try_into().unwrap());
            (seq, Record::decode(&b).unwrap())
        };
        assert_eq!(read().1.rate_milli, 1000);
        c.set_rate(1000.0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let fast = c.set_rate(1.0).unwrap();
        let (seq, r) = read();
        assert_eq!(seq % 2, 0, "a complete record");
        assert_eq!(r, fast);
        // 20 ms at 1000x: about 20 s ahead, kept at rate 1.
        assert!(r.base_ahead >= 19_000_000_000, "{r:?}");
        assert!(c.ahead_ms() >= 19_000, "{}", c.ahead_ms());
        assert!(Clock::create(&path).is_err(), "never an existing file");
    }
}
