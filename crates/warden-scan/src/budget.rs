//! The scan's total read budget: every file the scan reads is charged here, and once
//! [`MAX_TOTAL`] bytes have been read the rest of the tree is left unread and the inventory
//! says it is incomplete. Per-file caps alone do not bound a tree of half a million 32 MiB
//! files (hard links and sparse files cost a hostile install nothing).
//!
//! One scan runs on one thread; the budget is that thread's, reset by [`reset`].

use std::cell::Cell;

/// Most bytes one scan reads (manifests, lock files, METADATA, sources).
pub const MAX_TOTAL: u64 = 2 << 30;

thread_local! {
    static LEFT: Cell<u64> = const { Cell::new(MAX_TOTAL) };
    static SPENT_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Start a scan with the whole budget.
pub fn reset() {
    LEFT.with(|l| l.set(MAX_TOTAL));
    SPENT_OUT.with(|s| s.set(false));
}

/// Take `bytes` from the budget; `false` (and the budget marked spent) when they do not fit.
pub fn charge(bytes: u64) -> bool {
    LEFT.with(|l| {
        let left = l.get();
        if bytes > left {
            SPENT_OUT.with(|s| s.set(true));
            false
        } else {
            l.set(left - bytes);
            true
        }
    })
}

/// Whether some read was refused for lack of budget.
pub fn spent() -> bool {
    SPENT_OUT.with(Cell::get)
}
