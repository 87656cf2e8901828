//! One thread talks to a running worker: the request written to its stdin, its reply
//! and its own stderr read (each bounded), its exit seen through a pidfd, the kill
//! deadline and the `/out` poll kept, all in one `poll(2)` loop. No helper threads are
//! started per request and nothing waits on a timer while the worker runs, except on a
//! kernel without `pidfd_open` (before 5.3), where the exit is looked for every few ms.

use super::{Kill, WAIT_POLL_INTERVAL};
use crate::confine;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use runner_core::run::Limits;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// When to kill the worker while it runs.
pub(super) struct Watch<'a> {
    /// The wall-clock limit, the start-up allowance and the grace, spent.
    pub kill_at: Instant,
    /// `/out` and its caps, walked every [`super::OUT_POLL_INTERVAL`] when no tmpfs
    /// enforces them.
    pub out_poll: Option<(&'a Path, &'a Limits)>,
}

/// What passed between the runner and the worker, once the worker has exited (it is
/// a zombie then: not yet reaped).
pub(super) struct Exchanged {
    /// The whole request reached the worker's stdin.
    pub delivered: bool,
    pub reply: Vec<u8>,
    /// The worker said more than [`super::MAX_REPLY_BYTES`].
    pub reply_overflow: bool,
    pub stderr: Vec<u8>,
    pub killed: Option<Kill>,
}

/// A pipe end read up to a bound; what is past the bound is read and dropped, so the
/// worker never blocks on a full pipe.
struct Drain<R> {
    pipe: Option<R>,
    kept: Vec<u8>,
    max: usize,
    overflow: bool,
}

impl<R: Read + AsFd> Drain<R> {
    fn new(pipe: Option<R>, max: usize) -> Self {
        let pipe = pipe.filter(|p| set_nonblocking(p).is_ok());
        Self {
            pipe,
            kept: Vec::new(),
            max,
            overflow: false,
        }
    }

    /// Read what the pipe holds now; closes it at end of file or on an error.
    fn read_available(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        let mut buf = [0u8; 8192];
        // Bounded: a worker that writes as fast as it is read is read again after the
        // next poll, which also looks at its exit and the deadline.
        for _ in 0..64 {
            match pipe.read(&mut buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    let room = self.max.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&buf[..n.min(room)]);
                    self.overflow |= n > room;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }
}

/// The request, written as the pipe takes it.
struct Feed<'p> {
    pipe: Option<std::process::ChildStdin>,
    payload: &'p [u8],
    written: usize,
    delivered: bool,
}

impl Feed<'_> {
    fn write_available(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        while self.written < self.payload.len() {
            match pipe.write(&self.payload[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // A worker that died early closed the pipe; its exit status says why.
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
        // All of it: closing stdin tells the worker the request is complete.
        self.delivered = true;
        self.pipe = None;
    }
}

/// Write `payload` to the worker, read its reply and stderr, and return once it has
/// exited (killed at the deadline, or when `/out` goes over its caps).
pub(super) fn exchange(
    child: &mut Child,
    pid: Pid,
    payload: &[u8],
    watch: &Watch<'_>,
    max_reply: usize,
    max_stderr: usize,
) -> Result<Exchanged, Errno> {
    let mut feed = Feed {
        pipe: child.stdin.take().filter(|p| set_nonblocking(p).is_ok()),
        payload,
        written: 0,
        delivered: false,
    };
    let mut reply = Drain::new(child.stdout.take(), max_reply);
    let mut stderr = Drain::new(child.stderr.take(), max_stderr);
    let exit = pidfd_open(pid);
    let mut killed = None;
    let mut next_out_poll = Instant::now() + super::OUT_POLL_INTERVAL;
    feed.write_available();
    loop {
        if exited(pid)? {
            break;
        }
        let now = Instant::now();
        if killed.is_none() {
            if now >= watch.kill_at {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                killed = Some(Kill::Deadline);
            } else if let Some((out_dir, limits)) = watch.out_poll
                && now >= next_out_poll
            {
                next_out_poll = now + super::OUT_POLL_INTERVAL;
                if let Ok(usage) = confine::tree_usage(out_dir, limits)
                    && usage.over(limits)
                {
                    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                    killed = Some(Kill::OutOverCaps(usage));
                }
            }
        }
        // Sleep until something happens, or the next thing to look at is due.
        let mut wake = None::<Instant>;
        if killed.is_none() {
            wake = Some(watch.kill_at);
            if watch.out_poll.is_some() {
                wake = wake.map(|w| w.min(next_out_poll));
            }
        }
        if exit.is_none() {
            let tick = now + WAIT_POLL_INTERVAL;
            wake = Some(wake.map_or(tick, |w| w.min(tick)));
        }
        let timeout = match wake {
            None => PollTimeout::NONE,
            Some(at) => timeout_until(at, now),
        };
        let mut fds = Vec::with_capacity(4);
        if let Some(pidfd) = &exit {
            fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
        }
        if let Some(pipe) = &feed.pipe {
            fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLOUT));
        }
        if let Some(pipe) = &reply.pipe {
            fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
        }
        if let Some(pipe) = &stderr.pipe {
            fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
        drop(fds);
        // Each side is tried whether or not poll named it: the calls do not block.
        feed.write_available();
        reply.read_available();
        stderr.read_available();
    }
    // The worker is gone: what it wrote is in the pipes (a child of its own holding
    // them open cannot keep the runner here: the ends do not block).
    reply.read_available();
    stderr.read_available();
    Ok(Exchanged {
        delivered: feed.delivered,
        reply: reply.kept,
        reply_overflow: reply.overflow,
        stderr: stderr.kept,
        killed,
    })
}

/// The worker has exited (it stays a zombie until reaped).
fn exited(pid: Pid) -> Result<bool, Errno> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Milliseconds from `now` to `at`, rounded up (a wake-up a little late, never early
/// and spinning).
fn timeout_until(at: Instant, now: Instant) -> PollTimeout {
    let left = at.saturating_duration_since(now) + Duration::from_micros(999);
    let ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

fn set_nonblocking(fd: &impl AsFd) -> Result<(), Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(drop)
}

/// A descriptor that becomes readable when `pid` exits; `None` on kernels before 5.3.
#[allow(unsafe_code)]
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1;
    // the pid is this process's own unreaped child, so it cannot name another process.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}
