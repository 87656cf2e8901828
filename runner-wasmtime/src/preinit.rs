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

use super::{BackendError, EpochTicker, GuestProgram, GuestSetup, GuestState, SandboxSpec};
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
pub const BOOT_SOURCE: &str = include_str!("preinit/boot.py");

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

/// What the rewrite needs from the module, found in `_start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Function index of `_start` and its type index (`[] -> []`).
    pub start: u32,
    pub start_type: u32,
    /// The operator index in `_start` where `Py_RunMain` begins.
    pub cut: usize,
    /// `PyRun_SimpleStringFlags(const char *, PyCompilerFlags *) -> int`.
    pub run_string: u32,
    /// wasi-libc's `malloc(size_t) -> void *`.
    pub malloc: u32,
    /// Imports of `wasi_snapshot_preview1`.
    pub args_sizes_get: u32,
    pub args_get: u32,
    pub proc_exit: u32,
    pub clock_time_get: u32,
    /// Number of globals before the rewrite (the appended one is this index).
    pub globals: u32,
    /// Number of functions (imports included) before the rewrite, and of imported ones.
    pub functions: u32,
    pub imports: u32,
}

fn err(what: impl Into<String>) -> BackendError {
    BackendError::Module(format!("cannot pre-initialise the guest: {}", what.into()))
}

struct Info<'a> {
    imports: HashMap<String, u32>,
    func_types: Vec<u32>,
    types: Vec<(Vec<wasmparser::ValType>, Vec<wasmparser::ValType>)>,
    bodies: Vec<wasmparser::FunctionBody<'a>>,
    n_imports: u32,
    exports: HashMap<String, u32>,
    data: Vec<(u32, &'a [u8])>,
    globals: u32,
}

