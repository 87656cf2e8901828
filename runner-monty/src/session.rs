//! One Monty run: the mount table, the interpreter's limits, the loop that answers its
//! suspensions, and the reading of how it ended as an [`Outcome`].

use crate::capture::Capture;
use crate::inputs::BoundInputs;
use monty::{MontyRun, RunProgress};
use monty_fs::{Mount, MountCallOutcome, MountError, MountMode, MountTable};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    OsFunctionCall, OsPolicy, PrintWriter, ResourceLimits, ResourceTracker, SleepMode,
    memory_limit_with_headroom,
};
use runner_contract::outcome::OutcomeKind;
use runner_core::determinism::Determinism;
use runner_core::run::Limits;
use runner_sandbox::Outcome;
use runner_sandbox::determinism::{STREAM_SECURE, seeded_stream};
use runner_sandbox::worker::truncate;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The script name in tracebacks.
pub const SCRIPT_NAME: &str = "main.py";
/// The working directory of the code: relative paths resolve inside the inputs, as
/// with the ERA guest.
pub const CWD: &str = "/in";
/// Host calls (file operations, sleeps, imports) answered in one run. Bounded because
/// time spent in them is not interpreter time; the wall-clock deadline bounds them too.
pub const MAX_SUSPENSIONS: usize = 1_000_000;
/// Longest detail kept for the result's Safety Notes.
const MAX_DETAIL: usize = 1000;

/// `/in` read-only and `/out` read-write, the write total capped at `out_bytes`; each
/// mount may hold at most the memory limit in file contents it reads or returns.
///
/// # Ambient Authority
///
/// Opens `in_dir` and `out_dir`; every later file operation is relative to those
/// descriptors (cap-std), which refuse `..`, absolute symlinks and anything else that
/// leaves them.
pub fn mount_table(
    in_dir: &Path,
    out_dir: &Path,
    limits: &Limits,
) -> Result<MountTable, MountTableError> {
    let mut table = MountTable::new();
    let budget = limits.memory_bytes.max(1 << 20);
    let mounts = [
        ("/in", in_dir, MountMode::ReadOnly, None),
        (
            "/out",
            out_dir,
            MountMode::ReadWrite,
            Some(limits.out_bytes),
        ),
    ];
    for (name, dir, mode, write_limit) in mounts {
        let mount = Mount::new(name, dir, mode, write_limit)
            .map_err(|source| MountTableError::Open {
                dir: dir.to_owned(),
                name,
                source: Box::new(source),
            })?
            .with_memory_usage_limit(budget);
        table
            .push_mount(mount)
            .map_err(|source| MountTableError::Add {
                name,
                source: Box::new(source),
            })?;
    }
    Ok(table)
}

/// Why [`mount_table`] could not mount `/in` or `/out` (shown as `worker: …`:
/// `runner_sandbox::worker::WorkerError::Engine`).
#[derive(Debug, thiserror::Error)]
pub enum MountTableError {
    /// The host directory could not be opened as the mount `name`.
    #[error("cannot mount {} as {name}: {source}", dir.display())]
    Open {
        dir: PathBuf,
        name: &'static str,
        #[source]
        source: Box<MountError>,
    },
    /// The table refused the mount `name`.
    #[error("cannot mount {name}: {source}")]
    Add {
        name: &'static str,
        #[source]
        source: Box<MountError>,
    },
}

impl From<MountTableError> for runner_sandbox::BackendError {
    fn from(error: MountTableError) -> Self {
        runner_sandbox::worker::WorkerError::Engine(Box::new(error)).into()
    }
}

/// The interpreter's own limits: time = the wall-clock limit (interpreter time only;
/// host calls are bounded by the deadline), memory = the memory limit (a soft
/// `MemoryError` at checkpoints; the allocator holds the hard cap), recursion 1000.
pub fn resource_limits(limits: &Limits, memory: bool) -> ResourceLimits {
    let mut r = ResourceLimits::default()
        .max_feed_duration(limits.wall)
        .max_total_sleep(limits.wall)
        .max_suspensions(MAX_SUSPENSIONS);
    if memory {
        r = r.max_memory(usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX));
    }
    r
}

/// The allocator's hard cap above the worker's baseline: the memory limit plus Monty's
/// headroom for exception machinery.
pub fn hard_memory_cap(limits: &Limits) -> usize {
    let soft = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
    memory_limit_with_headroom(Some(soft), false).unwrap_or(usize::MAX)
}

