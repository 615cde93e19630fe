//! The jail's init: pid 1 of the new pid namespace.
//!
//! It waits for the supervisor to write its id maps, finishes the namespaces (cgroup namespace,
//! host name, loopback), builds the file system view, starts the command, then drops every
//! privilege it had and reaps until the command exits. It reports the command's status and
//! exits, and because it is pid 1, the kernel then kills everything left in the namespace: no
//! background process outlives the command.
//!
//! Runs in a forked copy of the single-threaded supervisor; it never returns.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use crate::child;
use crate::error::{SetupFailure, Stage};
use crate::idmap::IdPlan;
use crate::mounts::{self, Prepared};
use crate::policy::Policy;
use crate::protocol::{StatusMessage, recv_handoff};
use crate::sys::{self, CloneResult};

/// Everything the init and the command need, prepared by the supervisor before the clone.
#[derive(Debug)]
pub struct Launch {
    /// The policy.
    pub policy: Policy,
    /// The command line.
    pub argv: Vec<CString>,
    /// The command's environment.
    pub env: Vec<CString>,
    /// Search path for the program.
    pub path: Vec<CString>,
    /// Id layout.
    pub ids: IdPlan,
    /// Path lists of the view, for Landlock (filled in by the init).
    pub prepared: Prepared,
    /// The Landlock ruleset's opened paths (prepared by the init, enforced by the command).
    pub landlock: Option<crate::landlock::Plan>,
    /// The assembled seccomp program.
    pub seccomp: Vec<libc::sock_filter>,
    /// Where status messages go.
    pub status: OwnedFd,
    /// `SOCK_SEQPACKET` from the supervisor: one byte once the id maps are written, then the
    /// [`Handoff`](crate::protocol::Handoff), then two bytes once we are in the cgroup.
    pub sync: OwnedFd,
    /// The command's stdin, stdout and stderr, or `None` to inherit ours.
    pub stdio: Option<[OwnedFd; 3]>,
    /// Whether a cgroup enforces the memory limit (otherwise RLIMIT_AS is the floor); set by
    /// the init when the supervisor releases it.
    pub memory_cgroup: bool,
    /// A prepared run: `argv` is empty until the supervisor sends the command (see
    /// [`crate::warm`]).
    pub deferred: bool,
}

/// Send a status message; failures are ignored (the supervisor sees our exit instead).
pub fn report(status: &OwnedFd, msg: &StatusMessage) {
    let _ = nix::unistd::write(status, &msg.encode());
}

/// Wait for an `N`-byte message from the supervisor; anything else (EOF when it died) fails.
fn await_bytes<const N: usize>(
    sync: &OwnedFd,
    stage: Stage,
    detail: &str,
) -> Result<[u8; N], SetupFailure> {
    let mut buf = [0u8; N];
    match nix::unistd::read(sync, &mut buf) {
        Ok(n) if n == N => Ok(buf),
        _ => Err(SetupFailure::plain(stage, detail)),
    }
}

fn setup(launch: &mut Launch) -> Result<(), SetupFailure> {
    let ns = |detail: &str, e: Errno| SetupFailure::errno(Stage::Namespaces, detail, e);
    await_bytes::<1>(
        &launch.sync,
        Stage::IdMap,
        "the supervisor did not map our ids",
    )?;
    if launch.ids.privileged {
        let cred = |detail: &str, e: Errno| SetupFailure::errno(Stage::Credentials, detail, e);
        let root_g = Gid::from_raw(0);
        let root_u = Uid::from_raw(0);
        nix::unistd::setresgid(root_g, root_g, root_g).map_err(|e| cred("setresgid(0)", e))?;
        nix::unistd::setgroups(&[]).map_err(|e| cred("setgroups", e))?;
        nix::unistd::setresuid(root_u, root_u, root_u).map_err(|e| cred("setresuid(0)", e))?;
    }
    // Only now: the kernel clears the parent-death signal whenever credentials change. If the
    // supervisor died before this point, our next read from it sees EOF and we give up.
    nix::sys::prctl::set_pdeathsig(Some(Signal::SIGKILL))
        .map_err(|e| ns("setting the parent-death signal", e))?;
    nix::unistd::sethostname(&launch.policy.hostname).map_err(|e| ns("sethostname", e))?;
    // Pid 1 as any Linux machine's, never the host's warden command line. Cosmetic: a kernel
    // that does not tell where the arguments are leaves it as it was, and the run goes on.
    let _ = sys::disguise("init", "/sbin/init");
    sys::loopback_up().map_err(|e| {
        let detail = if e == nix::errno::Errno::ENOTTY {
            // Measured under gVisor (runsc): its network stack refuses the interface ioctl.
            "bringing loopback up: the kernel does not support the interface ioctl (an \
                 emulated kernel such as gVisor's; run Warden on a Linux kernel)"
        } else {
            "bringing loopback up"
        };
        SetupFailure::errno(Stage::Network, detail, e)
    })?;
    let system = mounts::prepare_system(&launch.policy)?;
    let lists = mounts::stage_system(system, &launch.policy)?;
    // Meanwhile the supervisor cloned the policy's own paths.
    let (handoff, fds) = recv_handoff(&launch.sync)
        .map_err(|e| SetupFailure::errno(Stage::Supervisor, "receiving the host mounts", e))?;
    let host = Prepared::from_handoff(handoff, fds)?;
    let as_user = (launch.ids.privileged && launch.policy.workspace.is_some())
        .then_some((launch.policy.uid, launch.policy.gid));
    launch.prepared = mounts::finish_root(lists, host, &launch.policy, as_user)?;
    // The command may start only once we are in the run's cgroup: the supervisor says so with
    // two bytes (in a cgroup at all, memory limited by it).
    let go = await_bytes::<2>(
        &launch.sync,
        Stage::Supervisor,
        "the supervisor did not release us",
    )?;
    launch.memory_cgroup = go[1] == 1;
    if go[0] == 1 {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
            .map_err(|e| ns("unsharing the cgroup namespace", e))?;
    }
    Ok(())
}