fn parse(wasm: &[u8]) -> Result<Info<'_>, BackendError> {
    let mut info = Info {
        imports: HashMap::new(),
        func_types: Vec::new(),
        types: Vec::new(),
        bodies: Vec::new(),
        n_imports: 0,
        exports: HashMap::new(),
        data: Vec::new(),
        globals: 0,
    };
    let e = |e: wasmparser::BinaryReaderError| err(format!("unreadable module: {e}"));
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(e)? {
            Payload::TypeSection(r) => {
                for t in r.into_iter_err_on_gc_types() {
                    let t = t.map_err(e)?;
                    info.types.push((t.params().to_vec(), t.results().to_vec()));
                }
            }
            Payload::ImportSection(r) => {
                for import in r.into_imports() {
                    let import = import.map_err(e)?;
                    if let TypeRef::Func(t) = import.ty {
                        if import.module == "wasi_snapshot_preview1" {
                            info.imports.insert(import.name.to_owned(), info.n_imports);
                        }
                        info.func_types.push(t);
                        info.n_imports += 1;
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for t in r {
                    info.func_types.push(t.map_err(e)?);
                }
            }
            Payload::ExportSection(r) => {
                for export in r {
                    let export = export.map_err(e)?;
                    if export.kind == wasmparser::ExternalKind::Func {
                        info.exports.insert(export.name.to_owned(), export.index);
                    }
                }
            }
            Payload::CodeSectionEntry(body) => info.bodies.push(body),
            Payload::GlobalSection(r) => info.globals = r.count(),
            Payload::DataSection(r) => {
                for d in r {
                    let d = d.map_err(e)?;
                    if let wasmparser::DataKind::Active { offset_expr, .. } = d.kind
                        && let Ok(Operator::I32Const { value }) =
                            offset_expr.get_operators_reader().read()
                    {
                        info.data.push((value as u32, d.data));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

impl Info<'_> {
    /// The NUL-terminated string at `addr` in the data segments.
    fn c_str(&self, addr: u32) -> Option<&[u8]> {
        self.data.iter().find_map(|(base, bytes)| {
            let at = usize::try_from(addr.checked_sub(*base)?).ok()?;
            let rest = bytes.get(at..)?;
            rest.iter().position(|&b| b == 0).map(|end| &rest[..end])
        })
    }

    fn sig(&self, func: u32) -> Option<&(Vec<wasmparser::ValType>, Vec<wasmparser::ValType>)> {
        let t = *self.func_types.get(usize::try_from(func).ok()?)?;
        self.types.get(usize::try_from(t).ok()?)
    }

    fn has_sig(
        &self,
        func: u32,
        params: &[wasmparser::ValType],
        results: &[wasmparser::ValType],
    ) -> bool {
        self.sig(func)
            .is_some_and(|(p, r)| p.as_slice() == params && r.as_slice() == results)
    }

    fn body(&self, func: u32) -> Option<&wasmparser::FunctionBody<'_>> {
        self.bodies
            .get(usize::try_from(func.checked_sub(self.n_imports)?).ok()?)
    }

    fn references_string(&self, func: u32, s: &[u8]) -> bool {
        let Some(body) = self.body(func) else {
            return false;
        };
        let Ok(mut ops) = body.get_operators_reader() else {
            return false;
        };
        while !ops.eof() {
            match ops.read() {
                Ok(Operator::I32Const { value }) if self.c_str(value as u32) == Some(s) => {
                    return true;
                }
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

/// Finds what [`rewrite`] needs, checking each signature; an error names what is missing.
pub fn locate(wasm: &[u8]) -> Result<Located, BackendError> {
    use wasmparser::ValType::I32;
    let info = parse(wasm)?;
    let import = |name: &str, params: &[wasmparser::ValType], results: &[wasmparser::ValType]| {
        let f = *info
            .imports
            .get(name)
            .ok_or_else(|| err(format!("no import wasi_snapshot_preview1::{name}")))?;
        if !info.has_sig(f, params, results) {
            return Err(err(format!("import {name} has an unexpected type")));
        }
        Ok(f)
    };
    let args_sizes_get = import("args_sizes_get", &[I32, I32], &[I32])?;
    let args_get = import("args_get", &[I32, I32], &[I32])?;
    let proc_exit = import("proc_exit", &[I32], &[])?;
    let clock_time_get = import(
        "clock_time_get",
        &[I32, wasmparser::ValType::I64, I32],
        &[I32],
    )?;
    let start = *info
        .exports
        .get("_start")
        .ok_or_else(|| err("no `_start` export"))?;
    if !info.has_sig(start, &[], &[]) {
        return Err(err("`_start` is not [] -> []"));
    }
    let start_type = info.func_types[start as usize];
    let body = info
        .body(start)
        .ok_or_else(|| err("`_start` is an import"))?;
    let mut ops = body
        .get_operators_reader()
        .map_err(|e| err(format!("`_start`: {e}")))?;
    let mut all = Vec::new();
    while !ops.eof() {
        all.push(ops.read().map_err(|e| err(format!("`_start`: {e}")))?);
    }
    let string_at = |i: usize, s: &[u8]| matches!(all[i], Operator::I32Const { value } if info.c_str(value as u32) == Some(s));
    // malloc: the first call after `args_sizes_get`, `[i32] -> [i32]`.
    let after_sizes = all
        .iter()
        .position(|op| matches!(op, Operator::Call { function_index } if *function_index == args_sizes_get))
        .ok_or_else(|| err("`_start` does not call args_sizes_get"))?;
    let malloc = all[after_sizes + 1..]
        .iter()
        .find_map(|op| match op {
            Operator::Call { function_index } => Some(*function_index),
            _ => None,
        })
        .filter(|f| info.has_sig(*f, &[I32], &[I32]))
        .ok_or_else(|| err("no malloc call after args_sizes_get in `_start`"))?;
    // PyRun_SimpleStringFlags: the first `[i32 i32] -> [i32]` call after the
    // "cpython.run_command" audit event, whose body names "__main__".
    let command = (0..all.len())
        .find(|&i| string_at(i, b"cpython.run_command"))
        .ok_or_else(|| err("`_start` does not name \"cpython.run_command\""))?;
    let run_string = all[command..]
        .iter()
        .filter_map(|op| match op {
            Operator::Call { function_index } => Some(*function_index),
            _ => None,
        })
        .find(|f| info.has_sig(*f, &[I32, I32], &[I32]))
        .filter(|f| info.references_string(*f, b"__main__"))
        .ok_or_else(|| err("PyRun_SimpleStringFlags not found after \"cpython.run_command\""))?;
    // Where Py_RunMain begins: after "fail to reconfigure Python" (pyinit_main's last
    // error), the `call; unreachable; end` of Py_ExitStatusException, then the first
    // `global.get 0` (the shadow-stack push of Py_RunMain's frame).
    let reconfigure = (0..all.len())
        .find(|&i| string_at(i, b"fail to reconfigure Python"))
        .ok_or_else(|| err("`_start` does not name \"fail to reconfigure Python\""))?;
    let exit_status = (reconfigure..all.len().saturating_sub(2))
        .find(|&i| {
            matches!(all[i], Operator::Call { .. })
                && matches!(all[i + 1], Operator::Unreachable)
                && matches!(all[i + 2], Operator::End)
        })
        .ok_or_else(|| err("no Py_ExitStatusException call after start-up"))?;
    let cut = exit_status + 3;
    if !matches!(all.get(cut), Some(Operator::GlobalGet { global_index: 0 })) {
        return Err(err("Py_RunMain's frame does not start where expected"));
    }
    if !(cut..command).any(|i| string_at(i, b"path_importer_cache")) {
        return Err(err("the cut is not before pymain_run_python"));
    }
    Ok(Located {
        start,
        start_type,
        cut,
        run_string,
        malloc,
        args_sizes_get,
        args_get,
        proc_exit,
        clock_time_get,
        globals: info.globals,
        functions: u32::try_from(info.func_types.len()).map_err(|_| err("too many functions"))?,
        imports: info.n_imports,
    })
}

/// The source run at snapshot time: defines `_runner_boot` from [`BOOT_SOURCE`] without
/// leaving a name in `__main__`.
pub fn init_source() -> String {
    let hex: String = BOOT_SOURCE.bytes().map(|b| format!("{b:02x}")).collect();
    format!(
        "__import__('sys').modules['_runner_boot'] = (lambda m: (exec(compile(bytes.fromhex('{hex}').decode(), '<runner-boot>', 'exec'), m.__dict__), m)[1])(type(__import__('sys'))('_runner_boot'))\n"
    )
}

const RUN_PREFIX: &[u8] = b"__import__('sys').modules.pop('_runner_boot').main('";
const RUN_SUFFIX: &[u8] = b"')\n\0";

fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

/// Stores `bytes` at `local + at`, eight bytes at a time.
fn store_bytes(f: &mut Function, local: u32, at: u64, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let offset = at + 8 * i as u64;
        if chunk.len() == 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            f.instruction(&Instruction::LocalGet(local));
            f.instruction(&Instruction::I64Const(i64::from_le_bytes(word)));
            f.instruction(&Instruction::I64Store(mem(offset, 0)));
        } else {
            for (j, b) in chunk.iter().enumerate() {
                f.instruction(&Instruction::LocalGet(local));
                f.instruction(&Instruction::I32Const(i32::from(*b)));
                f.instruction(&Instruction::I32Store8(mem(offset + j as u64, 0)));
            }
        }
    }
}

/// `if (value on the stack != 0) proc_exit(code)`.
fn exit_if_nonzero(f: &mut Function, loc: &Located, code: i32) {
    f.instruction(&Instruction::If(wasm_encoder::BlockType::Empty));
    f.instruction(&Instruction::I32Const(code));
    f.instruction(&Instruction::Call(loc.proc_exit));
    f.instruction(&Instruction::Unreachable);
    f.instruction(&Instruction::End);
}

/// The new `_start`: argv, hex-encoded, into a call of `_runner_boot.main`.
fn new_start(loc: &Located) -> Function {
    // locals: 0 sp, 1 argc, 2 size, 3 argv, 4 buf, 5 out, 6 i, 7 byte
    let (sp, size, argv, buf, out, i, byte) = (0, 2, 3, 4, 5, 6, 7);
    let mut f = Function::new([(8, ValType::I32)]);
    use Instruction as I;
    f.instruction(&I::GlobalGet(0));
    f.instruction(&I::I32Const(16));
    f.instruction(&I::I32Sub);
    f.instruction(&I::LocalTee(sp));
    f.instruction(&I::GlobalSet(0));
    // args_sizes_get(sp, sp + 4)
    f.instruction(&I::LocalGet(sp));
    f.instruction(&I::LocalGet(sp));
    f.instruction(&I::I32Const(4));
    f.instruction(&I::I32Add);
    f.instruction(&I::Call(loc.args_sizes_get));
    exit_if_nonzero(&mut f, loc, 71);
    f.instruction(&I::LocalGet(sp));
    f.instruction(&I::I32Load(mem(0, 2)));
    f.instruction(&I::LocalSet(1));
    f.instruction(&I::LocalGet(sp));
    f.instruction(&I::I32Load(mem(4, 2)));
    f.instruction(&I::LocalSet(size));
    // argv = malloc(4 * argc + 4); buf = malloc(size + 1)
    f.instruction(&I::LocalGet(1));
    f.instruction(&I::I32Const(4));
    f.instruction(&I::I32Mul);
    f.instruction(&I::I32Const(4));
    f.instruction(&I::I32Add);
    f.instruction(&I::Call(loc.malloc));
    f.instruction(&I::LocalSet(argv));
    f.instruction(&I::LocalGet(size));
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Add);
    f.instruction(&I::Call(loc.malloc));
    f.instruction(&I::LocalSet(buf));
    // out = malloc(prefix + 2 * size + suffix)
    f.instruction(&I::LocalGet(size));
    f.instruction(&I::I32Const(2));
    f.instruction(&I::I32Mul);
    f.instruction(&I::I32Const((RUN_PREFIX.len() + RUN_SUFFIX.len()) as i32));
    f.instruction(&I::I32Add);
    f.instruction(&I::Call(loc.malloc));
    f.instruction(&I::LocalSet(out));
    // Any of the three NULL: exit 71 (EX_OSERR).
    for l in [argv, buf, out] {
        f.instruction(&I::LocalGet(l));
        f.instruction(&I::I32Eqz);
        exit_if_nonzero(&mut f, loc, 71);
    }
    f.instruction(&I::LocalGet(argv));
    f.instruction(&I::LocalGet(buf));
    f.instruction(&I::Call(loc.args_get));
    exit_if_nonzero(&mut f, loc, 71);
    // The plain guest's start-up read the clock N times (the snapshot's init counted
    // them in the appended global): read it as often, so a virtual clock, which steps
    // per read, shows the script the readings it would see in the plain guest.
    f.instruction(&I::Block(wasm_encoder::BlockType::Empty));
    f.instruction(&I::Loop(wasm_encoder::BlockType::Empty));
    f.instruction(&I::GlobalGet(loc.globals));
    f.instruction(&I::I32Eqz);
    f.instruction(&I::BrIf(1));
    f.instruction(&I::GlobalGet(loc.globals));
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Sub);
    f.instruction(&I::GlobalSet(loc.globals));
    f.instruction(&I::I32Const(CLOCK_MONOTONIC));
    f.instruction(&I::I64Const(1));
    f.instruction(&I::LocalGet(sp));
    f.instruction(&I::Call(loc.clock_time_get));
    f.instruction(&I::Drop);
    f.instruction(&I::Br(0));
    f.instruction(&I::End);
    f.instruction(&I::End);
    store_bytes(&mut f, out, 0, RUN_PREFIX);
    // for i in 0..size: out[P + 2i] = hex(buf[i] >> 4); out[P + 2i + 1] = hex(buf[i] & 15)
    let hex_digit = |f: &mut Function| {
        // x + 48 + 39 * (x > 9)
        f.instruction(&I::LocalTee(byte));
        f.instruction(&I::I32Const(48));
        f.instruction(&I::I32Add);
        f.instruction(&I::LocalGet(byte));
        f.instruction(&I::I32Const(9));
        f.instruction(&I::I32GtU);
        f.instruction(&I::I32Const(39));
        f.instruction(&I::I32Mul);
        f.instruction(&I::I32Add);
    };
    f.instruction(&I::I32Const(0));
    f.instruction(&I::LocalSet(i));
    f.instruction(&I::Block(wasm_encoder::BlockType::Empty));
    f.instruction(&I::Loop(wasm_encoder::BlockType::Empty));
    f.instruction(&I::LocalGet(i));
    f.instruction(&I::LocalGet(size));
    f.instruction(&I::I32GeU);
    f.instruction(&I::BrIf(1));
    // address out + 2i
    let out_at = |f: &mut Function| {
        f.instruction(&I::LocalGet(out));
        f.instruction(&I::LocalGet(i));
        f.instruction(&I::I32Const(1));
        f.instruction(&I::I32Shl);
        f.instruction(&I::I32Add);
    };
    let buf_byte = |f: &mut Function| {
        f.instruction(&I::LocalGet(buf));
        f.instruction(&I::LocalGet(i));
        f.instruction(&I::I32Add);
        f.instruction(&I::I32Load8U(mem(0, 0)));
    };
    out_at(&mut f);
    buf_byte(&mut f);
    f.instruction(&I::I32Const(4));
    f.instruction(&I::I32ShrU);
    hex_digit(&mut f);
    f.instruction(&I::I32Store8(mem(RUN_PREFIX.len() as u64, 0)));
    out_at(&mut f);
    buf_byte(&mut f);
    f.instruction(&I::I32Const(15));
    f.instruction(&I::I32And);
    hex_digit(&mut f);
    f.instruction(&I::I32Store8(mem(RUN_PREFIX.len() as u64 + 1, 0)));
    f.instruction(&I::LocalGet(i));
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Add);
    f.instruction(&I::LocalSet(i));
    f.instruction(&I::Br(0));
    f.instruction(&I::End);
    f.instruction(&I::End);
    // the suffix at out + P + 2 * size
    f.instruction(&I::LocalGet(out));
    f.instruction(&I::LocalGet(size));
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Shl);
    f.instruction(&I::I32Add);
    f.instruction(&I::LocalSet(out));
    store_bytes(&mut f, out, RUN_PREFIX.len() as u64, RUN_SUFFIX);
    f.instruction(&I::LocalGet(5));
    f.instruction(&I::LocalGet(size));
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Shl);
    f.instruction(&I::I32Sub);
    f.instruction(&I::I32Const(0));
    f.instruction(&I::Call(loc.run_string));
    f.instruction(&I::Drop);
    // `main` always ends in SystemExit (Py_Exit); reaching here is the boot's own failure.
    f.instruction(&I::I32Const(70));
    f.instruction(&I::Call(loc.proc_exit));
    f.instruction(&I::Unreachable);
    f.instruction(&I::End);
    f
}

/// WASI's monotonic clock id.
const CLOCK_MONOTONIC: i32 = 1;

/// The init: C start-up and CPython's initialisation (the cut copy of `_start`), then
/// the boot module defined, then the number of clock reads so far (the snapshot is
/// taken under a virtual clock of `step_ns` per read, from 0) kept in the appended
/// global.
fn init_function(loc: &Located, clone: u32, source: &[u8], step_ns: u64) -> Function {
    use Instruction as I;
    let (sp0, buf) = (0, 1);
    let mut f = Function::new([(2, ValType::I32)]);
    f.instruction(&I::GlobalGet(0));
    f.instruction(&I::LocalSet(sp0));
    f.instruction(&I::Call(clone));
    f.instruction(&I::LocalGet(sp0));
    f.instruction(&I::GlobalSet(0));
    let mut bytes = source.to_vec();
    bytes.push(0);
    f.instruction(&I::I32Const(bytes.len() as i32));
    f.instruction(&I::Call(loc.malloc));
    f.instruction(&I::LocalTee(buf));
    f.instruction(&I::I32Eqz);
    f.instruction(&I::If(wasm_encoder::BlockType::Empty));
    f.instruction(&I::Unreachable);
    f.instruction(&I::End);
    store_bytes(&mut f, buf, 0, &bytes);
    f.instruction(&I::LocalGet(buf));
    f.instruction(&I::I32Const(0));
    f.instruction(&I::Call(loc.run_string));
    // The boot source failed (its traceback is on stderr): trap, so no snapshot is made.
    f.instruction(&I::If(wasm_encoder::BlockType::Empty));
    f.instruction(&I::Unreachable);
    f.instruction(&I::End);
    // reads = monotonic() / step (this read is the plain guest's first after start-up)
    f.instruction(&I::I32Const(CLOCK_MONOTONIC));
    f.instruction(&I::I64Const(1));
    f.instruction(&I::LocalGet(buf));
    f.instruction(&I::Call(loc.clock_time_get));
    f.instruction(&I::If(wasm_encoder::BlockType::Empty));
    f.instruction(&I::Unreachable);
    f.instruction(&I::End);
    f.instruction(&I::LocalGet(buf));
    f.instruction(&I::I64Load(mem(0, 0)));
    f.instruction(&I::I64Const(step_ns as i64));
    f.instruction(&I::I64DivU);
    f.instruction(&I::I32WrapI64);
    f.instruction(&I::GlobalSet(loc.globals));
    f.instruction(&I::End);
    f
}

struct Rewriter<'a> {
    wasm: &'a [u8],
    loc: &'a Located,
    extra: Vec<Function>,
    index: u32,
}

