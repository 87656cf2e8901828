//! What wakes the host: new entries in the inbox (inotify) and termination signals
//! (a `signalfd`), waited on together with `poll`, with a timeout for retries.
//!
//! SIGTERM and SIGINT are blocked in every thread (the mask is set before any thread
//! starts and threads inherit it) and read from the `signalfd`, so no handler runs at an
//! arbitrary moment. Child processes (the sandbox workers) start with an empty mask: the
//! standard library resets it when it spawns them.

use cap_std::fs::{Dir, MetadataExt};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use runner_gate::inbox::HeldDir;
use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

/// What one wait gave.
#[derive(Debug, Default)]
pub struct Wake {
    /// Names that appeared in the inbox (renamed in, written and closed, or created as
    /// something that is not a regular file).
    pub names: Vec<OsString>,
    /// The kernel dropped events: scan the whole inbox.
    pub rescan: bool,
    /// Termination signals received (SIGTERM, SIGINT), in order.
    pub signals: Vec<Signal>,
}

/// SIGTERM and SIGINT, the signals that stop the host.
fn stop_signals() -> SigSet {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGINT);
    mask
}

/// Blocks SIGTERM and SIGINT in the calling thread and the threads it starts after this
/// (call it before starting any thread: a thread that does not block them would take
/// the signal and die by it). The host reads them from a `signalfd`.
pub fn block_signals() -> io::Result<()> {
    stop_signals().thread_block().map_err(io::Error::from)
}

/// Unblocks SIGTERM and SIGINT in the calling thread: once the host has stopped serving,
/// a further one ends the process by its default action (a host waiting for its
/// warm-up to end before it exits).
pub fn unblock_signals() -> io::Result<()> {
    stop_signals().thread_unblock().map_err(io::Error::from)
}

pub struct Watcher {
    inbox: Dir,
    inotify: Inotify,
    signals: SignalFd,
}

impl Watcher {
    /// Blocks SIGTERM and SIGINT in the calling thread (call it before starting any
    /// thread) and watches `inbox` (inotify names it by its canonical path; what a
    /// wake-up names is looked at through the held directory).
    pub fn new(inbox: &HeldDir) -> io::Result<Self> {
        block_signals()?;
        let signals = SignalFd::with_flags(
            &stop_signals(),
            SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(io::Error::from)?;
        // IN_CREATE reports a symlink or FIFO made in place (they are never "closed after
        // writing"); a regular file created in place is taken at IN_CLOSE_WRITE, when
        // its writer is done, so a half-written one is not read.
        inotify
            .add_watch(
                &inbox.path,
                AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_CREATE,
            )
            .map_err(io::Error::from)?;
        Ok(Self {
            inbox: inbox.dir.try_clone()?,
            inotify,
            signals,
        })
    }

    /// Waits until something happens or `timeout` passes (`None`: no timeout).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<Wake> {
        let timeout = match timeout {
            None => PollTimeout::NONE,
            Some(t) => PollTimeout::try_from(t.as_millis().clamp(1, 60_000) as i32)
                .unwrap_or(PollTimeout::MAX),
        };
        let mut fds = [
            PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(Wake::default()),
            Err(e) => return Err(e.into()),
        }
        let mut wake = Wake::default();
        while let Some(info) = self.signals.read_signal().map_err(io::Error::from)? {
            if let Ok(signal) = Signal::try_from(info.ssi_signo as i32) {
                wake.signals.push(signal);
            }
        }
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    wake.rescan = true;
                }
                let Some(name) = event.name else { continue };
                let in_place_file = event.mask.contains(AddWatchFlags::IN_CREATE)
                    && !event.mask.contains(AddWatchFlags::IN_ISDIR);
                // Only a non-regular entry (or a hard link, which is never written
                // and closed) is taken at creation; a regular file waits for its
                // IN_CLOSE_WRITE.
                if in_place_file
                    && self
                        .inbox
                        .symlink_metadata(&name)
                        .is_ok_and(|m| m.is_file() && m.nlink() == 1)
                {
                    continue;
                }
                wake.names.push(name);
            }
        }
        Ok(wake)
    }
}
