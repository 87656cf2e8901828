//! The guest's two stacks, and a run that outgrew one of them told apart from any other
//! trap ("stack exhausted").
//!
//! A CPython-for-WASI guest keeps its C stack in its own linear memory (clang's shadow
//! stack, `__stack_pointer`), while the compiled code's frames live on the native stack
//! wasmtime gives it. CPython guards the first with its recursion limits; the second is
//! wasmtime's `max_wasm_stack`, 512 KiB by default, less than deep C recursion in the
//! guest needs (a `json.dumps` of a 5,000-deep list trapped there before CPython's own
//! check could raise `RecursionError`). So the native stack is made larger than any C
//! stack a pinned guest has room for, and what still overflows is classified:
//!
//! - wasmtime's own limit: the trap `call stack exhausted`;
//! - the C stack: the guests are linked stack-first (the stack grows down towards address
//!   0, the data above it), so an overflow moves `__stack_pointer` below 0, where it wraps
//!   to an address past the end of linear memory, and the next store traps `out of bounds
//!   memory access`. The trap's core dump holds the globals at the trap; wasm-ld always
//!   defines `__stack_pointer` as the module's first global, a mutable i32.

use wasmtime::{AsContextMut, Config, Mutability, Trap, Val, ValType, WasmCoreDump};

/// How deep compiled guest code may go on the native stack. The C stacks of the pinned
/// guests (512 KiB in cpython-3.12, 16 MiB in the 3.15 ones, of which CPython uses at
/// most 128 KiB before raising `RecursionError`) fill long before this does.
pub const MAX_WASM_STACK: usize = 8 << 20;

/// The stack of the fiber a guest runs on: the wasm stack and room for the host calls
/// (WASI) made from its deepest frame.
pub const ASYNC_STACK: usize = MAX_WASM_STACK + (2 << 20);

/// Sets the stack sizes and has a trap carry its core dump (globals and memories as
/// handles into the store; nothing is copied unless the dump is serialised). None of
/// these settings changes compiled code, so precompiled modules stay valid.
pub fn configure(config: &mut Config) {
    config
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(ASYNC_STACK)
        .coredump_on_trap(true);
}

/// The detail of a run that ended with `error`, when that error is the guest running out
/// of stack; `None` for anything else.
pub fn exhausted(error: &wasmtime::Error, mut store: impl AsContextMut) -> Option<String> {
    match error.downcast_ref::<Trap>()? {
        Trap::StackOverflow => Some(format!(
            "stack exhausted: the guest's calls went deeper than the {} MiB of native stack \
             wasmtime allows (wasm trap: call stack exhausted)",
            MAX_WASM_STACK >> 20
        )),
        Trap::MemoryOutOfBounds => {
            let dump = error.downcast_ref::<WasmCoreDump>()?;
            let memory_size = dump.memories().first()?.data_size(&store);
            let sp = stack_pointer(dump, &mut store)?;
            let sp = u64::from(sp.cast_unsigned());
            (sp >= memory_size as u64).then(|| {
                format!(
                    "stack exhausted: the guest's C stack overflowed (its stack pointer wrapped \
                     to {sp:#x}, past the {memory_size}-byte linear memory; wasm trap: out of \
                     bounds memory access)"
                )
            })
        }
        _ => None,
    }
}

/// `__stack_pointer` at the trap: the first mutable i32 global the core dump lists (a
/// host-made global would come first, and the runner links none).
fn stack_pointer(dump: &WasmCoreDump, mut store: impl AsContextMut) -> Option<i32> {
    let global = dump.globals().first()?;
    let ty = global.ty(&store);
    if ty.mutability() != Mutability::Var || !matches!(ty.content(), ValType::I32) {
        return None;
    }
    match global.get(&mut store) {
        Val::I32(sp) => Some(sp),
        _ => None,
    }
}