impl Reencode for Rewriter<'_> {
    type Error = BackendError;

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_function_section(self, functions, section)?;
        for _ in &self.extra {
            functions.function(self.loc.start_type);
        }
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut wasm_encoder::GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        wasm_encoder::reencode::utils::parse_global_section(self, globals, section)?;
        globals.global(
            wasm_encoder::GlobalType {
                val_type: ValType::I32,
                mutable: true,
                shared: false,
            },
            &wasm_encoder::ConstExpr::i32_const(0),
        );
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        let mut clone = None;
        for body in section {
            let body = body?;
            let bytes = &self.wasm[body.range()];
            code.raw(bytes);
            if self.index + self.loc.imports == self.loc.start {
                clone = Some(cut_copy(self, &body)?);
            }
            self.index += 1;
        }
        let clone = clone
            .ok_or_else(|| wasm_encoder::reencode::Error::UserError(err("`_start` has no body")))?;
        code.function(&clone);
        for f in &self.extra[1..] {
            code.function(f);
        }
        Ok(())
    }

    fn parse_export(
        &mut self,
        exports: &mut ExportSection,
        export: wasmparser::Export<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        if export.name == "_start" {
            exports.export("_start", ExportKind::Func, self.loc.functions + 2);
            exports.export(INIT_EXPORT, ExportKind::Func, self.loc.functions + 1);
            return Ok(());
        }
        wasm_encoder::reencode::utils::parse_export(self, exports, export)
    }

    fn parse_custom_section(
        &mut self,
        module: &mut wasm_encoder::Module,
        section: wasmparser::CustomSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        // The DWARF (12 MB, without addresses) is of no use to a run.
        if section.name().starts_with(".debug") {
            return Ok(());
        }
        wasm_encoder::reencode::utils::parse_custom_section(self, module, section)
    }
}

