//! `runner-monty-worker`: runs one monty request's Python code with Monty, in a
//! process of its own, for `runner` (`runner::backend::monty::MontyBackend`).
//!
//! Protocol (the wasmtime worker's): stdin carries one
//! `runner_sandbox::monty::MontyWorkerRequest` as JSON; the worker opens `/in`
//! (read-only) and `/out` (read-write) as mounts, binds the inputs, confines itself
//! (`runner_sandbox::confine::confine_worker`: rlimits, no core, network namespace,
//! no_new_privs), arms the allocator cap, runs the code on a thread with a fixed
//! stack, writes the captured stdout/stderr to `capture_dir`, and prints one
//! `WorkerReply` JSON line. When the allocator cap fires the process exits with
//! `monty_types::OOM_EXIT_CODE` (65) at once; the runner reads that as
//! `memory_exceeded`.

mod capture;
mod inputs;
mod net;
mod session;

use capture::Capture;
use runner_contract::outcome::OutcomeKind;
use runner_core::run::Limits;
use runner_sandbox::confine;
use runner_sandbox::monty::MontyWorkerRequest;
use runner_sandbox::worker::{self, WorkerError, WorkerReply};
use runner_sandbox::{BackendError, Outcome};
use std::io;

/// Counts every allocation of the process and ends it (exit 65) past the hard cap;
/// see `monty-alloc`. Only a binary may declare it, which is why Monty runs here.
#[global_allocator]
static ALLOC: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

/// Native stack of the interpreter thread. Monty bounds Python recursion at 1000
/// frames; its own recursive `repr`, `==` and value conversion fit in this.
const INTERPRETER_STACK: usize = 16 << 20;
/// Address space beyond what the run may allocate: the binary, libraries, thread
/// stacks and allocator slack. `RLIMIT_AS` backs up the allocator cap for memory that
/// never passes through it.
const ADDRESS_SPACE_OVERHEAD: u64 = 512 << 20;

fn main() {
    // A warm worker waits here for its request; it dies with the runner.
    worker::arm_parent_death();
    // The request-independent confinement, before the request is read.
    let early = confine::EarlyConfinement::take();
    let request = match worker::wait_request::<MontyWorkerRequest>(io::stdin().lock()) {
        Ok(None) => std::process::exit(0),
        Ok(Some(request)) => Ok(request),
        Err(error) => Err(error),
    };
    let reply = match request.and_then(|request| serve(request, early)) {
        Ok(outcome) => WorkerReply::Ok {
            outcome,
            cpu_before_request_ms: None,
            marks: Vec::new(),
        },
        Err(error) => WorkerReply::Error {
            message: error.to_string(),
            module_rejected: false,
        },
    };
    std::process::exit(worker::finish(reply));
}

/// `RLIMIT_AS` for a run: the memory limit with Monty's headroom, the reserved
/// capture buffers, the interpreter stack, and fixed overhead.
fn address_space_limit(limits: &Limits) -> u64 {
    let cap = u64::try_from(session::hard_memory_cap(limits)).unwrap_or(u64::MAX);
    cap.saturating_add(limits.stdout_bytes)
        .saturating_add(limits.stderr_bytes)
        .saturating_add(INTERPRETER_STACK as u64)
        .saturating_add(ADDRESS_SPACE_OVERHEAD)
}

