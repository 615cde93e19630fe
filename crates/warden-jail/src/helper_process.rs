//! The helper's process, started with `posix_spawn`, never with `fork`.
//!
//! [`crate::Jail`]'s callers are large multi-threaded programs (`warden serve`, the detonation
//! harness). A `fork` copies their page tables and leaves every page shared copy-on-write, so
//! besides the copy itself the caller then faults on each page it writes again — on its next
//! request's path. glibc's `posix_spawn` runs the child on the caller's memory until `execve`
//! (`CLONE_VM | CLONE_VFORK`): nothing is copied.
//!
//! Guarantees: the child holds exactly descriptors 0, 1 and 2 as asked and the numbered extras,
//! placed by `dup2` file actions (the copies are not close-on-exec; the caller's own descriptors
//! all are, so nothing else crosses `execve`); its environment is empty, its signal mask empty
//! and SIGPIPE back to its default (as `std::process::Command` leaves them). A spawn that cannot
//! execute the program fails with its errno and leaves no process.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// What one of the child's standard descriptors is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdio {
    /// `/dev/null`.
    Null,
    /// A pipe whose other end the caller gets.
    Piped,
}

/// A started helper and the caller's ends of its piped standard descriptors.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub process: HelperProcess,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

/// A child process of ours, reaped at most once (after that, its pid is never signalled or
/// waited for again: it may belong to another process by then).
#[derive(Debug)]
pub(crate) struct HelperProcess {
    pid: Pid,
    reaped: bool,
}

impl HelperProcess {
    /// Its pid.
    pub fn id(&self) -> u32 {
        self.pid.as_raw().unsigned_abs()
    }

    /// The pid, for a caller that takes over reaping it (and then calls [`Self::given_away`]).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Someone else reaps it from now on.
    pub fn given_away(&mut self) {
        self.reaped = true;
    }

    /// Whether it has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        if self.reaped {
            return true;
        }
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => false,
            _ => {
                self.reaped = true;
                true
            }
        }
    }

    /// Wait until it has exited.
    pub fn wait(&mut self) {
        while !self.reaped {
            match waitpid(self.pid, None) {
                Err(Errno::EINTR) => {}
                _ => self.reaped = true,
            }
        }
    }

    /// Kill it (SIGKILL), if it is not reaped yet.
    pub fn kill(&self) {
        if !self.reaped {
            let _ = kill(self.pid, Signal::SIGKILL);
        }
    }
}

impl Drop for HelperProcess {
    /// Every owner reaps it (or gives it away) before letting go; this is for a path that did
    /// not (an error right after the spawn): killed and reaped, never left a zombie.
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            self.wait();
        }
    }
}

/// A close-on-exec copy of `fd` numbered 10 or above, out of the way of the child's 0 to 9.
fn high_copy(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let raw = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(10))?;
    // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` just returned this new descriptor, owned by nobody else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

/// Start `path` with `args` (the first is `argv[0]`), standard descriptors as `stdio` says,
/// and each `(fd, number)` of `extras` as descriptor `number` (3 to 9).
pub(crate) fn spawn(
    path: &Path,
    args: &[&str],
    stdio: [Stdio; 3],
    extras: &[(BorrowedFd<'_>, RawFd)],
) -> Result<Spawned, Errno> {
    let mut actions = PosixSpawnFileActions::init()?;
    // Sources all numbered 10 or above, targets below: no `dup2` overwrites a later one's source.
    let mut sources: Vec<OwnedFd> = Vec::new();
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    for (target, how) in stdio.into_iter().enumerate() {
        let target_fd = RawFd::try_from(target).unwrap_or(0);
        match how {
            Stdio::Null => {
                actions.add_open(target_fd, "/dev/null", OFlag::O_RDWR, Mode::empty())?
            }
            Stdio::Piped => {
                let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
                let (theirs, mine) = if target == 0 { (r, w) } else { (w, r) };
                let src = high_copy(theirs.as_fd())?;
                actions.add_dup2(src.as_raw_fd(), target_fd)?;
                sources.push(src);
                ours[target] = Some(mine);
            }
        }
    }
    for (fd, number) in extras {
        debug_assert!((3..10).contains(number));
        let src = high_copy(*fd)?;
        actions.add_dup2(src.as_raw_fd(), *number)?;
        sources.push(src);
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut pipe_default = SigSet::empty();
    pipe_default.add(Signal::SIGPIPE);
    attr.set_sigdefault(&pipe_default)?;
    let c = |b: &[u8]| CString::new(b).map_err(|_| Errno::EINVAL);
    let program = c(path.as_os_str().as_bytes())?;
    let argv = args
        .iter()
        .map(|a| c(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let env: [CString; 0] = [];
    let pid = posix_spawn(program.as_c_str(), &actions, &attr, &argv, &env)?;
    drop(sources);
    let [stdin, stdout, stderr] = ours;
    Ok(Spawned {
        process: HelperProcess { pid, reaped: false },
        stdin: stdin.map(ChildStdin::from),
        stdout: stdout.map(ChildStdout::from),
        stderr: stderr.map(ChildStderr::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// This process's descriptors that would cross an `execve` (not close-on-exec).
    fn inheritable_fds() -> Vec<i32> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&fd| {
                // SAFETY: F_GETFD on a descriptor number only reads its flags.
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                flags >= 0 && flags & libc::FD_CLOEXEC == 0
            })
            .collect()
    }

    #[test]
    fn the_child_gets_its_pipes_and_extras_and_nothing_else() {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        let extra = std::fs::File::open("/dev/null").unwrap();
        // Reads a line on stdin, says it on stdout with the descriptors it holds and $HOME,
        // and writes on the extra pipe (descriptor 4).
        let script = "read l; echo \"$l|$(ls /proc/self/fd | sort -n | tr '\\n' ' ')|${HOME:-none}\"; \
                      echo extra >&4";
        let mut s = spawn(
            Path::new("/bin/sh"),
            &["sh", "-c", script],
            [Stdio::Piped, Stdio::Piped, Stdio::Null],
            &[(extra.as_fd(), 3), (w.as_fd(), 4)],
        )
        .unwrap();
        drop(w);
        s.stdin.take().unwrap().write_all(b"hi\n").unwrap();
        let mut out = String::new();
        s.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut side = String::new();
        std::fs::File::from(r).read_to_string(&mut side).unwrap();
        s.process.wait();
        assert!(s.process.exited());
        let parts: Vec<&str> = out.trim_end().split('|').collect();
        assert_eq!(parts[0], "hi", "{out}");
        // 0 to 4, the one `ls` opened to list them, and whatever the test runner itself left
        // open across exec (a build's jobserver): none of the copies made for the spawn.
        let inherited = inheritable_fds();
        let held: Vec<&str> = parts[1]
            .split_whitespace()
            .filter(|fd| {
                fd.parse::<i32>()
                    .is_ok_and(|n| n < 6 || !inherited.contains(&n))
            })
            .collect();
        assert_eq!(held, ["0", "1", "2", "3", "4", "5"], "{out}");
        assert_eq!(parts[2], "none", "the environment was not emptied: {out}");
        assert_eq!(side, "extra\n");
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_an_error_and_no_process() {
        let e = spawn(
            Path::new("/nonexistent/helper"),
            &["helper"],
            [Stdio::Null, Stdio::Null, Stdio::Null],
            &[],
        )
        .unwrap_err();
        assert_eq!(e, Errno::ENOENT);
    }
}
