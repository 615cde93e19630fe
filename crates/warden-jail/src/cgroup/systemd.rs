//! A transient systemd scope with `Delegate=yes` for this process, over D-Bus.
//!
//! On a host whose init is systemd, a process's cgroup belongs to systemd unless the unit was
//! delegated: Warden asks the manager (`StartTransientUnit`, as `systemd-run --scope` and
//! crun's systemd driver do) for a scope of its own holding this process, delegated, so that
//! it may make the run groups beneath it. The scope ends by itself when its last process exits.
//!
//! Guarantees: one method call on the system bus, bounded by the bus's own reply timeout; the
//! caller learns that the move happened by reading its own cgroup, never by trusting the reply.

use zbus::blocking::Connection;
use zbus::zvariant::Value;

/// Whether systemd is this host's init (the test `sd_booted(3)` makes).
pub(super) fn booted() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
}

/// Ask systemd to start scope `unit` holding `pid`, delegated. Err carries a one-line reason.
pub(super) fn start_scope(unit: &str, pid: u32) -> Result<(), String> {
    let bus = Connection::system().map_err(|e| format!("no system bus: {e}"))?;
    let properties: Vec<(&str, Value<'_>)> = vec![
        ("Description", Value::from("Warden sandbox supervisor")),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        ("CollectMode", Value::from("inactive-or-failed")),
    ];
    let aux: Vec<(&str, Vec<(&str, Value<'_>)>)> = Vec::new();
    bus.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        "StartTransientUnit",
        &(unit, "fail", properties, aux),
    )
    .map_err(|e| format!("systemd refused the scope: {e}"))?;
    Ok(())
}