/// What the host itself stopped, or saw, while answering suspensions.
#[derive(Debug, Default)]
struct HostNotes {
    /// The wall-clock deadline passed in a host call (a sleep, file work).
    deadline: bool,
    /// A write to `/out` hit the mount's write limit (or the disk was full).
    out_full: Option<String>,
    /// A file operation needed more memory than a mount may hold (the memory limit).
    mount_memory: bool,
}

/// How the run is armed: the tests run sessions in their own process and leave the
/// allocator alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// Arm the process-wide allocator cap and Monty's memory limit.
    AllocatorCap,
    /// No memory cap (unit tests).
    #[cfg(test)]
    None,
}

/// Run `code` to its end and describe how it ended. `stdout`/`stderr` in the outcome
/// hold the capture; the caller writes them out.
#[cfg(test)]
pub fn run(
    code: String,
    inputs: BoundInputs,
    mounts: MountTable,
    limits: &Limits,
    capture: Capture,
    arm: Arm,
) -> Outcome {
    run_determined(code, inputs, mounts, limits, capture, arm, Host::default())
}

/// What the host offers a run beyond its mounts: its clocks and entropy (see
/// [`os_policy`]) and, for a run granted `network: allowlist`, the network door
/// ([`crate::net`]).
#[derive(Debug, Default)]
pub struct Host {
    pub determinism: Determinism,
    pub net: Option<crate::net::Door>,
}

/// `run` with the run's host services ([`Host`]).
pub fn run_determined(
    code: String,
    inputs: BoundInputs,
    mut mounts: MountTable,
    limits: &Limits,
    mut capture: Capture,
    arm: Arm,
    mut host: Host,
) -> Outcome {
    let started = Instant::now();
    let deadline = started + limits.wall;
    let mut notes = HostNotes::default();
    let ended = execute(
        code,
        inputs,
        &mut mounts,
        &mut capture,
        limits,
        deadline,
        arm,
        &mut notes,
        &mut host,
    );
    let runtime_sec = started.elapsed().as_secs_f64();
    classify(ended, capture, &notes, limits, runtime_sec)
}

