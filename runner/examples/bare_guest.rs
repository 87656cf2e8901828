//! The bare in-process guest run that `just bench` measures `runner exec` against: load
//! the precompiled CPython guest with the runner's engine settings, give it argv and a
//! stdout pipe and nothing else, run `_start`, print what it printed. No validation,
//! no staging, no worker process, no result document, no cache verification.
//!
//! Usage: `bare_guest PRECOMPILED.cwasm ARG...` (argv[0] is `python`).

use wasmtime::{Linker, Module, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let cwasm = args
        .next()
        .ok_or("usage: bare_guest PRECOMPILED.cwasm ARG...")?;
    let argv: Vec<String> = std::iter::once("python".to_owned()).chain(args).collect();
    let engine = runner_wasmtime::engine::new_engine()?;
    // SAFETY: the file is the runner's own precompiled module for this engine,
    // produced by `runner guest fetch` in the user's 0700 cache directory.
    #[allow(unsafe_code)]
    let module = unsafe { Module::deserialize_file(&engine, &cwasm)? };
    let stdout = MemoryOutputPipe::new(1 << 20);
    let wasi = WasiCtxBuilder::new()
        .args(&argv)
        .stdout(stdout.clone())
        .build_p1();
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    p1::add_to_linker_async(&mut linker, |t| t)?;
    let mut store = Store::new(&engine, wasi);
    store.set_epoch_deadline(u64::MAX / 2);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = rt.block_on(async {
        let instance = linker.instantiate_async(&mut store, &module).await?;
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
        match start.call_async(&mut store, ()).await {
            Ok(()) => Ok::<i32, wasmtime::Error>(0),
            Err(e) => match e.downcast_ref::<wasmtime_wasi::I32Exit>() {
                Some(exit) => Ok(exit.0),
                None => Err(e),
            },
        }
    })?;
    print!("{}", String::from_utf8_lossy(&stdout.contents()));
    std::process::exit(code);
}
