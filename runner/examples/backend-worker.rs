//! The worker half of the wasmtime backend as a standalone program, for the backend's
//! tests (`RUNNER_WORKER_EXE`): the same code `runner __worker` runs.

fn main() {
    std::process::exit(runner::backend::worker::worker_main())
}