#[allow(clippy::too_many_arguments)]
fn execute(
    code: String,
    inputs: BoundInputs,
    mounts: &mut MountTable,
    capture: &mut Capture,
    limits: &Limits,
    deadline: Instant,
    arm: Arm,
    notes: &mut HostNotes,
    host: &mut Host,
) -> Result<(), MontyException> {
    let determinism = &host.determinism;
    let policy = os_policy(limits, determinism);
    // `os.urandom` suspends to the host: with a recorded seed it reads the ChaCha20
    // stream the ERA guest's `random_get` reads.
    let mut urandom = determinism
        .seed_bytes()
        .map(|seed| seeded_stream(&seed, STREAM_SECURE));
    let mut program = MontyRun::new(code, SCRIPT_NAME, inputs.names, CompileOptions::default())?
        .with_os_policy(policy);
    program.set_cwd(CWD);
    if arm == Arm::AllocatorCap {
        // Armed last: what the worker holds now (the compiled code, the bound inputs,
        // the reserved capture buffers) is its baseline, not the guest's.
        monty_alloc::set_hard_limit(Some(hard_memory_cap(limits))).map_err(|e| {
            MontyException::new(ExcType::RuntimeError, Some(format!("monty-alloc: {e}")))
        })?;
    }
    let tracker = ResourceTracker::new(resource_limits(limits, arm == Arm::AllocatorCap));
    let mut progress = program.start(inputs.values, tracker, PrintWriter::Callback(capture))?;
    let mut suspensions = 0usize;
    loop {
        if matches!(progress, RunProgress::Complete(_)) {
            return Ok(());
        }
        suspensions += 1;
        let stop = if Instant::now() >= deadline {
            notes.deadline = true;
            Some(wall_exceeded(limits.wall))
        } else if suspensions > MAX_SUSPENSIONS {
            Some(MontyException::new(
                ExcType::RuntimeError,
                Some(format!("more than {MAX_SUSPENSIONS} host calls")),
            ))
        } else {
            None
        };
        let print = PrintWriter::Callback(&mut *capture);
        progress = match (progress, stop) {
            (RunProgress::Complete(_), _) => return Ok(()),
            (RunProgress::OsCall(call), Some(exc)) => call.abort(exc, print),
            (RunProgress::FunctionCall(call), Some(exc)) => call.abort(exc, print),
            (RunProgress::NameLookup(lookup), Some(exc)) => lookup.abort(exc, print),
            (RunProgress::ResolveFutures(futures), Some(exc)) => futures.abort(exc, print),
            (RunProgress::OsCall(call), None) => {
                let sleep = match &call.function_call {
                    OsFunctionCall::SystemSleep(d) | OsFunctionCall::AsyncSystemSleep(d) => {
                        Some(*d)
                    }
                    _ => None,
                };
                match sleep {
                    Some(delay) => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if delay >= left {
                            std::thread::sleep(left);
                            notes.deadline = true;
                            call.abort(wall_exceeded(limits.wall), print)
                        } else {
                            std::thread::sleep(delay);
                            call.resume(MontyObject::none(), print)
                        }
                    }
                    None => match (&call.function_call, urandom.as_mut()) {
                        // Capped by the memory limit: the reply is the guest's memory.
                        (OsFunctionCall::Urandom(args), Some(rng))
                            if args.size <= limits.memory_bytes =>
                        {
                            use rand_core::Rng;
                            let mut bytes = vec![0u8; usize::try_from(args.size).unwrap_or(0)];
                            rng.fill_bytes(&mut bytes);
                            call.resume(MontyObject::bytes(bytes), print)
                        }
                        _ => call.resume_with(print, |fc| answer_os_call(mounts, fc, notes)),
                    },
                }
            }
            // No host names are offered, and no function but `fetch` in a run granted
            // the network: an unknown name is a NameError, raised by Monty itself and
            // so catchable, as in CPython (`foo()` with no `foo` suspends as a call,
            // not a lookup).
            (RunProgress::NameLookup(lookup), None) => {
                lookup.resume(NameLookupResult::Undefined, print)
            }
            (RunProgress::FunctionCall(call), None) => match host.net.as_mut() {
                Some(door)
                    if call.function_name == crate::net::FETCH && call.object_id.is_none() =>
                {
                    match door.fetch(&call.args, deadline) {
                        Ok(response) => call.resume(response, print),
                        Err(crate::net::Failure::Raise(exc)) => call.resume(exc, print),
                        Err(crate::net::Failure::Deadline) => {
                            notes.deadline = true;
                            call.abort(wall_exceeded(limits.wall), print)
                        }
                    }
                }
                _ => {
                    let name = call.function_name.clone();
                    call.resume(ExtFunctionResult::NotFound(name), print)
                }
            },
            (RunProgress::ResolveFutures(futures), None) => futures.abort(
                MontyException::new(
                    ExcType::NotImplementedError,
                    Some("no host futures to resolve".into()),
                ),
                print,
            ),
        }?;
    }
}

/// Monty's session policy: sleeps come back to the host (which waits no longer than the
/// deadline); with a virtual clock, every clock reads the recorded start (Monty offers a
/// fixed instant or a host call per read, and the fixed instant is what it documents for
/// reproducible sessions); with a recorded seed, an unseeded `random` starts as
/// `random.seed(<the seed's bytes>)` leaves it.
pub fn os_policy(limits: &Limits, determinism: &Determinism) -> OsPolicy {
    use monty_types::{DateTimeSource, RandomSeed, RandomStart};
    let mut policy = OsPolicy {
        sleep: SleepMode::System(limits.wall),
        ..OsPolicy::default()
    };
    if let Some(clock) = determinism.clock {
        policy.datetime = DateTimeSource::Fixed {
            unix_seconds: i64::try_from(clock.start_unix_us / 1_000_000).unwrap_or(i64::MAX),
            microsecond: u32::try_from(clock.start_unix_us % 1_000_000).unwrap_or(0),
        };
    }
    if let Some(seed) = determinism.seed_bytes() {
        policy.random_start = RandomStart::Seed(RandomSeed::Bytes(seed.to_vec()));
    }
    policy
}