fn serve(
    request: MontyWorkerRequest,
    early: confine::EarlyConfinement,
) -> Result<Outcome, BackendError> {
    let spec = request.spec;
    let limits = spec.limits.clone();
    let mut fs = confine::FsAccess::for_spec(&spec, []);
    let determinism = spec.determinism.clone();
    let program = spec.program;
    // The network door (`/out/.net`, made by the runner, served by its broker): the
    // worker writes the code's requests there, so under its own uid it must own it too.
    let exchange = spec.out_dir.join(runner_sandbox::runtime::NET_IN_OUT);
    let net = if program.network {
        let door = net::Door::open(&exchange).map_err(|source| WorkerError::Open {
            path: exchange.clone(),
            source,
        })?;
        fs.write.push(exchange);
        Some(door)
    } else {
        None
    };
    // Everything that needs ambient authority happens before confinement: the mounts
    // open their directories here and work relative to them afterwards.
    let mounts = session::mount_table(&spec.in_dir, &spec.out_dir, &limits)?;
    let bound = inputs::bind(program.inputs_json.as_deref());
    let capture = Capture::new(
        limits.stdout_bytes,
        limits.stderr_bytes,
        Some(worker::cpu_check_limit(limits.cpu)),
    );

    let address_space = address_space_limit(&limits);
    let confinement = confine::confine_worker(early, &limits, Some(address_space), &fs);
    for skipped in &confinement.skipped {
        eprintln!("runner-monty-worker: confinement layer not applied: {skipped}");
    }
    confinement
        .check(&spec.confinement)
        .map_err(BackendError::Confinement)?;
    runner_sandbox::phases::mark("worker.confined");

    let mut outcome = match bound {
        Ok(bound) => {
            let run_limits = limits.clone();
            let interpreter = std::thread::Builder::new()
                .name("monty".into())
                .stack_size(INTERPRETER_STACK)
                .spawn(move || {
                    session::run_determined(
                        program.code,
                        bound,
                        mounts,
                        &run_limits,
                        capture,
                        session::Arm::AllocatorCap,
                        session::Host { determinism, net },
                    )
                })
                .map_err(|source| WorkerError::StartThread {
                    what: "the interpreter",
                    source,
                })?;
            match interpreter.join() {
                Ok(outcome) => outcome,
                Err(panic) => trapped(format!("the interpreter panicked: {}", panic_text(&panic))),
            }
        }
        Err(why) => trapped(format!("inputs could not be bound: {why}")),
    };
    runner_sandbox::phases::mark("worker.guest_ran");
    // The guest is done: lift the cap so writing the reply cannot trip it.
    let _ = monty_alloc::set_hard_limit(None);
    // The mount's write limit stops writes at the /out cap before the kernel's file
    // size limit can; should one get past it, the kernel's refusal is the record.
    if confine::take_fsize_refusal() {
        worker::note_fsize_refusal(&mut outcome, &limits);
    }

    // The captures may be larger than the guest's /out allowance, and SIGXCPU must not
    // cut the bookkeeping short.
    confine::relax_after_guest(&confinement);
    worker::write_capture(&spec.capture_dir.join("stdout"), &outcome.stdout)?;
    worker::write_capture(&spec.capture_dir.join("stderr"), &outcome.stderr)?;
    outcome.stdout = Vec::new();
    outcome.stderr = Vec::new();
    outcome.confinement = confinement.provenance();
    outcome.confinement.extend([
        format!("monty_alloc_cap={}", session::hard_memory_cap(&limits)),
        format!("monty_memory={}", limits.memory_bytes),
        format!("monty_time={}ms", limits.wall.as_millis()),
        format!(
            "cpu_check={}ms",
            worker::cpu_check_limit(limits.cpu).as_millis()
        ),
        "monty_recursion=1000".to_owned(),
        "mount(/in,ro)".to_owned(),
        format!("mount(/out,rw,write_limit={})", limits.out_bytes),
    ]);
    Ok(outcome)
}

fn trapped(detail: String) -> Outcome {
    let kind = OutcomeKind::Trapped;
    Outcome {
        kind,
        exit_code: kind.conventional_exit_code().unwrap_or(1),
        runtime_sec: 0.0,
        stdout: Vec::new(),
        stderr: Vec::new(),
        stdout_capped: false,
        stderr_capped: false,
        detail: Some(detail),
        engine: runner_sandbox::monty::engine_name(),
        confinement: Vec::new(),
        usage: None,
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn oom_exit_code_matches_monty() {
        assert_eq!(
            runner_sandbox::monty::MONTY_OOM_EXIT_CODE,
            monty_types::OOM_EXIT_CODE
        );
    }

    /// `runner_sandbox::monty::MONTY_VERSION` (what results record) is the monty in Cargo.lock.
    #[test]
    fn monty_version_matches_the_lock_file() {
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
            .expect("Cargo.lock");
        let entry = format!(
            "name = \"monty\"\nversion = \"{}\"\n",
            runner_sandbox::monty::MONTY_VERSION
        );
        assert!(lock.contains(&entry), "Cargo.lock has no {entry:?}");
    }

    #[test]
    fn address_space_covers_the_cap_and_the_captures() {
        let limits = Limits {
            memory_bytes: 64 << 20,
            wall: std::time::Duration::from_secs(1),
            cpu: std::time::Duration::from_secs(1),
            stdout_bytes: 16 << 20,
            stderr_bytes: 16 << 20,
            out_bytes: 1 << 20,
            out_files: 1,
        };
        let as_limit = address_space_limit(&limits);
        assert!(as_limit > (64 + 32 + 16) << 20);
        assert!(as_limit < 2 << 30);
    }
}
