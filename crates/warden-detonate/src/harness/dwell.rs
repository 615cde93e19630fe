//! The dwell: after the harness's calls, the server and everything it started keep running,
//! unprompted, while the traced programs' clocks run fast, so behaviour that waits for time to
//! pass shows within the session: a theft after a 45-second sleep, a timer, a detached child
//! (`setsid`, double-forked: still in the jail's process tree, which ends only at teardown)
//! that acts once the calls are over. Its events are in the window `dwell`.
//!
//! Time runs fast only for programs that load the interposer (see `warden_trace::clock`:
//! static binaries and raw syscalls keep real time, and then wait out only the real length).
//!
//! Guarantees: at most [`REAL`] of real time (the switches included) and never past the
//! session's budget; the clocks are asked back to real speed afterwards whatever happened (the
//! lead they gained stays, so no program sees time go back), and `clock_left_fast` says so if
//! that was not acknowledged; the session's `dwell` says how long it lasted, real and virtual,
//! and at what rate, or why it did not run.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Ctx;

/// Default virtual length.
pub const DEFAULT: Duration = Duration::from_secs(600);
/// Real time the dwell takes, at most (its rate is the virtual length over this).
pub const REAL: Duration = Duration::from_secs(3);
/// The longest virtual dwell that may be asked for.
pub const MAX: Duration = Duration::from_secs(7 * 24 * 3600);

/// The dwell's real length and rate for a virtual length `virt` with `left` of the budget.
fn plan(virt: Duration, left: Duration) -> Option<(Duration, f64)> {
    let real = REAL.min(virt).min(left);
    if real.is_zero() {
        return None;
    }
    let rate = (virt.as_secs_f64() / real.as_secs_f64())
        .clamp(warden_trace::clock::MIN_RATE, warden_trace::clock::MAX_RATE);
    Some((real, rate))
}

/// Dwell for the session's virtual length (none when it is zero); what happened goes to
/// `ctx.session.dwell`.
pub(super) async fn dwell(ctx: &mut Ctx<'_>) {
    let virt = ctx.settings.dwell;
    if virt.is_zero() {
        return;
    }
    let Some((real, rate)) = plan(virt, ctx.left()) else {
        ctx.session.dwell = Some(json!({ "skipped": "the time budget ran out" }));
        return;
    };
    ctx.progress(&format!(
        "dwelling: {} s of the server's time in {} s",
        virt.as_secs(),
        real.as_secs_f64()
    ));
    let began = Instant::now();
    if ctx.link.window_at_rate(Some("dwell"), rate).is_err() {
        // Whatever the tracer did with the request, the clocks go back to the real rate and
        // the dwell's window closes before anything else runs.
        let back = ctx.link.window_at_rate(None, 1.0);
        let mut d = json!({ "skipped": "the traced programs' clock did not switch" });
        if back.is_err() {
            d["clock_left_fast"] = json!(true);
        }
        ctx.session.dwell = Some(d);
        return;
    }
    // The switch itself may have taken time (a tracer busy with a flood): what is left of
    // the real length, never past the budget.
    let rest = real.saturating_sub(began.elapsed()).min(ctx.left());
    tokio::time::sleep(rest).await;
    let real_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
    let back = ctx.link.window_at_rate(None, 1.0);
    ctx.session.dwell = Some(record(real_ms, rate, back.is_ok()));
}

fn record(real_ms: u64, rate: f64, back: bool) -> Value {
    // Milliseconds of a dwell (at most a week of virtual time) fit an f64 exactly.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let virtual_ms = (real_ms as f64 * rate).round() as u64;
    let mut d = json!({ "real_ms": real_ms, "virtual_ms": virtual_ms, "rate": rate });
    if !back {
        d["clock_left_fast"] = json!(true);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_minutes_in_three_seconds_within_the_budget() {
        let (real, rate) = plan(DEFAULT, Duration::from_secs(60)).unwrap();
        assert_eq!(real, REAL);
        assert!((rate - 200.0).abs() < 1e-9);
        // Less budget left: shorter, faster.
        let (real, rate) = plan(DEFAULT, Duration::from_secs(1)).unwrap();
        assert_eq!(real, Duration::from_secs(1));
        assert!((rate - 600.0).abs() < 1e-9);
        // Shorter than the real length: real time.
        let (real, rate) = plan(Duration::from_secs(2), Duration::from_secs(60)).unwrap();
        assert_eq!(real, Duration::from_secs(2));
        assert!((rate - 1.0).abs() < 1e-9);
        assert!(plan(DEFAULT, Duration::ZERO).is_none());
        let (_, rate) = plan(MAX, Duration::from_millis(1)).unwrap();
        assert!(
            (rate - warden_trace::clock::MAX_RATE).abs() < 1e-9,
            "clamped"
        );
        let r = record(3000, 200.0, true);
        assert_eq!(r["virtual_ms"], 600_000);
        assert!(r.get("clock_left_fast").is_none());
    }
}