/// Drop everything the init no longer needs before it starts reaping.
fn harden_self(launch: &Launch) -> Result<(), SetupFailure> {
    let cred = |detail: &str, e: Errno| SetupFailure::errno(Stage::Credentials, detail, e);
    for cap in 0..=sys::cap_last_cap() {
        sys::capbset_drop(cap).map_err(|e| cred("dropping the bounding set", e))?;
    }
    sys::ambient_clear_all().map_err(|e| cred("clearing ambient capabilities", e))?;
    sys::capset_empty().map_err(|e| cred("dropping capabilities", e))?;
    nix::sys::prctl::set_dumpable(false).map_err(|e| cred("PR_SET_DUMPABLE", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| cred("PR_SET_NO_NEW_PRIVS", e))?;
    // Keep only the status pipe; stdio becomes /dev/null.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
    if let Ok(keep) = u32::try_from(launch.status.as_raw_fd()) {
        let _ = sys::close_all_but(&[keep]);
    }
    Ok(())
}

/// Reap every child until the command exits, then report its status.
fn reap(command: Pid, status: &OwnedFd) -> ! {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => {
                report(
                    status,
                    &StatusMessage::Exited {
                        code: Some(code),
                        signal: None,
                    },
                );
                sys::exit_now(0);
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                let signal = Some(sig as i32);
                report(status, &StatusMessage::Exited { code: None, signal });
                sys::exit_now(0);
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => sys::exit_now(0),
        }
    }
}

/// The init's whole life.
pub fn run(mut launch: Launch) -> ! {
    if let Err(f) = setup(&mut launch) {
        report(&launch.status, &StatusMessage::Failed(f));
        sys::exit_now(125);
    }
    match crate::landlock::prepare(&launch.prepared, &launch.policy) {
        Ok(plan) => launch.landlock = plan,
        Err(f) => {
            report(&launch.status, &StatusMessage::Failed(f));
            sys::exit_now(125);
        }
    }
    // The seccomp filter goes on once, here, and the command inherits it across the fork: nothing
    // the init or the command does from now on is on its deny list.
    let filtered = nix::sys::prctl::set_no_new_privs()
        .map_err(|e| SetupFailure::errno(Stage::Seccomp, "PR_SET_NO_NEW_PRIVS", e))
        .and_then(|()| {
            if !launch.policy.trace {
                return crate::seccomp::install(&launch.seccomp)
                    .map_err(|e| SetupFailure::plain(Stage::Seccomp, e.to_string()));
            }
            // Tracing: the notifications go to the supervisor, which must have the listener
            // before anything traced happens (our own next open included).
            let listener = sys::seccomp_install_listener(&launch.seccomp).map_err(|e| {
                SetupFailure::errno(Stage::Seccomp, "installing the traced filter", e)
            })?;
            // Not with SCM_RIGHTS: sendmsg is itself observed now, and nobody holds the
            // listener yet. The supervisor copies it out of us with pidfd_getfd (plain write
            // and read are not observed) and says when it has it.
            let number = listener.as_raw_fd().to_le_bytes();
            nix::unistd::write(&launch.sync, &number)
                .map_err(|e| SetupFailure::errno(Stage::Seccomp, "announcing the listener", e))?;
            await_bytes::<1>(
                &launch.sync,
                Stage::Seccomp,
                "the tracer did not take the listener",
            )
            .map(drop)
        });
    if let Err(f) = filtered {
        report(&launch.status, &StatusMessage::Failed(f));
        sys::exit_now(125);
    }
    // A prepared jail's command process is forked now and waits for its command line itself
    // (see `child`), with everything but the command in place.
    let command = match sys::fork_single_threaded() {
        Ok(CloneResult::Child) => child::exec(launch),
        Ok(CloneResult::Parent(pid)) => pid,
        Err(e) => {
            let f = SetupFailure::errno(Stage::Supervisor, "forking the command", e);
            report(&launch.status, &StatusMessage::Failed(f));
            sys::exit_now(125);
        }
    };
    launch.stdio = None;
    if let Err(f) = harden_self(&launch) {
        report(&launch.status, &StatusMessage::Failed(f));
        sys::exit_now(125);
    }
    reap(command, &launch.status)
}
