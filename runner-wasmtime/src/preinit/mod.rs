//! Pre-initialising the cpython-3.12 guest: CPython's start-up done once, at `guest
//! fetch`, and its memory kept as the module's data (Wizer's snapshot), so a run starts
//! where `python` would be after `Py_InitializeFromConfig`.
//!
//! The pinned guest (VMware Wasm Labs' `python.wasm`) has one entry, `_start`, that never
//! returns, and no names for its functions: its DWARF is present but every address in it
//! is zero (the build's post-link optimisation dropped them), and LTO inlined `main`,
//! `Py_BytesMain`, `pymain_init`, `Py_InitializeFromConfig`, `Py_RunMain` and most of
//! `pymain_run_python` into `_start` (10.6 kB of code). So the module is rewritten,
//! appending only (no existing index moves):
//! - `runner_init_start`: a copy of `_start`'s body with a `return` where `Py_RunMain`
//!   begins (the first shadow-stack push after the `Py_ExitStatusException` call that ends
//!   start-up's error path), so it runs the C start-up, the argv and preopen set-up of
//!   wasi-libc and CPython's whole initialisation (including `site`) for argv `python`,
//!   then returns;
//! - `wizer-initialize`: saves the shadow-stack pointer, calls `runner_init_start`,
//!   restores it, then runs `INIT_SOURCE` with `PyRun_SimpleStringFlags`, which defines
//!   the module `_runner_boot` (`preinit/boot.py`) in `sys.modules`;
//! - a new `_start` (the export now names it): reads the run's argv with the module's own
//!   `args_sizes_get`/`args_get`, hex-encodes it into `__import__('sys').modules.pop(
//!   '_runner_boot').main('HEX')` and runs that with `PyRun_SimpleStringFlags`. `main`
//!   emulates `python -c CMD ARGS` and `python FILE ARGS` and ends with `SystemExit`,
//!   so CPython's own `PyErr_Print` → `Py_Exit` finalises and sets the exit code.
//!
//! The functions used are located structurally in `_start` and checked against the
//! signatures they must have ([`locate`]); anything unexpected is refused, naming what.
//! Which argv the boot reproduces exactly is decided on the host, before a run, by
//! [`boot_handles`].

use crate::engine::{EpochTicker, GuestSetup, GuestState};
use runner_sandbox::BackendError;
use runner_sandbox::GuestProgram;
use runner_sandbox::SandboxSpec;
use std::collections::HashMap;
use std::time::Instant;
use wasm_encoder::reencode::Reencode;
use wasm_encoder::{
    CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction, MemArg, ValType,
};
use wasmparser::{Operator, Parser, Payload, TypeRef};
use wasmtime::{Engine, Linker, Module, Store};

/// The rewrite's version: part of the stored snapshot's key (with the boot module's
/// source), so a runner whose rewrite changed builds a new snapshot. Bump it with any
/// change to [`locate`], [`rewrite`] or [`build`].
pub const FORMAT: u32 = 1;

/// The boot module's source (`_runner_boot`).
pub const BOOT_SOURCE: &str = include_str!("boot.py");

/// `argv[0]` of the snapshot's start-up.
pub const SNAPSHOT_ARGV0: &str = "python";

/// The `argv[0]` a run may have for [`boot_handles`]. CPython's start-up reads `argv[0]` as
/// its program name, which in this guest changes nothing the snapshot keeps: with no
/// `PATH`, `sys.executable` and `sys._base_executable` are empty and the prefixes and
/// `sys.path` the same for all three (checked on the plain module); what shows `argv[0]`
/// (`sys.orig_argv`, "can't open file" messages) the boot takes from the run's argv.
pub const BOOT_ARGV0: &[&str] = &[SNAPSHOT_ARGV0, "python3", "python3.12"];

/// Name of the init function Wizer calls.
const INIT_EXPORT: &str = "wizer-initialize";

mod locate;
mod rewrite;
mod snapshot;

use locate::err;
pub use locate::{Located, locate};
pub use rewrite::{init_source, rewrite};
pub use snapshot::build;

/// Whether the boot reproduces `python ARGV` exactly: `python [-u] -c CMD [ARGS]`, or
/// `python [-u] FILE [ARGS]` where FILE is a staged input (`in_file` maps a guest path to
/// the host file, `None` when it is not under `/in`) that is neither compiled code nor
/// a zip archive (CPython runs those differently), with `argv[0]` one of [`BOOT_ARGV0`].
/// Anything else (options, `-m`, stdin, another `argv[0]`) runs the plain module.
pub fn boot_handles(argv: &[String], in_file: impl Fn(&str) -> Option<std::path::PathBuf>) -> bool {
    let Some((argv0, rest)) = argv.split_first() else {
        return false;
    };
    if !BOOT_ARGV0.contains(&argv0.as_str()) {
        return false;
    }
    // `-u` is what the guest's PYTHONUNBUFFERED=1 already does (GUEST_ENV).
    let rest = &rest[rest.iter().take_while(|a| *a == "-u").count()..];
    match rest.first().map(String::as_str) {
        Some("-c") => rest.len() >= 2,
        Some(file) if !file.starts_with('-') && !file.is_empty() => {
            if file.ends_with(".pyc") || file.ends_with(".pyz") || file.ends_with(".zip") {
                return false;
            }
            let Some(host) = in_file(file) else {
                return false;
            };
            plain_source_file(&host)
        }
        _ => false,
    }
}

/// A regular file that does not start with a .pyc magic number's tag and holds no zip
/// end-of-central-directory record.
fn plain_source_file(path: &std::path::Path) -> bool {
    let Ok((dir, name)) = runner_sandbox::host::open_parent(path) else {
        return false;
    };
    let Ok(meta) = dir.symlink_metadata(&name) else {
        return false;
    };
    if !meta.file_type().is_file() {
        return false;
    }
    let Ok(bytes) = dir.read(&name) else {
        return false;
    };
    // CPython's maybe_pyc_file compares the first two bytes with the magic number's.
    let magic_tag = (3531u16).to_le_bytes(); // 3.12's MAGIC_NUMBER is 3531 (0x0DCB), "\r\n" after
    if bytes.starts_with(&magic_tag) {
        return false;
    }
    !bytes.windows(4).any(|w| w == b"PK\x05\x06")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests;
