//! Finding what the rewrite needs in `_start`: the functions and globals, checked against
//! the signatures they must have.

use super::*;
use crate::error::ModuleError;

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

pub(super) fn err(what: impl Into<String>) -> BackendError {
    ModuleError::PreInit(what.into()).into()
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
