//! The rewrite: the init function and the new `_start` that runs the boot module, written
//! with wasm-encoder.

use super::*;

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
// reason: one function's instruction listing, read top to bottom like the assembly it
// is; its pieces share the local slots, so split it would be harder to check.
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
