//! The virtual clock of a traced run: one small record the supervisor writes and every traced
//! process maps read-only (the interposer's `interposer/clock.c` reads it), saying how far the
//! program's clocks are ahead of the real ones and how fast they run.
//!
//! Time is piecewise linear in the real monotonic clock: from the last switch at `base_real`,
//! when the clocks were `base_ahead` ahead, virtual time runs `rate` times as fast. A switch
//! keeps the clocks continuous (the new base is where the old line had got to), so no program
//! sees its clock jump or go back. Every clock the program reads (realtime, monotonic,
//! boottime) moves by the same amount, so they agree with each other; file and kernel
//! timestamps stay real.
//!
//! Guarantees: pure arithmetic and a fixed byte layout; no I/O. The rate is clamped to
//! [`MIN_RATE`]..=[`MAX_RATE`]; a rate that is not a finite number is the real rate.

/// Where the record appears inside the jail (the interposer opens this path).
pub const FILE_IN_JAIL: &str = env!("WARDEN_CLOCK_FILE");
/// The record's mark: an interposer ignores a record without it (the real clocks apply).
pub const MAGIC: u32 = 0x4b4c_4357;
/// Bytes of the record (the file is this long).
pub const SIZE: usize = 64;
/// The slowest rate (the real one: a run is never slowed down).
pub const MIN_RATE: f64 = 1.0;
/// The fastest rate.
pub const MAX_RATE: f64 = 100_000.0;

/// One state of the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The real monotonic time of the last switch, in nanoseconds.
    pub base_real: i64,
    /// How far the clocks were ahead at the switch, in nanoseconds.
    pub base_ahead: i64,
    /// Virtual nanoseconds per real nanosecond, times 1000.
    pub rate_milli: i64,
}

impl Record {
    /// The real clock: nothing ahead, rate 1.
    pub fn real(now: i64) -> Record {
        Record {
            base_real: now,
            base_ahead: 0,
            rate_milli: 1000,
        }
    }

    /// How far the clocks are ahead at the real monotonic time `now` (ns).
    pub fn ahead_at(&self, now: i64) -> i64 {
        if now <= self.base_real {
            return self.base_ahead;
        }
        let extra = i128::from(self.rate_milli - 1000) * i128::from(now - self.base_real) / 1000;
        self.base_ahead
            .saturating_add(i64::try_from(extra).unwrap_or(i64::MAX))
    }

    /// The record from `now` on at `rate` (clamped), continuous with this one.
    pub fn switch(&self, now: i64, rate: f64) -> Record {
        Record {
            base_real: now,
            base_ahead: self.ahead_at(now),
            rate_milli: rate_milli(rate),
        }
    }

    /// The rate, as a number.
    pub fn rate(&self) -> f64 {
        // Exact for every rate the clamp allows (at most 10^8, far below 2^53).
        #[allow(clippy::cast_precision_loss)]
        let r = self.rate_milli as f64 / 1000.0;
        r
    }

    /// The record's bytes with sequence number `seq` (even: complete; the writer puts an odd
    /// one first, then this).
    pub fn encode(&self, seq: u32) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..4].copy_from_slice(&seq.to_ne_bytes());
        b[4..8].copy_from_slice(&MAGIC.to_ne_bytes());
        b[8..16].copy_from_slice(&self.base_real.to_ne_bytes());
        b[16..24].copy_from_slice(&self.base_ahead.to_ne_bytes());
        b[24..32].copy_from_slice(&self.rate_milli.to_ne_bytes());
        b
    }

    /// A record read back from its bytes (`None` without the mark).
    pub fn decode(b: &[u8]) -> Option<Record> {
        let word = |at: usize| -> Option<[u8; 8]> { b.get(at..at + 8)?.try_into().ok() };
        let magic: [u8; 4] = b.get(4..8)?.try_into().ok()?;
        (u32::from_ne_bytes(magic) == MAGIC).then_some(())?;
        Some(Record {
            base_real: i64::from_ne_bytes(word(8)?),
            base_ahead: i64::from_ne_bytes(word(16)?),
            rate_milli: i64::from_ne_bytes(word(24)?),
        })
    }
}

/// `rate` in thousandths, clamped; not a finite number: the real rate.
fn rate_milli(rate: f64) -> i64 {
    if !rate.is_finite() {
        return 1000;
    }
    let r = (rate.clamp(MIN_RATE, MAX_RATE) * 1000.0).round();
    // In range by the clamp: 1000..=10^8.
    #[allow(clippy::cast_possible_truncation)]
    let milli = r as i64;
    milli
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_switch_is_continuous_and_the_rate_applies_after_it() {
        let s = 1_000_000_000;
        let real = Record::real(5 * s);
        assert_eq!(real.ahead_at(100 * s), 0);
        let fast = real.switch(10 * s, 120.0);
        assert_eq!(fast.ahead_at(10 * s), 0);
        // One real second at 120x: 119 seconds ahead.
        assert_eq!(fast.ahead_at(11 * s), 119 * s);
        let back = fast.switch(12 * s, 1.0);
        assert_eq!(back.ahead_at(12 * s), 238 * s);
        assert_eq!(back.ahead_at(50 * s), 238 * s, "at rate 1 the lead stays");
        assert!((fast.rate() - 120.0).abs() < f64::EPSILON);
    }

    #[test]
    fn rates_are_clamped_and_nonsense_is_real_time() {
        assert_eq!(rate_milli(0.5), 1000, "never slower than real time");
        assert_eq!(rate_milli(f64::NAN), 1000);
        assert_eq!(rate_milli(f64::INFINITY), 1000);
        assert_eq!(rate_milli(1e12), 100_000_000);
    }

    #[test]
    fn the_layout_is_what_the_interposer_reads() {
        let r = Record {
            base_real: 7,
            base_ahead: -3,
            rate_milli: 120_000,
        };
        let b = r.encode(2);
        assert_eq!(&b[0..4], &2u32.to_ne_bytes());
        assert_eq!(&b[4..8], &MAGIC.to_ne_bytes());
        assert_eq!(Record::decode(&b), Some(r));
        assert_eq!(Record::decode(&[0u8; SIZE]), None, "no mark, no record");
        assert_eq!(Record::decode(&b[..20]), None);
        assert!(FILE_IN_JAIL.starts_with('/'));
        assert_eq!(
            env!("WARDEN_CLOCK_MAGIC"),
            MAGIC.to_string(),
            "build.rs's mark"
        );
    }

    proptest! {
        #[test]
        fn the_clock_never_goes_back(
            switches in proptest::collection::vec((0i64..1_000_000_000_000, 0.0f64..200_000.0), 1..20),
        ) {
            let mut times: Vec<i64> = switches.iter().map(|(t, _)| *t).collect();
            times.sort_unstable();
            let mut r = Record::real(0);
            let mut last = i64::MIN;
            for (t, (_, rate)) in times.iter().zip(&switches) {
                let before = t + r.ahead_at(*t);
                r = r.switch(*t, *rate);
                let after = t + r.ahead_at(*t);
                prop_assert_eq!(before, after);
                prop_assert!(after >= last);
                last = after;
            }
        }
    }
}
