//! A transient systemd scope with `Delegate=yes` for this process, over D-Bus.
//!
//! On a host whose init is systemd, a process's cgroup belongs to systemd unless the unit was
//! delegated: Warden asks the manager (`StartTransientUnit`, as `systemd-run --scope` and
//! crun's systemd driver do) for a scope of its own holding this process, delegated, so that
//! it may make the run groups beneath it. The scope ends by itself when its last process exits.
//!
//! Guarantees: one method call on the system bus, given [`CALL_TIMEOUT`] for its reply; asked
//! only of the systemd that is pid 1 of our own pid namespace (a pid is named by number); the
//! scope goes in the slice we came from; the caller learns that the move happened by reading
//! its own cgroup, never by trusting the reply.

use std::time::Duration;

use zbus::blocking::connection::Builder;
use zbus::zvariant::Value;

/// How long the manager has to answer.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether systemd is init of this host and of our pid namespace (the test `sd_booted(3)`
/// makes, and pid 1 is systemd: a bus bind-mounted into a container reaches a manager that
/// would read our pid in another namespace).
pub(super) fn booted() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
        && std::fs::read_to_string("/proc/1/comm").is_ok_and(|c| c.trim() == "systemd")
}

/// Ask systemd to start scope `unit` holding `pid`, delegated, in `slice` when given. Err
/// carries a one-line reason.
pub(super) fn start_scope(unit: &str, pid: u32, slice: Option<&str>) -> Result<(), String> {
    let bus = Builder::system()
        .map_err(|e| format!("no system bus: {e}"))?
        .method_timeout(CALL_TIMEOUT)
        .build()
        .map_err(|e| format!("no system bus: {e}"))?;
    let mut properties: Vec<(&str, Value<'_>)> = vec![
        ("Description", Value::from("Warden sandbox supervisor")),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        ("CollectMode", Value::from("inactive-or-failed")),
    ];
    if let Some(slice) = slice {
        properties.push(("Slice", Value::from(slice)));
    }
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
