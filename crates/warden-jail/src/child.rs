//! The command's last steps before `execve`, in the process that becomes the command.
//!
//! Order matters and is fixed: new session (no controlling terminal), stdio, death signal,
//! rlimits, ids, capabilities (bounding, ambient, then all sets), not dumpable, no_new_privs,
//! Landlock, descriptors above 2 closed, signal dispositions reset, then `execve` with the
//! policy's environment only. The seccomp filter is already in place: the init installed it just
//! before forking this process (none of these steps is on its deny list).
//! In a prepared jail this process is forked before the command is known: it takes every step
//! above at once, keeping only the sync socket (close-on-exec) besides the status pipe, then
//! waits there for the command line, sets the command's CPU limit and executes it — so a call
//! reaches the process that runs it directly, with no fork and no set-up on its path.
//! Any failure is reported on the status pipe and the process exits without running the command.
//!
//! Note: `execve` resets the dumpable flag for ordinary binaries; ptrace and
//! `process_vm_readv` stay denied by seccomp and core dumps by RLIMIT_CORE=0.

use std::ffi::CString;
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid};

use crate::error::{SetupFailure, Stage};
use crate::init::{Launch, report};
use crate::protocol::StatusMessage;
use crate::sys;

/// The rlimits; the CPU limit too unless the command (which brings its own) is still to come.
fn rlimits(launch: &Launch) -> Result<(), SetupFailure> {
    let l = &launch.policy.limits;
    let mut set = vec![
        (Resource::RLIMIT_CORE, 0, 0),
        (Resource::RLIMIT_NOFILE, l.open_files, l.open_files),
        (Resource::RLIMIT_FSIZE, l.file_size_bytes, l.file_size_bytes),
        (Resource::RLIMIT_NPROC, l.pids, l.pids),
    ];
    if !launch.memory_cgroup {
        set.push((Resource::RLIMIT_AS, l.memory_bytes, l.memory_bytes));
    }
    for (res, soft, hard) in set {
        setrlimit(res, soft, hard)
            .map_err(|e| SetupFailure::errno(Stage::Rlimits, format!("{res:?}"), e))?;
    }
    if launch.deferred {
        Ok(())
    } else {
        cpu_limit(launch)
    }
}

fn cpu_limit(launch: &Launch) -> Result<(), SetupFailure> {
    let cpu_s = launch.policy.limits.cpu_time_ms.div_ceil(1000);
    setrlimit(Resource::RLIMIT_CPU, cpu_s, cpu_s.saturating_add(1))
        .map_err(|e| SetupFailure::errno(Stage::Rlimits, "RLIMIT_CPU", e))
}

