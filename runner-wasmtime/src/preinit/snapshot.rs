//! Running the init under wasmtime and taking Wizer's snapshot of it.

use super::*;

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
    spec.determinism = runner_core::determinism::Determinism {
        clock: Some(runner_core::determinism::VirtualClock {
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