/// `_start`'s body with `return` inserted at the cut.
fn cut_copy(
    r: &mut Rewriter<'_>,
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Function, wasm_encoder::reencode::Error<BackendError>> {
    let mut f = r.new_function_with_parsed_locals(body)?;
    let mut reader = body.get_operators_reader()?;
    let mut n = 0usize;
    while !reader.eof() {
        if n == r.loc.cut {
            f.instruction(&Instruction::Return);
        }
        let op = reader.read()?;
        f.instruction(&r.instruction(op)?);
        n += 1;
    }
    Ok(f)
}

/// The module with the three functions appended and `_start` re-pointed.
pub fn rewrite(wasm: &[u8], loc: &Located, step_ns: u64) -> Result<Vec<u8>, BackendError> {
    let source = init_source();
    let placeholder = Function::new([]);
    let clone_index = loc.functions;
    let mut rewriter = Rewriter {
        wasm,
        loc,
        extra: vec![
            placeholder,
            init_function(loc, clone_index, source.as_bytes(), step_ns),
            new_start(loc),
        ],
        index: 0,
    };
    let mut module = wasm_encoder::Module::new();
    rewriter
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .map_err(|e| match e {
            wasm_encoder::reencode::Error::UserError(e) => e,
            other => err(format!("rewrite: {other}")),
        })?;
    let out = module.finish();
    if let Some(path) = runner_sandbox::env::non_empty("RUNNER_PREINIT_DUMP") {
        let _ = runner_sandbox::host::open_parent(std::path::Path::new(&path))
            .and_then(|(dir, name)| dir.write(name, &out));
    }
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out)
        .map_err(|e| err(format!("the rewritten module is invalid: {e}")))?;
    Ok(out)
}

