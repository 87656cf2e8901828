//! `runner-era-worker`: the worker half of the wasmtime backend, one confined process
//! per ERA run. `runner` starts it (next to its own binary, or `$RUNNER_WORKER_EXE`),
//! sends the run on stdin and reads one reply line on stdout; see
//! [`runner_wasmtime::worker`].

fn main() {
    std::process::exit(runner_wasmtime::worker::worker_main())
}
