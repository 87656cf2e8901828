//! [`Capture`]: where `print()` goes. Two bounded buffers (stdout, and stderr for
//! `print(..., file=sys.stderr)`), plus the worker's own CPU-time check, which rides on
//! the interpreter's periodic flush poll.

use monty_types::{ExcType, MontyException, PrintWriterCallback};
use runner_sandbox::cpu::{CpuClock, cpu_time};
use std::borrow::Cow;
use std::time::Duration;

/// Largest buffer reserved up front. Reserving (not filling) keeps the capture out of
/// the guest's memory budget: the bytes are charged to the allocator before the cap is
/// armed, and printing into them allocates nothing.
const MAX_RESERVE: usize = 64 << 20;
/// Flush polls (one per 255 interpreter instructions) between two CPU-time readings.
const CPU_POLL_EVERY: u32 = 256;

/// One captured stream: at most `cap` bytes; past it the guest sees an `OSError`.
#[derive(Debug)]
pub struct Stream {
    name: &'static str,
    bytes: Vec<u8>,
    cap: usize,
    capped: bool,
}

impl Stream {
    fn new(name: &'static str, cap: u64) -> Self {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        Self {
            name,
            bytes: Vec::with_capacity(cap.min(MAX_RESERVE)),
            cap,
            capped: false,
        }
    }

    fn push(&mut self, text: &str) -> Result<(), MontyException> {
        let room = self.cap.saturating_sub(self.bytes.len());
        if text.len() <= room && !self.capped {
            self.bytes.extend_from_slice(text.as_bytes());
            return Ok(());
        }
        if !self.capped {
            self.bytes.extend_from_slice(&text.as_bytes()[..room]);
            self.capped = true;
        }
        Err(MontyException::new(
            ExcType::OSError,
            Some(format!(
                "[Errno 28] No space left on device: {} reached its cap of {} bytes",
                self.name, self.cap
            )),
        ))
    }

    /// Append text the host adds (a traceback), within the cap, without raising.
    pub fn append_host(&mut self, text: &str) {
        let room = self.cap.saturating_sub(self.bytes.len());
        let take = text.len().min(room);
        self.bytes.extend_from_slice(&text.as_bytes()[..take]);
        if take < text.len() {
            self.capped = true;
        }
    }

    #[cfg(test)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn capped(&self) -> bool {
        self.capped
    }
}

/// The print target of one run.
#[derive(Debug)]
pub struct Capture {
    pub stdout: Stream,
    pub stderr: Stream,
    /// Process CPU time at which the worker stops the guest itself, a little before
    /// `RLIMIT_CPU` would kill it (so its output is kept); `None`: no check.
    cpu_limit: Option<Duration>,
    polls: u32,
    /// The CPU check fired.
    pub cpu_fired: bool,
}

impl Capture {
    pub fn new(stdout_cap: u64, stderr_cap: u64, cpu_limit: Option<Duration>) -> Self {
        Self {
            stdout: Stream::new("stdout", stdout_cap),
            stderr: Stream::new("stderr", stderr_cap),
            cpu_limit,
            polls: 0,
            cpu_fired: false,
        }
    }

    fn cpu_exhausted(&self, limit: Duration) -> MontyException {
        MontyException::new(
            ExcType::TimeoutError,
            Some(format!("cpu limit of {:.3} s reached", limit.as_secs_f64())),
        )
    }
}

impl PrintWriterCallback for Capture {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.stdout.push(&output)
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        self.stdout.push(end.encode_utf8(&mut [0; 4]))
    }

    fn stderr_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.stderr.push(&output)
    }

    fn stderr_push(&mut self, end: char) -> Result<(), MontyException> {
        self.stderr.push(end.encode_utf8(&mut [0; 4]))
    }

    /// Called by the interpreter at its periodic checkpoint. Once the CPU budget is
    /// spent every poll raises again, so code that catches the exception cannot go
    /// on computing; `RLIMIT_CPU` ends whatever a poll never reaches (one long native
    /// operation).
    fn poll_flush(&mut self) -> Result<(), MontyException> {
        let Some(limit) = self.cpu_limit else {
            return Ok(());
        };
        if !self.cpu_fired {
            self.polls = self.polls.wrapping_add(1);
            if !self.polls.is_multiple_of(CPU_POLL_EVERY) {
                return Ok(());
            }
            if cpu_time(CpuClock::Process).is_none_or(|t| t < limit) {
                return Ok(());
            }
            self.cpu_fired = true;
        }
        Err(self.cpu_exhausted(limit))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn stream_keeps_its_cap_and_raises_past_it() {
        let mut s = Stream::new("stdout", 5);
        assert!(s.push("abc").is_ok());
        let err = s.push("defg").unwrap_err();
        assert_eq!(err.exc_type(), ExcType::OSError);
        assert!(
            err.message()
                .unwrap()
                .contains("stdout reached its cap of 5 bytes")
        );
        assert_eq!(s.bytes(), b"abcde");
        assert!(s.capped());
        assert!(s.push("x").is_err(), "still closed");
        assert_eq!(s.bytes(), b"abcde");
    }

    #[test]
    fn host_text_is_cut_at_the_cap() {
        let mut s = Stream::new("stderr", 4);
        s.append_host("Traceback");
        assert_eq!(s.bytes(), b"Trac");
        assert!(s.capped());
    }

    #[test]
    fn cpu_check_fires_once_spent_and_keeps_firing() {
        let mut c = Capture::new(10, 10, Some(Duration::ZERO));
        let results: Vec<bool> = (0..CPU_POLL_EVERY + 2)
            .map(|_| c.poll_flush().is_err())
            .collect();
        assert!(!results[0]);
        assert!(results[CPU_POLL_EVERY as usize - 1]);
        assert!(results[CPU_POLL_EVERY as usize + 1]);
        assert!(c.cpu_fired);
        let mut none = Capture::new(10, 10, None);
        assert!((0..1000).all(|_| none.poll_flush().is_ok()));
    }
}