/// Answer a filesystem call from the mounts; anything else (`os.getenv`, an import of
/// a module Monty lacks) gets Monty's "not available here" error.
fn answer_os_call(
    mounts: &mut MountTable,
    call: OsFunctionCall,
    notes: &mut HostNotes,
) -> ExtFunctionResult {
    match mounts.handle_os_call(call) {
        MountCallOutcome::Handled(Ok(value)) => value.into(),
        MountCallOutcome::Handled(Err(error)) => {
            match &error {
                MountError::WriteLimitExceeded(limit) => {
                    notes.out_full = Some(format!("/out write limit of {limit} bytes reached"));
                }
                MountError::Io(e, _) if e.kind() == std::io::ErrorKind::StorageFull => {
                    notes.out_full = Some("/out is full (no space or no inodes left)".into());
                }
                MountError::MemoryUsageLimitExceeded(_) => notes.mount_memory = true,
                _ => {}
            }
            error.into_exception().into()
        }
        MountCallOutcome::NotHandled(call) => call.on_no_handler().into(),
    }
}

fn wall_exceeded(wall: Duration) -> MontyException {
    MontyException::new(
        ExcType::TimeoutError,
        Some(format!(
            "wall-clock limit of {:.3} s reached",
            wall.as_secs_f64()
        )),
    )
}

/// Read how the run ended. Resource stops are told apart from the guest's own
/// exceptions by what the host saw (its CPU check, its deadline) and by Monty's own
/// uncatchable errors, whose messages only the interpreter writes first.
fn classify(
    ended: Result<(), MontyException>,
    mut capture: Capture,
    notes: &HostNotes,
    limits: &Limits,
    runtime_sec: f64,
) -> Outcome {
    let mut details: Vec<String> = Vec::new();
    let (mut kind, mut exit_code) = match &ended {
        Ok(()) => (OutcomeKind::Completed, 0),
        Err(exc) if exc.exc_type() == ExcType::SystemExit => {
            // As CPython: no traceback; the message (Monty's SystemExit carries a
            // string at most) goes to stderr and makes the exit code 1.
            match exc.message().filter(|m| !m.is_empty()) {
                None => (OutcomeKind::Completed, 0),
                Some(message) => {
                    capture.stderr.append_host(message);
                    capture.stderr.append_host("\n");
                    (OutcomeKind::Completed, 1)
                }
            }
        }
        Err(exc) => {
            // The traceback goes to stderr, as CPython prints it.
            let text = exc.to_string();
            capture.stderr.append_host(&text);
            if !text.ends_with('\n') {
                capture.stderr.append_host("\n");
            }
            let summary = truncate(&exc.summary(), MAX_DETAIL);
            let message = exc.message().unwrap_or("");
            let limit_kind = if capture.cpu_fired {
                Some(OutcomeKind::CpuExhausted)
            } else if notes.deadline
                || (exc.exc_type() == ExcType::TimeoutError
                    && message.starts_with("feed time limit exceeded")
                    && runtime_sec >= limits.wall.as_secs_f64())
            {
                Some(OutcomeKind::TimedOut)
            } else if exc.exc_type() == ExcType::MemoryError
                && (message.starts_with("memory limit exceeded") || notes.mount_memory)
            {
                Some(OutcomeKind::MemoryExceeded)
            } else {
                None
            };
            match limit_kind {
                Some(kind) => {
                    details.push(format!("{} ({summary})", limit_name(kind, limits)));
                    (kind, kind.conventional_exit_code().unwrap_or(1))
                }
                None => {
                    details.push(format!("uncaught exception: {summary}"));
                    (OutcomeKind::Completed, 1)
                }
            }
        }
    };
    let stdout_capped = capture.stdout.capped();
    let stderr_capped = capture.stderr.capped();
    let mut output_notes = Vec::new();
    if let Some(note) = &notes.out_full {
        output_notes.push(note.clone());
    }
    match (stdout_capped, stderr_capped) {
        (true, true) => output_notes.push("stdout and stderr reached their caps".into()),
        (true, false) => output_notes.push("stdout reached its cap".into()),
        (false, true) => output_notes.push("stderr reached its cap".into()),
        (false, false) => {}
    }
    if !output_notes.is_empty() && matches!(kind, OutcomeKind::Completed | OutcomeKind::Trapped) {
        output_notes.push(format!("the code's own exit code was {exit_code}"));
        kind = OutcomeKind::OutputLimit;
        exit_code = kind.conventional_exit_code().unwrap_or(exit_code);
    }
    details.extend(output_notes);
    Outcome {
        kind,
        exit_code,
        runtime_sec,
        stdout: capture.stdout.into_bytes(),
        stderr: capture.stderr.into_bytes(),
        stdout_capped,
        stderr_capped,
        detail: (!details.is_empty()).then(|| truncate(&details.join("; "), MAX_DETAIL)),
        engine: runner_sandbox::monty::engine_name(),
        confinement: Vec::new(),
        usage: None,
    }
}

