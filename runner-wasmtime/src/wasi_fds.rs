//! "Too many open files" as the guest's own error.
//!
//! Every file a guest opens is a file the worker process holds, so the worker's
//! `RLIMIT_NOFILE` ([`runner_sandbox::confine::WORKER_NOFILE`]) is the run's open-file
//! limit. Past it the host's `open` fails with `EMFILE`, which WASI's filesystem errors
//! have no code for: wasmtime-wasi hands the guest `EIO` ("I/O error"), and code that
//! handles running out of descriptors (closing some, `ulimit` advice) cannot tell. So
//! `path_open` is shadowed: when it answers `EIO` and the worker can open no further
//! descriptor at that moment, the guest gets `EMFILE` instead.

use std::os::fd::AsFd;
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1 as _};

const MODULE: &str = "wasi_snapshot_preview1";
/// WASI preview 1's `errno::io` and `errno::mfile`.
const ERRNO_IO: i32 = 29;
const ERRNO_MFILE: i32 = 33;

/// Shadows `path_open` in `linker` (which already holds wasmtime-wasi's) with the same
/// call, its `EIO` turned into `EMFILE` when the worker's descriptor table is full.
pub fn link_open_limit<T: Send + 'static>(
    linker: &mut Linker<T>,
    wasi: fn(&mut T) -> &mut WasiP1Ctx,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker
        .func_wrap_async(
            MODULE,
            "path_open",
            move |mut caller: Caller<'_, T>,
                  (fd, dirflags, path, path_len, oflags, base, inheriting, fdflags, opened): (
                i32,
                i32,
                i32,
                i32,
                i32,
                i64,
                i64,
                i32,
                i32,
            )| {
                Box::new(async move {
                    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
                        wasmtime::bail!("missing required memory export");
                    };
                    let fuel = wasmtime::AsContextMut::as_context_mut(&mut caller).hostcall_fuel();
                    let errno = {
                        let (mem, state) = memory.data_and_store_mut(&mut caller);
                        let ctx = wasi(state);
                        ctx.set_hostcall_fuel(fuel);
                        let mut mem = wiggle::GuestMemory::Unshared(mem);
                        p1::path_open(
                            ctx, &mut mem, fd, dirflags, path, path_len, oflags, base, inheriting,
                            fdflags, opened,
                        )
                        .await?
                    };
                    Ok(if errno == ERRNO_IO && descriptors_exhausted() {
                        ERRNO_MFILE
                    } else {
                        errno
                    })
                })
            },
        )
        .map(|_| ());
    linker.allow_shadowing(false);
    linked
}

/// Whether this process can open no further descriptor: a duplicate of stderr (closed
/// again at once) fails with `EMFILE`. Any other failure, a closed stderr among them,
/// leaves the guest's `EIO` as it was.
fn descriptors_exhausted() -> bool {
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(_probe) => false,
        Err(e) => e.raw_os_error() == Some(nix::libc::EMFILE),
    }
}