fn credentials(launch: &Launch) -> Result<(), SetupFailure> {
    let cred = |detail: &str, e: Errno| SetupFailure::errno(Stage::Credentials, detail, e);
    for cap in 0..=sys::cap_last_cap() {
        sys::capbset_drop(cap).map_err(|e| cred("dropping the bounding set", e))?;
    }
    sys::ambient_clear_all().map_err(|e| cred("clearing ambient capabilities", e))?;
    if launch.ids.privileged {
        let g = Gid::from_raw(launch.ids.gid);
        let u = Uid::from_raw(launch.ids.uid);
        nix::unistd::setgroups(&[g]).map_err(|e| cred("setgroups", e))?;
        nix::unistd::setresgid(g, g, g).map_err(|e| cred("setresgid", e))?;
        nix::unistd::setresuid(u, u, u).map_err(|e| cred("setresuid", e))?;
    }
    sys::capset_empty().map_err(|e| cred("dropping capabilities", e))?;
    nix::sys::prctl::set_dumpable(false).map_err(|e| cred("PR_SET_DUMPABLE", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| cred("PR_SET_NO_NEW_PRIVS", e))
}

fn stdio(launch: &Launch) -> Result<(), SetupFailure> {
    let Some([stdin, stdout, stderr]) = &launch.stdio else {
        return Ok(());
    };
    let io = |e: Errno| SetupFailure::errno(Stage::Stdio, "dup2", e);
    nix::unistd::dup2_stdin(stdin).map_err(io)?;
    nix::unistd::dup2_stdout(stdout).map_err(io)?;
    nix::unistd::dup2_stderr(stderr).map_err(io)
}

fn prepare(launch: &mut Launch) -> Result<(), SetupFailure> {
    nix::unistd::setsid().map_err(|e| SetupFailure::errno(Stage::Namespaces, "setsid", e))?;
    stdio(launch)?;
    rlimits(launch)?;
    credentials(launch)?;
    // After the id change, which clears it. (The init is pid 1: if it is gone, so is the whole
    // pid namespace, this process included.)
    nix::sys::prctl::set_pdeathsig(Some(Signal::SIGKILL))
        .map_err(|e| SetupFailure::errno(Stage::Namespaces, "parent-death signal", e))?;
    let ll = crate::landlock::restrict(launch.landlock.take(), launch.policy.landlock)?;
    report(&launch.status, &StatusMessage::Landlock(ll));
    report(&launch.status, &StatusMessage::Root(launch.prepared.root));
    // A prepared jail's command line is still to come on the sync socket.
    let mut keep = vec![launch.status.as_raw_fd()];
    if launch.deferred {
        keep.push(launch.sync.as_raw_fd());
    }
    let keep: Vec<u32> = keep
        .into_iter()
        .filter_map(|fd| u32::try_from(fd).ok())
        .collect();
    sys::close_all_but(&keep).map_err(|e| SetupFailure::errno(Stage::Stdio, "close_range", e))?;
    sys::reset_signals();
    Ok(())
}

/// Execute the program, searching the policy's PATH when it has no slash; returns the error of
/// the most telling attempt (EACCES over ENOENT, like `execvp`).
fn exec_program(launch: &Launch) -> (Errno, String) {
    let argv0 = &launch.argv[0];
    let name = argv0.to_string_lossy().into_owned();
    if argv0.as_bytes().contains(&b'/') {
        return (sys::execve(argv0, &launch.argv, &launch.env), name);
    }
    let mut err = Errno::ENOENT;
    for dir in &launch.path {
        let mut full = dir.as_bytes().to_vec();
        full.push(b'/');
        full.extend_from_slice(argv0.as_bytes());
        let Ok(full) = CString::new(full) else {
            continue;
        };
        // Look before leaping: one execve for the program found, not one per PATH entry (each
        // attempt would be a separate event for a tracer).
        match nix::unistd::access(full.as_c_str(), nix::unistd::AccessFlags::X_OK) {
            Ok(()) => {}
            Err(Errno::EACCES) => {
                err = Errno::EACCES;
                continue;
            }
            Err(_) => continue,
        }
        match sys::execve(&full, &launch.argv, &launch.env) {
            Errno::ENOENT | Errno::ENOTDIR => {}
            Errno::EACCES => err = Errno::EACCES,
            other => return (other, name),
        }
    }
    (err, name)
}

/// Become the command. Never returns. In a prepared jail, first wait for the command line
/// (EOF: the jail was let go unused).
pub fn exec(mut launch: Launch) -> ! {
    let ready = prepare(&mut launch).and_then(|()| {
        if !launch.deferred {
            return Ok(());
        }
        crate::warm::await_release(&launch.sync)?.apply(&mut launch)?;
        cpu_limit(&launch)
    });
    if let Err(f) = ready {
        report(&launch.status, &StatusMessage::Failed(f));
        sys::exit_now(125);
    }
    let (errno, program) = exec_program(&launch);
    let f = SetupFailure::errno(Stage::Exec, program, errno);
    report(&launch.status, &StatusMessage::Failed(f));
    sys::exit_now(if errno == Errno::ENOENT { 127 } else { 126 })
}