fn limit_name(kind: OutcomeKind, limits: &Limits) -> String {
    match kind {
        OutcomeKind::TimedOut => format!(
            "wall-clock limit of {:.3} s reached",
            limits.wall.as_secs_f64()
        ),
        OutcomeKind::MemoryExceeded => {
            format!("memory limit of {} bytes reached", limits.memory_bytes)
        }
        OutcomeKind::CpuExhausted => {
            format!("cpu limit of {:.3} s reached", limits.cpu.as_secs_f64())
        }
        other => other.as_str().to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::inputs;
    use std::fs;

    /// The sandbox's small test limits (these tests check the CPU budget nowhere: the
    /// capture's CPU check is off).
    fn limits() -> Limits {
        runner_sandbox::confine::PROBE_LIMITS
    }

    struct Dirs {
        root: tempfile::TempDir,
    }

    impl Dirs {
        fn new() -> Self {
            let root = tempfile::tempdir().unwrap();
            fs::create_dir(root.path().join("in")).unwrap();
            fs::create_dir(root.path().join("out")).unwrap();
            Self { root }
        }

        fn path(&self, rel: &str) -> std::path::PathBuf {
            self.root.path().join(rel)
        }

        fn run(&self, code: &str, json: Option<&str>, limits: &Limits) -> Outcome {
            let mounts = mount_table(&self.path("in"), &self.path("out"), limits).unwrap();
            let capture = Capture::new(limits.stdout_bytes, limits.stderr_bytes, None);
            run(
                code.to_owned(),
                inputs::bind(json).unwrap(),
                mounts,
                limits,
                capture,
                Arm::None,
            )
        }

        /// Runs `code` (no inputs) under [`limits`] with `caps` applied.
        fn run_with(&self, code: &str, caps: impl FnOnce(&mut Limits)) -> Outcome {
            let mut l = limits();
            caps(&mut l);
            self.run(code, None, &l)
        }
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn hello_and_inputs() {
        let d = Dirs::new();
        let o = d.run(
            "print(greeting, n + 1, big * 2, xs, cfg['k'], nothing)",
            Some(r#"{"greeting": "hi", "n": 41, "big": 99999999999999999999, "xs": [1.5, true], "cfg": {"k": null}, "nothing": null}"#),
            &limits(),
        );
        assert_eq!(o.kind, OutcomeKind::Completed, "{o:?}");
        assert_eq!(o.exit_code, 0);
        assert_eq!(
            text(&o.stdout),
            "hi 42 199999999999999999998 [1.5, True] None None\n"
        );
    }

    /// Code that ends by itself: its exit code, its stdout, and what its stderr holds
    /// (nothing at all when no text is named).
    #[test]
    fn how_code_that_ends_by_itself_exits() {
        let d = Dirs::new();
        let cases: [(&str, i32, &str, &[&str]); 7] = [
            (
                "def f():\n    raise ValueError('bad')\nf()",
                1,
                "",
                &["Traceback", "ValueError: bad"],
            ),
            ("print('bye')\nraise SystemExit", 0, "bye\n", &[]),
            ("raise SystemExit('stopping')", 1, "", &["stopping\n"]),
            ("x = (", 1, "", &["SyntaxError"]),
            // A faked limit message is just an exception.
            (
                "raise TimeoutError('feed time limit exceeded: 1s > 0s')",
                1,
                "",
                &["TimeoutError"],
            ),
            // An undefined call is a catchable NameError.
            (
                "try:\n    foo(1)\nexcept NameError as e:\n    print('caught', e)",
                0,
                "caught name 'foo' is not defined\n",
                &[],
            ),
            (
                "print('before')\nfoo()\nprint('after')",
                1,
                "before\n",
                &["Traceback", "NameError: name 'foo' is not defined"],
            ),
        ];
        for (code, exit_code, stdout, stderr) in cases {
            let o = d.run(code, None, &limits());
            let ended = (o.kind, o.exit_code);
            assert_eq!(ended, (OutcomeKind::Completed, exit_code), "{code}: {o:?}");
            assert_eq!(text(&o.stdout), stdout, "{code}");
            let err = text(&o.stderr);
            assert_eq!(err.is_empty(), stderr.is_empty(), "{code}: {err}");
            assert!(stderr.iter().all(|s| err.contains(s)), "{code}: {err}");
        }
    }

    #[test]
    fn in_is_read_only_out_is_writable_and_nothing_escapes() {
        let d = Dirs::new();
        fs::write(d.path("in/data.txt"), "abc").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path("in/link")).unwrap();
        std::os::unix::fs::symlink("../../", d.path("in/up")).unwrap();
        let code = r#"
def attempt(label, fn):
    try:
        fn()
        print(label, 'ALLOWED')
    except Exception as e:
        print(label, 'denied', type(e).__name__)

print(open('/in/data.txt').read(), open('data.txt').read())
with open('/out/r.txt', 'w') as f:
    f.write('ok')
attempt('etc', lambda: open('/etc/passwd').read())
attempt('dotdot', lambda: open('/in/../../etc/passwd').read())
attempt('symlink', lambda: open('/in/link').read())
attempt('symlink-dir', lambda: open('/in/up/etc/passwd').read())
attempt('write-in', lambda: open('/in/new.txt', 'w').write('x'))
attempt('overwrite-in', lambda: open('/in/data.txt', 'w').write('x'))
"#;
        let o = d.run(code, None, &limits());
        assert_eq!(o.kind, OutcomeKind::Completed, "{o:?} {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.starts_with("abc abc\n"), "{out}");
        assert!(!out.contains("ALLOWED"), "{out}");
        for label in [
            "etc",
            "dotdot",
            "symlink ",
            "symlink-dir",
            "write-in",
            "overwrite-in",
        ] {
            assert!(out.contains(label), "{label}: {out}");
        }
        assert_eq!(out.matches("denied").count(), 6, "{out}");
        assert_eq!(fs::read_to_string(d.path("out/r.txt")).unwrap(), "ok");
        assert_eq!(fs::read_to_string(d.path("in/data.txt")).unwrap(), "abc");
        assert!(!d.path("in/new.txt").exists());
    }

    #[test]
    fn out_write_limit_is_an_output_limit() {
        let code = "open('/out/big', 'w').write('x' * 5000)";
        let o = Dirs::new().run_with(code, |l| l.out_bytes = 1000);
        assert_eq!(o.kind, OutcomeKind::OutputLimit, "{o:?}");
        assert!(o.detail.unwrap().contains("write limit"));
    }

    #[test]
    fn stdout_cap_is_an_output_limit() {
        let code = "for i in range(100):\n    print(i)";
        let o = Dirs::new().run_with(code, |l| l.stdout_bytes = 10);
        assert_eq!(o.kind, OutcomeKind::OutputLimit, "{o:?}");
        assert_eq!(o.stdout.len(), 10);
        assert!(o.stdout_capped);
    }

    #[test]
    fn interpreter_time_limit_is_timed_out() {
        let d = Dirs::new();
        let mut l = limits();
        l.wall = Duration::from_millis(300);
        let o = d.run("print('spin')\nwhile True:\n    pass", None, &l);
        assert_eq!(o.kind, OutcomeKind::TimedOut, "{o:?}");
        assert_eq!(o.exit_code, 124);
        assert_eq!(text(&o.stdout), "spin\n");
        let o = d.run(
            "import time\ntry:\n    time.sleep(10)\nexcept BaseException:\n    print('caught')",
            None,
            &l,
        );
        assert_eq!(o.kind, OutcomeKind::TimedOut, "{o:?}");
        assert!(o.runtime_sec < 1.0, "{}", o.runtime_sec);
        assert!(!text(&o.stdout).contains("caught"));
    }

    #[test]
    fn host_services_are_absent() {
        let d = Dirs::new();
        let code = r#"
import os
for label, fn in [('system', lambda: os.system('id')), ('getenv', lambda: os.getenv('HOME'))]:
    try:
        print(label, fn())
    except Exception as e:
        print(label, 'denied', type(e).__name__)
try:
    import socket
    print('socket ALLOWED')
except ImportError as e:
    print('socket denied', type(e).__name__)
"#;
        let o = d.run(code, None, &limits());
        let out = text(&o.stdout);
        assert!(
            !out.contains("ALLOWED") && out.matches("denied").count() == 3,
            "{out} {o:?}"
        );
    }
}
