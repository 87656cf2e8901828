//! The capability layers: the bounding set emptied, every capability set dropped, and
//! the `/proc/self/status` checks that they are (and that the process is single-threaded).

use super::{LayerError, StatusError};
use std::fs;
use std::sync::Arc;

/// Capabilities are per thread: the steps below confine the calling thread and the
/// threads it creates afterwards, so the process must have no other thread. Checked in
/// the same read of `/proc/self/status` that checks the capabilities after a step (a
/// thread alive then was alive during the step; none is started in between).
fn single_thread_in(status: &str) -> Result<(), StatusError> {
    let threads = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<usize>().ok());
    match threads {
        Some(1) => Ok(()),
        threads => Err(StatusError::Threads { threads }),
    }
}

fn read_status() -> Result<String, StatusError> {
    fs::read_to_string("/proc/self/status").map_err(|e| StatusError::Read(Arc::new(e)))
}

/// Empty the capability bounding set (so no exec could ever regain a capability),
/// then check `/proc/self/status` says so: a kernel with capabilities newer than the
/// `caps` crate knows would leave those behind, and that must not count as applied.
pub(super) fn clear_bounding_set() -> Result<(), LayerError> {
    let cleared = caps::clear(None, caps::CapSet::Bounding).map_err(LayerError::ClearBoundingSet);
    let status = read_status()?;
    single_thread_in(&status)?;
    cleared?;
    Ok(expect_no_capabilities(&status, &["CapBnd"])?)
}

/// Empty the ambient, inheritable, effective and permitted sets (in that order:
/// the effective set is what allows the others to change), then check, in one read
/// of `/proc/self/status`: (the process is single-threaded, the sets are empty).
pub(super) fn drop_capabilities() -> (Result<(), StatusError>, Result<(), LayerError>) {
    let cleared = [
        caps::CapSet::Ambient,
        caps::CapSet::Inheritable,
        caps::CapSet::Permitted,
    ]
    .into_iter()
    .try_for_each(|set| {
        caps::clear(None, set).map_err(|source| LayerError::ClearCapabilities { set, source })
    });
    let status = match read_status() {
        Ok(status) => status,
        Err(e) => return (Err(e.clone()), Err(e.into())),
    };
    let single = single_thread_in(&status);
    let dropped = single
        .clone()
        .map_err(LayerError::from)
        .and(cleared)
        .and_then(|()| {
            Ok(expect_no_capabilities(
                &status,
                &["CapInh", "CapPrm", "CapEff", "CapAmb"],
            )?)
        });
    (single, dropped)
}

/// `Ok` when each named capability mask of `status` (`/proc/self/status`) is zero.
fn expect_no_capabilities(status: &str, fields: &[&'static str]) -> Result<(), StatusError> {
    for &field in fields {
        let value = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or(StatusError::NoField(field))?;
        if u64::from_str_radix(value, 16) != Ok(0) {
            return Err(StatusError::StillSet {
                field,
                value: value.to_owned(),
            });
        }
    }
    Ok(())
}
