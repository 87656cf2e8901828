//! Where a run's time goes: named marks on the system-wide monotonic clock.
//!
//! A mark is "this step ended now". The runner marks its steps on the thread that runs
//! the request ([`mark`]); a worker marks its own and sends them back in its reply, and
//! [`absorb`] files them beside the runner's. Both sides read `CLOCK_MONOTONIC`, which
//! is one clock for every process of the machine, so the marks of the two processes
//! sort into one timeline. A host reports the steps as durations between consecutive
//! marks ([`between`]); the benchmarks page prints their medians.
//!
//! Recording is per thread (a thread runs one request at a time) and costs a clock read
//! and a push per mark; [`take`] ends a recording, and a thread that never calls
//! [`start`] keeps nothing.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;

/// At most this many marks are kept per recording: a worker's reply is bounded, and a
/// loop that marks cannot grow one without limit.
pub const MAX_MARKS: usize = 64;

/// One step's end: what ended, and when (ns of `CLOCK_MONOTONIC`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub what: String,
    pub at_ns: u64,
}

thread_local! {
    static MARKS: RefCell<Option<Vec<Mark>>> = const { RefCell::new(None) };
}

/// Now, in ns of `CLOCK_MONOTONIC` (0 if the clock cannot be read).
pub fn now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(t.tv_nsec()).unwrap_or(0)
    })
}

/// Start recording on this thread, with `what` as the first mark (a recording already
/// under way is dropped).
pub fn start(what: &str) {
    MARKS.with(|m| {
        *m.borrow_mut() = Some(vec![Mark {
            what: what.to_owned(),
            at_ns: now_ns(),
        }]);
    });
}

/// Mark the end of step `what`, if this thread is recording (a thread that is not,
/// such as `runner exec`'s, reads no clock and allocates nothing).
pub fn mark(what: &str) {
    MARKS.with(|m| {
        if let Some(kept) = m.borrow_mut().as_mut()
            && kept.len() < MAX_MARKS
        {
            kept.push(Mark {
                what: what.to_owned(),
                at_ns: now_ns(),
            });
        }
    });
}

/// File marks taken elsewhere (a worker's) into this thread's recording, if any.
pub fn absorb(marks: impl IntoIterator<Item = Mark>) {
    MARKS.with(|m| {
        if let Some(kept) = m.borrow_mut().as_mut() {
            let room = MAX_MARKS.saturating_sub(kept.len());
            kept.extend(marks.into_iter().take(room));
        }
    });
}

/// End this thread's recording and return its marks (empty if it was not recording).
pub fn take() -> Vec<Mark> {
    MARKS.with(|m| m.borrow_mut().take().unwrap_or_default())
}

/// The steps between consecutive marks, in time order: each named by the mark that
/// ends it, with its duration in ms.
pub fn between(marks: &[Mark]) -> Vec<(String, f64)> {
    let mut sorted: Vec<&Mark> = marks.iter().collect();
    sorted.sort_by_key(|m| m.at_ns);
    sorted
        .windows(2)
        .map(|w| {
            let ns = w[1].at_ns.saturating_sub(w[0].at_ns);
            (w[1].what.clone(), ns as f64 / 1e6)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_did_not_start_keeps_nothing() {
        mark("ignored");
        assert!(take().is_empty());
    }

    #[test]
    fn marks_of_two_sources_sort_into_one_timeline() {
        start("begin");
        let worker = vec![Mark {
            what: "worker.ran".into(),
            at_ns: now_ns() + 2_000_000,
        }];
        mark("runner.staged");
        absorb(worker);
        let marks = take();
        assert_eq!(marks.len(), 3);
        let phases = between(&marks);
        let names: Vec<&str> = phases.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["runner.staged", "worker.ran"]);
        assert!(phases[1].1 >= 1.0, "{phases:?}");
        assert!(take().is_empty(), "take ends the recording");
    }

    #[test]
    fn a_recording_is_bounded() {
        start("begin");
        for _ in 0..MAX_MARKS * 2 {
            mark("again");
        }
        assert_eq!(take().len(), MAX_MARKS);
    }
}