/// Wasmtime state Wizer reads the snapshot from.
struct Snap<'a> {
    store: &'a mut Store<GuestState>,
    instance: wasmtime::Instance,
}

impl wasmtime_wizer::InstanceState for Snap<'_> {
    async fn global_get(
        &mut self,
        name: &str,
        _: wasmtime_wizer::ValType,
    ) -> wasmtime_wizer::SnapshotVal {
        use wasmtime::Val;
        use wasmtime_wizer::SnapshotVal;
        let value = self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store));
        match value {
            Some(Val::I32(x)) => SnapshotVal::I32(x),
            Some(Val::I64(x)) => SnapshotVal::I64(x),
            Some(Val::F32(x)) => SnapshotVal::F32(x),
            Some(Val::F64(x)) => SnapshotVal::F64(x),
            Some(Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            // Wizer's instrumentation exported every global it asks for, with a value
            // type (it refuses modules with reference-typed mutable globals).
            _ => unreachable!("wizer asked for global {name}, which is not a value global"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => unreachable!("wizer asked for memory {name}, which it exported"),
        }
    }
}

/// The pre-initialised module: `wasm` rewritten ([`locate`], [`rewrite`]), instantiated
/// with the WASI set-up a run of `guest` has (its environment, its preopens in their
/// order, here on the empty directories of `spec`, argv `python`), its init called, and
/// its memory and globals written back as the module's initial state (Wizer).
///
/// # Ambient Authority
///
/// Opens `spec.in_dir` and `spec.out_dir` (empty directories) for the guest.
pub fn build(
    engine: &Engine,
    wasm: &[u8],
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    step_ns: u64,
) -> Result<Vec<u8>, BackendError> {
    let loc = locate(wasm)?;
    if loc.globals == 0 {
        return Err(err("the module has no globals (no shadow-stack pointer)"));
    }
    let rewritten = rewrite(wasm, &loc, step_ns)?;
    let wizer = {
        let mut w = wasmtime_wizer::Wizer::new();
        w.init_func(INIT_EXPORT);
        w
    };
    let (cx, instrumented) = wizer
        .instrument(&rewritten)
        .map_err(|e| err(format!("wizer: {e:#}")))?;
    let module = Module::new(engine, &instrumented)
        .map_err(|e| err(format!("cannot compile the instrumented module: {e:#}")))?;
    let mut guest = guest.clone();
    guest.argv = vec![SNAPSHOT_ARGV0.to_owned()];
    let mut spec = spec.clone();
    spec.determinism = runner_sandbox::determinism::Determinism {
        clock: Some(runner_sandbox::determinism::VirtualClock {
            start_unix_us: 0,
            step_ns,
            sleeps_advance: true,
        }),
        seed: Some("0".repeat(64)),
    };
    let spec = &spec;
    let setup = GuestSetup::open(&guest, spec)?;
    let GuestSetup {
        wasi,
        clock: _,
        stdout,
        stderr,
        scratch,
    } = setup;
    let mut linker: Linker<GuestState> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)
        .map_err(|e| err(format!("cannot link WASI: {e:#}")))?;
    let state = GuestState::new(wasi, &spec.limits, Instant::now(), None);
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| match ctx.data().watch.check() {
        Some(stop) => Err(wasmtime::Error::new(stop)),
        None => Ok(wasmtime::UpdateDeadline::Yield(1)),
    });
    let ticker = EpochTicker::start(engine)
        .map_err(|e| err(format!("cannot start the epoch ticker: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| err(format!("cannot start async runtime: {e}")))?;
    let result = runtime.block_on(async {
        let instance = linker.instantiate_async(&mut store, &module).await?;
        let tables_before = table_sizes(&mut store, &instance);
        let init = instance.get_typed_func::<(), ()>(&mut store, INIT_EXPORT)?;
        init.call_async(&mut store, ()).await?;
        if table_sizes(&mut store, &instance) != tables_before {
            wasmtime::bail!("the init changed a table's size; a snapshot would lose it");
        }
        wizer
            .snapshot(
                &cx,
                &mut Snap {
                    store: &mut store,
                    instance,
                },
            )
            .await
    });
    drop(ticker);
    if let Some(scratch) = scratch {
        scratch.remove();
    }
    let text = |p: &wasmtime_wasi::p2::pipe::MemoryOutputPipe| {
        String::from_utf8_lossy(&p.contents()).into_owned()
    };
    let snapshot = result.map_err(|e| {
        err(format!(
            "the init failed: {e:#}; stdout: {:?}; stderr: {:?}",
            text(&stdout),
            text(&stderr)
        ))
    })?;
    if !stdout.contents().is_empty() || !stderr.contents().is_empty() {
        return Err(err(format!(
            "the init wrote output: stdout {:?}, stderr {:?}",
            text(&stdout),
            text(&stderr)
        )));
    }
    Ok(snapshot)
}

fn table_sizes(store: &mut Store<GuestState>, instance: &wasmtime::Instance) -> Vec<u64> {
    let tables: Vec<wasmtime::Table> = instance
        .exports(&mut *store)
        .filter_map(|e| e.into_table())
        .collect();
    tables.iter().map(|t| t.size(&*store)).collect()
}

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
mod tests {
    use super::super::testkit::{Sandbox, limits, shared, test_cache_dir, text};
    use super::super::{RunOptions, ensure_compiled, load_module, run_guest};
    use super::*;
    use std::sync::OnceLock;

    /// The pre-initialised module, built once per test process from the test guest.
    fn snapshot_module() -> &'static Module {
        static MODULE: OnceLock<Module> = OnceLock::new();
        MODULE.get_or_init(|| {
            let shared = shared();
            let wasm = std::fs::read(super::super::testkit::guest_path()).unwrap();
            let sandbox = Sandbox::new(&["python"], limits());
            let started = Instant::now();
            let snapshot = build(
                &shared.engine,
                &wasm,
                sandbox.guest(),
                &sandbox.spec,
                runner_sandbox::determinism::DEFAULT_STEP_NS,
            )
            .unwrap();
            eprintln!(
                "snapshot built in {:.1} s, {} bytes",
                started.elapsed().as_secs_f64(),
                snapshot.len()
            );
            let sha = crate::digest::sha256_hex(&snapshot);
            let dir = test_cache_dir().join("preinit");
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{sha}.wasm"));
            std::fs::write(&path, &snapshot).unwrap();
            let started = Instant::now();
            let cwasm =
                ensure_compiled(&shared.engine, &path, &sha, &test_cache_dir(), |_| {}).unwrap();
            eprintln!("compiled in {:.1} s", started.elapsed().as_secs_f64());
            load_module(&shared.engine, &cwasm).unwrap()
        })
    }

    fn run_both(argv: &[&str], files: &[(&str, &str)]) -> (Outcome, Outcome) {
        run_both_with(argv, files, |_| {})
    }

    fn run_both_with(
        argv: &[&str],
        files: &[(&str, &str)],
        adjust: impl Fn(&mut SandboxSpec<GuestProgram>),
    ) -> (Outcome, Outcome) {
        let run = |module: &Module| {
            let mut sandbox = Sandbox::new(argv, limits());
            adjust(&mut sandbox.spec);
            for (name, body) in files {
                std::fs::write(sandbox.host("in").join(name), body).unwrap();
            }
            run_guest(
                &shared().engine,
                module,
                sandbox.guest(),
                &sandbox.spec,
                &RunOptions::default(),
            )
            .unwrap()
        };
        (run(&shared().module), run(snapshot_module()))
    }

    use runner_sandbox::Outcome;

    fn assert_same(argv: &[&str], files: &[(&str, &str)]) {
        let (plain, pre) = run_both(argv, files);
        eprintln!(
            "{argv:?}: plain {:.3} s, pre-initialised {:.3} s",
            plain.runtime_sec, pre.runtime_sec
        );
        assert_eq!(
            (
                text(&pre.stdout),
                text(&pre.stderr),
                pre.exit_code,
                pre.kind
            ),
            (
                text(&plain.stdout),
                text(&plain.stderr),
                plain.exit_code,
                plain.kind
            ),
            "{argv:?}: pre-initialised (left) against plain (right)"
        );
    }

    const STATE: &str = "import sys, __main__\nprint(sys.argv, sys.orig_argv, sys.path, sys.executable, sys.prefix, sys.flags)\nprint(sorted(sys.modules))\nprint(sorted(vars(__main__)), __name__, __main__.__dict__.get('__file__'), __main__.__dict__.get('__cached__'), type(__main__.__loader__).__name__, __main__.__spec__)\nprint(sys.meta_path, [getattr(h, '__qualname__', h) for h in sys.path_hooks], sorted(sys.path_importer_cache))\nimport os; print(sorted(os.environ.items()), os.getcwd())\n";

    #[test]
    fn the_host_hands_the_boot_only_what_it_reproduces() {
        let dir = tempfile::tempdir().unwrap();
        let files: &[(&str, &[u8])] = &[
            ("s.py", b"print(1)\n"),
            ("c.pyc", b"print(1)\n"),
            ("magic.py", b"\xcb\x0d\r\nxxxx"),
            ("zipped.py", b"print(1)\nPK\x05\x06rest"),
        ];
        for (name, body) in files {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        let in_file = |p: &str| Some(dir.path().join(p));
        let handles = |argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
            boot_handles(&argv, in_file)
        };
        assert!(handles(&["python", "-c", "pass"]));
        assert!(handles(&["python", "-u", "-c", "pass", "-I"]));
        assert!(handles(&["python", "s.py", "-m", "x"]));
        assert!(handles(&["python3", "-c", "pass"]));
        assert!(handles(&["python3.12", "s.py"]));
        for argv in [
            &["python3.11", "-c", "pass"][..],
            &["/usr/bin/python3", "-c", "pass"],
            &["python", "-c"],
            &["python"],
            &["python", "-m", "json.tool"],
            &["python", "-I", "-c", "pass"],
            &["python", "-", "s.py"],
            &["python", "c.pyc"],
            &["python", "magic.py"],
            &["python", "zipped.py"],
            &["python", "missing.py"],
            &["python", "pkg"],
        ] {
            assert!(!handles(argv), "{argv:?}");
        }
        assert!(!boot_handles(&["python".into(), "s.py".into()], |_| None));
    }

    #[test]
    fn virtual_clock_and_seeded_entropy_are_the_same() {
        use runner_sandbox::determinism::{Determinism, VirtualClock};
        let code = "import time, random, os\nprint(time.time(), time.monotonic_ns(), time.perf_counter_ns(), time.process_time_ns(), time.localtime())\nprint(random.random(), os.urandom(8).hex())\nimport tempfile, uuid; print(uuid.uuid4(), tempfile.mkstemp())\n";
        let (plain, pre) = run_both_with(&["python", "-c", code], &[], |spec| {
            spec.determinism = Determinism {
                clock: Some(VirtualClock {
                    start_unix_us: 1_700_000_000_000_000,
                    step_ns: runner_sandbox::determinism::DEFAULT_STEP_NS,
                    sleeps_advance: true,
                }),
                seed: Some("ab".repeat(32)),
            };
        });
        assert_eq!(
            (text(&pre.stdout), text(&pre.stderr)),
            (text(&plain.stdout), text(&plain.stderr))
        );
    }

    #[test]
    fn hello_is_the_same() {
        assert_same(&["python", "-c", "print('hello')"], &[]);
    }

    #[test]
    fn state_seen_by_c_is_the_same() {
        assert_same(&["python", "-c", STATE, "a", "b c"], &[]);
    }

    #[test]
    fn state_seen_by_a_script_is_the_same() {
        assert_same(&["python", "s.py", "x"], &[("s.py", STATE)]);
        assert_same(&["python", "/in/s.py"], &[("s.py", STATE)]);
        assert_same(&["python", "-u", "s.py", "-u"], &[("s.py", STATE)]);
        assert_same(&["python", "-u", "-c", STATE, "-u"], &[]);
    }

    #[test]
    fn exits_and_errors_are_the_same() {
        assert_same(&["python", "-c", "import sys; sys.exit(3)"], &[]);
        assert_same(&["python", "-c", "import sys; sys.exit('bye')"], &[]);
        assert_same(&["python", "-c", "def f():\n  1/0\nf()"], &[]);
        assert_same(&["python", "-c", "x = ("], &[]);
        assert_same(
            &["python", "s.py"],
            &[("s.py", "def f():\n  raise KeyError('k')\n\nf()\n")],
        );
        assert_same(&["python", "s.py"], &[("s.py", "print(1)\nx = (\n")]);
        assert_same(&["python", "missing.py"], &[]);
    }
}
