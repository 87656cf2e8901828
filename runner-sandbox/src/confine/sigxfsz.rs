//! SIGXFSZ: a write past `RLIMIT_FSIZE` is recorded, not fatal, and reported afterwards.

use nix::sys::signal::{SigHandler, Signal};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by [`on_sigxfsz`]: the kernel refused a write or truncate of this process past
/// `RLIMIT_FSIZE`.
static FSIZE_REFUSED: AtomicBool = AtomicBool::new(false);

/// The SIGXFSZ handler: records the refusal and returns, so the call that raised it
/// fails with EFBIG instead of the worker dying. An atomic store is all it does, which
/// is async-signal-safe.
extern "C" fn on_sigxfsz(_signal: nix::libc::c_int) {
    FSIZE_REFUSED.store(true, Ordering::SeqCst);
}

#[allow(unsafe_code)]
pub(super) fn record_sigxfsz() -> nix::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigSet, sigaction};
    // The kernel sends SIGXFSZ to the thread whose call it refuses, as that call
    // returns EFBIG; SA_RESTART makes sure the handler can never turn any other call
    // into EINTR.
    let action = SigAction::new(
        SigHandler::Handler(on_sigxfsz),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic (async-signal-safe), and it is
    // installed before any guest code runs; the previous action is not needed.
    unsafe { sigaction(Signal::SIGXFSZ, &action) }.map(drop)
}

/// True when, since the last call, the kernel refused a write or truncate of this
/// process past `RLIMIT_FSIZE` (SIGXFSZ), that is, the guest tried to make a file under
/// `/out` larger than the cap allows. Reset by the call. The guest cannot clear it:
/// it is the kernel's signal, recorded in the worker, whatever the guest did about
/// the EFBIG it got. Read it as soon as the guest is done (before
/// [`relax_after_guest`](super::relax_after_guest)).
pub fn take_fsize_refusal() -> bool {
    FSIZE_REFUSED.swap(false, Ordering::SeqCst)
}
