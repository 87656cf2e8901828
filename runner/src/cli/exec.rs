//! `runner exec REQUEST [--inputs DIR] [--results DIR] [--json]`: validate an approved
//! request, stage its inputs, run it in the sandbox and publish the result.
//!
//! The phases, each a function: judge → prepare the engine → stage → run → collect and
//! publish. A rejected request or a staging refusal writes no result; a guest that
//! fails or hits a limit still gets a complete result.

use super::read::{Read2, read_document};
use crate::backend::confine;
use crate::backend::monty::MontyBackend;
use crate::backend::wasmtime::GuestRuntime;
use crate::backend::worker::WasmtimeBackend;
use crate::backend::{Backend, GuestProgram, Limits, MontyProgram, Outcome, Program, SandboxSpec};
use crate::digest::sha256_hex;
use crate::exit_codes;
use crate::guest::{self, manifest::GuestManifest};
use crate::lock::{
    self, FilePin, GuestPin, LimitsPin, Lock, OutputsPin, PolicyPin, RequestPin, RuntimePin,
    StreamPin, statement,
};
use crate::policy::Policy;
use crate::request::{ApprovedRequest, Reason, Work};
use crate::result::collect::{self, WalkLimits};
use crate::result::render::{self, Provenance, ResultDoc};
use crate::result::{Rendered, ResultsRoot, Staging};
use crate::stage::{self, InputsRoot, RunDir, StageError};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use ed25519_dalek::SigningKey;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub mod batch;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner exec examples/monty-primes/TR-20261121-101500Z-monty-primes.md
  runner exec examples/csv-stats/TR-20261121-100000Z-csv-stats.md --results /tmp/results --json
  runner exec requests/ --jobs 2                  # a batch: every TR-*.md in the directory
  runner exec TR-….md --sign-key keys/ci.key       # also sign the run's in-toto statement

A rejected request or a refused input writes no result (exit 1 or 4); a guest that fails
or hits a limit still gets a complete result (exit 0: the outcome is in the result).")]
pub struct ExecCommand {
    /// The approved Tool Execution Request (`TR-….md`). Several requests, or a
    /// directory (its `TR-*.md` in name order), run as one batch: one result per
    /// request, a summary at the end, exit code the highest of the runs'. Example:
    /// `examples/csv-stats/TR-20261121-100000Z-csv-stats.md`.
    #[arg(value_name = "REQUEST", required = true)]
    pub requests: Vec<PathBuf>,
    /// Directory holding the declared inputs (default: `inputs/` beside the request).
    /// Example: `--inputs examples/csv-stats/inputs`.
    #[arg(long, value_name = "DIR")]
    pub inputs: Option<PathBuf>,
    /// Directory to write the result into (default: `results/` beside the request).
    /// Example: `--results /tmp/results`.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Print one JSON object (schema: schemas/exec.json; a batch prints an array) instead
    /// of text. Example: `--json`.
    #[arg(long)]
    pub json: bool,
    /// Sign the run's in-toto statement with this Ed25519 private key (PKCS#8 PEM),
    /// writing `TS-….intoto.dsse.json` beside the result. Example: `--sign-key keys/ci.key`.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// In a batch, run up to N requests at once (each in its own worker process).
    /// Example: `--jobs 2`.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: u32,
}

/// What `exec --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExecReport {
    /// ACCEPT: the request ran and `result_path` holds its result (whatever the guest's
    /// outcome); REJECT: nothing ran, `reasons` says why.
    #[schemars(extend("enum" = ["ACCEPT", "REJECT"]))]
    pub verdict: &'static str,
    pub reasons: Vec<Reason>,
    pub result_path: Option<String>,
    #[schemars(extend("enum" = ["completed", "timed_out", "memory_exceeded", "cpu_exhausted", "output_limit", "trapped", null]))]
    pub outcome: Option<&'static str>,
    pub exit_code: Option<i32>,
    pub runtime_sec: Option<f64>,
}

/// A failure before a result exists, with the exit code it maps to.
pub struct Failure {
    pub code: i32,
    pub reasons: Vec<Reason>,
}

impl Failure {
    fn new(code: i32, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reasons: vec![Reason::new(reason, message, None)],
        }
    }
}

impl ExecCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        if batch::is_batch(&self.requests) {
            return batch::execute(&self, policy);
        }
        let request = self.requests[0].as_path();
        let (code, report) = match self.run(request, policy) {
            Ok(report) => (exit_codes::OK, report),
            Err(f) => (
                f.code,
                ExecReport {
                    verdict: "REJECT",
                    reasons: f.reasons,
                    result_path: None,
                    outcome: None,
                    exit_code: None,
                    runtime_sec: None,
                },
            ),
        };
        if self.json {
            match serde_json::to_string(&report) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("error: cannot encode the report: {e}");
                    return exit_codes::INTERNAL;
                }
            }
        } else if let Some(path) = &report.result_path {
            println!("{path}");
            eprintln!(
                "outcome: {}, exit code {}, {:.3} s",
                report.outcome.unwrap_or("?"),
                report.exit_code.unwrap_or(-1),
                report.runtime_sec.unwrap_or(0.0)
            );
        } else {
            eprintln!("{}: not run", request.display());
            for r in &report.reasons {
                match r.line {
                    Some(n) => eprintln!("  {}:{n}: {}: {}", request.display(), r.code, r.message),
                    None => eprintln!("  {}: {}", r.code, r.message),
                }
            }
        }
        code
    }

    fn run(&self, request: &Path, policy: &Policy) -> Result<ExecReport, Failure> {
        let sign_key = self.signing_key()?;
        self.run_one(
            request,
            policy,
            &SharedEngines::default(),
            sign_key.as_ref(),
        )
    }

    fn signing_key(&self) -> Result<Option<SigningKey>, Failure> {
        match &self.sign_key {
            Some(path) => Ok(Some(crate::sign::load_signing_key(path).map_err(|e| {
                Failure::new(exit_codes::USAGE, "sign.key", e.to_string())
            })?)),
            None => Ok(None),
        }
    }

    /// Judge, run and publish one request, with the engines of this process.
    fn run_one(
        &self,
        request: &Path,
        policy: &Policy,
        shared: &SharedEngines,
        sign_key: Option<&SigningKey>,
    ) -> Result<ExecReport, Failure> {
        let plan = RunPlan::judge(request, policy)?;
        let inputs = InputsRoot::for_request(self.inputs.as_deref(), request);
        let results = ResultsRoot::for_request(self.results.as_deref(), request);
        let summary = plan.run_shared(shared, &inputs, &results, !self.json, sign_key)?;
        Ok(ExecReport {
            verdict: "ACCEPT",
            reasons: Vec::new(),
            result_path: Some(summary.result_path.display().to_string()),
            outcome: Some(summary.outcome.kind.as_str()),
            exit_code: Some(summary.outcome.exit_code),
            runtime_sec: Some(summary.outcome.runtime_sec),
        })
    }
}

/// What the runs of one `runner exec` process share: one wasmtime engine, with the
/// precompiled guests it has verified (so a batch checks each guest once, and its
/// workers map the same cache file). Each run still gets its own store, directories
/// and worker process.
#[derive(Default)]
pub struct SharedEngines {
    wasmtime: Mutex<Option<Arc<WasmtimeBackend>>>,
    /// Held while a guest is located and prepared, so that concurrent runs of a batch
    /// fetch or compile a missing guest once, not once each.
    preparing: Mutex<()>,
    /// Guest name → its located file and runtime (assets verified): a batch hashes a
    /// guest's assets once, not once per run.
    located: Mutex<HashMap<String, (PathBuf, GuestRuntime)>>,
}

impl SharedEngines {
    fn wasmtime(&self) -> Result<Arc<WasmtimeBackend>, String> {
        let mut slot = self
            .wasmtime
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(backend) = slot.as_ref() {
            return Ok(Arc::clone(backend));
        }
        let backend = Arc::new(
            WasmtimeBackend::new(crate::backend::wasmtime::default_cache_dir())
                .map_err(|e| e.to_string())?,
        );
        *slot = Some(Arc::clone(&backend));
        Ok(backend)
    }
}

/// A judged request, ready to run (by `exec`, or again by `replay`).
pub struct RunPlan {
    pub approved: ApprovedRequest,
    /// The request's text as read (hashed normalized in the lock).
    pub request_text: String,
    pub policy: Policy,
    /// The trusted key whose signature approved the request (`None`: unsigned).
    pub approval_key: Option<crate::approval::ApprovalKey>,
}

/// What one run left behind.
pub struct RunSummary {
    pub result_path: PathBuf,
    pub lock: Lock,
    pub outcome: Outcome,
}

impl RunPlan {
    /// Reads and validates the request at `path`.
    pub fn judge(path: &Path, policy: &Policy) -> Result<Self, Failure> {
        let (judged, request_text) = judge(path, policy)?;
        Ok(Self {
            approved: judged.request,
            request_text,
            policy: policy.clone(),
            approval_key: judged.approval_key,
        })
    }

    /// The engine this request needs and its version.
    pub fn engine_identity(&self) -> (String, String) {
        match self.approved.work() {
            Work::Era { .. } => ("wasmtime".into(), crate::WASMTIME_VERSION.into()),
            Work::Monty { .. } => ("monty".into(), crate::MONTY_VERSION.into()),
        }
    }

    /// The guest this request needs, as pinned in the manifest: name and sha256 hex.
    pub fn guest_pin(&self) -> Option<(String, String)> {
        match self.approved.work() {
            Work::Era { guest, .. } => {
                let manifest = GuestManifest::embedded().ok()?;
                let entry = manifest.get(guest)?;
                Some((guest.clone(), entry.file_sha256.clone()))
            }
            Work::Monty { .. } => None,
        }
    }

    /// Prepares the engine, stages the inputs, runs, and publishes the result with its
    /// lock and in-toto statement (signed when `sign_key` is given).
    pub fn run(
        &self,
        inputs: &InputsRoot,
        results: &ResultsRoot,
        show_progress: bool,
        sign_key: Option<&SigningKey>,
    ) -> Result<RunSummary, Failure> {
        let shared = SharedEngines::default();
        self.run_shared(&shared, inputs, results, show_progress, sign_key)
    }

    /// [`RunPlan::run`] with the engines of a batch.
    pub fn run_shared(
        &self,
        shared: &SharedEngines,
        inputs: &InputsRoot,
        results: &ResultsRoot,
        show_progress: bool,
        sign_key: Option<&SigningKey>,
    ) -> Result<RunSummary, Failure> {
        let approved = &self.approved;
        let policy = &self.policy;
        let limits = limits_for(approved, policy);

        // Prepare the engine before staging: a missing guest is fetched (with progress)
        // and compiled once; none of that depends on the inputs.
        let wasmtime_backend;
        let monty_backend;
        let (backend, program, guest_id): (&dyn Backend, Program, Option<(String, String)>) =
            match approved.work() {
                Work::Era {
                    argv,
                    guest: guest_name,
                    ..
                } => {
                    let (backend, program) =
                        prepare_guest(shared, guest_name, argv, show_progress)?;
                    wasmtime_backend = backend;
                    let sha = match &program {
                        Program::Guest(g) => g.wasm_sha256.clone(),
                        Program::Monty(_) => String::new(),
                    };
                    (
                        wasmtime_backend.as_ref(),
                        program,
                        Some((guest_name.clone(), sha)),
                    )
                }
                Work::Monty { code, inputs_json } => {
                    monty_backend = MontyBackend::new();
                    // A missing worker binary is a setup problem: say so before staging.
                    monty_backend.worker_exe().map_err(|e| {
                        Failure::new(exit_codes::IO, "backend.unavailable", e.to_string())
                    })?;
                    let program = Program::Monty(MontyProgram {
                        code: code.clone(),
                        inputs_json: inputs_json.clone(),
                    });
                    (&monty_backend, program, None)
                }
            };

        // The results directory is opened (a symlinked default refused) before anything
        // runs: a run whose result could not be published must not happen.
        let staging = Staging::new(results).map_err(|e| {
            let code = match e {
                crate::result::PublishError::ResultsDirSymlink { .. } => "result.dir_symlink",
                _ => "result.write",
            };
            Failure::new(exit_codes::IO, code, e.to_string())
        })?;
        let run = RunDir::create(None)
            .map_err(|e| Failure::new(exit_codes::IO, "stage.run_dir", e.to_string()))?;
        let staged = stage::stage_inputs(approved.inputs(), inputs, &run).map_err(stage_failure)?;
        let tmpfs = confine::mount_out_tmpfs(&run.out_dir, &limits)
            .map_err(|e| Failure::new(exit_codes::IO, "stage.out_mount", e.to_string()))?;
        let spec = SandboxSpec {
            program,
            in_dir: run.in_dir.clone(),
            out_dir: run.out_dir.clone(),
            capture_dir: run.capture_dir.clone(),
            limits: limits.clone(),
            confinement: policy.confinement.clone(),
        };
        let outcome = backend
            .run(&spec)
            .map_err(|e| Failure::new(exit_codes::IO, "backend.failed", e.to_string()))?;

        let mut findings = stage::recheck_inputs(&staged, &run);
        let ctx = PublishContext {
            plan: self,
            staged: &staged,
            limits: &limits,
            guest: guest_id.as_ref(),
            sign_key,
        };
        let (path, lock) = publish(&ctx, &run, staging, results, &outcome, &mut findings)?;
        if let Some(t) = tmpfs {
            // The outputs are copied; a failed unmount only delays freeing the tmpfs.
            let _ = t.unmount();
        }
        Ok(RunSummary {
            result_path: path,
            lock,
            outcome,
        })
    }
}

/// Reads and validates the request and checks its approval (signature, separation of
/// duties); a REJECT carries every reason.
fn judge(path: &Path, policy: &Policy) -> Result<(crate::approval::Judged, String), Failure> {
    let bytes = match read_document(path, policy.request.max_bytes) {
        Ok(Read2::Bytes(b)) => b,
        Ok(Read2::TooLarge(size)) => {
            return Err(Failure::new(
                exit_codes::REJECT,
                "request.too_large",
                format!(
                    "the request is {size} bytes; the policy allows at most {}",
                    policy.request.max_bytes
                ),
            ));
        }
        Err(e) => {
            return Err(Failure::new(
                exit_codes::IO,
                "io.unreadable",
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    let approved = crate::approval::judge(path, &bytes, policy).map_err(|reasons| Failure {
        code: exit_codes::REJECT,
        reasons,
    })?;
    // validate() accepted it, so it is UTF-8.
    let text = String::from_utf8(bytes).unwrap_or_default();
    Ok((approved, text))
}

/// The limits of one run: the request's, with the policy's output caps.
pub fn limits_for(approved: &ApprovedRequest, policy: &Policy) -> Limits {
    let l = approved.limits();
    Limits {
        memory_bytes: l.memory_limit_mb << 20,
        wall: Duration::from_secs(l.time_limit_sec),
        cpu: Duration::from_secs_f64(l.cpu_limit_sec),
        stdout_bytes: policy.output.stdout_max_bytes,
        stderr_bytes: policy.output.stderr_max_bytes,
        out_bytes: policy.output.out_max_bytes,
        out_files: policy.output.out_max_files,
    }
}

fn prepare_guest(
    shared: &SharedEngines,
    guest_name: &str,
    argv: &[String],
    show_progress: bool,
) -> Result<(Arc<WasmtimeBackend>, Program), Failure> {
    let io = |e: String| Failure::new(exit_codes::IO, "guest.unavailable", e);
    let _preparing = shared
        .preparing
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let manifest = GuestManifest::embedded().map_err(|e| io(e.to_string()))?;
    let entry = manifest
        .require(guest_name)
        .map_err(|e| io(e.to_string()))?;
    // Drawn only when stderr is a terminal; an `info` log line otherwise (cli::output).
    let bar = super::output::Progress::new();
    let mut progress = |msg: &str| {
        if show_progress {
            bar.step(msg);
        }
    };
    // The wasm file is only read to compile it, and compiling re-hashes it first
    // (ensure_compiled); with a precompiled module cached, a size check is enough here
    // and saves hashing 26 MB on every run. A missing or wrong-size file is fetched or
    // refused by the full check.
    let mut located = shared
        .located
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (wasm_path, runtime) = match located.get(guest_name) {
        Some(found) => found.clone(),
        None => {
            let guest_dir = guest::store::default_guest_dir();
            let wasm_path = match guest::locate_size_only(entry, &guest_dir) {
                Ok(Some(path)) => path,
                _ => guest::ensure(entry, &guest_dir, &mut progress)
                    .map_err(|e| io(e.to_string()))?,
            };
            // Its assets (the scientific guest's stdlib zip) are read by the guest
            // itself, so they are hashed here, once per process.
            let runtime = guest::runtime_for(entry, &guest_dir).map_err(|e| io(e.to_string()))?;
            located.insert(guest_name.to_owned(), (wasm_path.clone(), runtime.clone()));
            (wasm_path, runtime)
        }
    };
    drop(located);
    let backend = shared.wasmtime().map_err(io)?;
    let program = GuestProgram {
        guest: guest_name.to_owned(),
        wasm_path,
        wasm_sha256: entry.file_sha256.clone(),
        argv: argv.to_vec(),
        runtime,
    };
    backend
        .prepare(&program, &mut progress)
        .map_err(|e| io(e.to_string()))?;
    Ok((backend, Program::Guest(program)))
}

fn stage_failure(e: StageError) -> Failure {
    let code = match &e {
        StageError::Missing { .. } => "stage.input_missing",
        StageError::Symlink { .. } => "stage.input_symlink",
        StageError::NotRegular { .. } => "stage.input_not_regular",
        StageError::HashMismatch { .. } => "stage.input_hash_mismatch",
        StageError::InputsDir { .. } => "stage.inputs_dir",
        StageError::InputsDirSymlink { .. } => "stage.inputs_dir_symlink",
        StageError::Hardlinked { .. } => "stage.input_hardlinked",
        StageError::RunDir(_) | StageError::Copy { .. } => "stage.io",
    };
    let exit = match &e {
        StageError::RunDir(_) | StageError::Copy { .. } => exit_codes::IO,
        _ => exit_codes::INPUT_MISMATCH,
    };
    Failure::new(exit, code, e.to_string())
}

/// What publishing needs besides the run's outcome.
struct PublishContext<'a> {
    plan: &'a RunPlan,
    staged: &'a [stage::StagedInput],
    limits: &'a Limits,
    guest: Option<&'a (String, String)>,
    sign_key: Option<&'a SigningKey>,
}

/// Collects `/out`, stores the streams, and publishes the result document with its
/// lock and in-toto statement (and signature). Returns the document's path and the lock.
fn publish(
    ctx: &PublishContext<'_>,
    run: &RunDir,
    staging: Staging,
    results: &ResultsRoot,
    outcome: &Outcome,
    findings: &mut Vec<String>,
) -> Result<(PathBuf, Lock), Failure> {
    let approved = &ctx.plan.approved;
    let policy = &ctx.plan.policy;
    // Every failure here names the results directory: that is where the operator looks.
    let io = |e: String| {
        Failure::new(
            exit_codes::IO,
            "result.write",
            format!("results directory {}: {e}", results.path().display()),
        )
    };
    let dest = staging.out_dir().map_err(|e| io(e.to_string()))?;
    let walk = WalkLimits {
        // The tmpfs lets a guest create one entry past the cap (its creation is what
        // proves the overflow); the result keeps at most the cap.
        max_entries: ctx.limits.out_files,
        max_depth: 32,
    };
    // Whatever the guest left, the run ends in a complete result: a /out that cannot
    // even be reopened is a finding, not a lost run.
    let collected = match Dir::open_ambient_dir(&run.out_dir, ambient_authority()) {
        Ok(out) => {
            collect::collect(&out, &dest, walk).map_err(|e| io(format!("collecting /out: {e}")))?
        }
        Err(e) => collect::Collected {
            findings: vec![format!(
                "/out could not be reopened after the run ({e}); nothing was collected"
            )],
            ..Default::default()
        },
    };
    findings.extend(collected.findings);
    staging
        .write_stream("stdout", &outcome.stdout)
        .map_err(|e| io(e.to_string()))?;
    staging
        .write_stream("stderr", &outcome.stderr)
        .map_err(|e| io(e.to_string()))?;
    let stdout_sha256 = sha256_hex(&outcome.stdout);
    let stderr_sha256 = sha256_hex(&outcome.stderr);
    let now = time::OffsetDateTime::now_utc();
    let created = crate::result::utc_timestamp(now);
    let base = crate::result::result_id(now, approved.request_id());
    let command = match approved.work() {
        Work::Era { command_line, .. } => command_line.clone(),
        Work::Monty { code, .. } => {
            format!("monty: {} lines of code from ## Code", code.lines().count())
        }
    };
    let backend_name = match approved.backend() {
        crate::backend::BackendKind::Era => "ERA",
        crate::backend::BackendKind::Monty => "monty",
    };
    let (engine, engine_version) = ctx.plan.engine_identity();
    let request_sha256 = lock::text_sha256_tagged(&ctx.plan.request_text);
    let lock_for = |id: &str, document: &str| -> Result<(Lock, String), lock::LockError> {
        Lock {
            lock_type: lock::LOCK_TYPE.into(),
            result_id: id.to_owned(),
            created_utc: created.clone(),
            request: RequestPin {
                request_id: approved.request_id().to_owned(),
                sha256: request_sha256.clone(),
                requested_by: approved.requested_by().to_owned(),
                approved_by: approved.approved_by().to_owned(),
                approved_utc: approved.approved_utc().to_owned(),
                approval_key: ctx
                    .plan
                    .approval_key
                    .as_ref()
                    .map(|k| lock::ApprovalKeyPin {
                        key_id: k.key_id.clone(),
                        name: k.name.clone(),
                    }),
            },
            policy: PolicyPin {
                origin: policy.origin.clone(),
                sha256: lock::tag(&policy.sha256),
            },
            backend: backend_name.to_owned(),
            runtime: RuntimePin {
                runner_version: crate::RUNNER_VERSION.to_owned(),
                engine: engine.clone(),
                engine_version: engine_version.clone(),
                guest: ctx.guest.map(|(name, sha)| GuestPin {
                    name: name.clone(),
                    sha256: lock::tag(sha),
                }),
            },
            limits: LimitsPin::from(ctx.limits),
            inputs_count: 0,
            inputs: ctx
                .staged
                .iter()
                .map(|i| FilePin {
                    path: i.path.clone(),
                    sha256: lock::tag(&i.sha256),
                    bytes: i.bytes,
                })
                .collect(),
            outputs: OutputsPin {
                stdout: StreamPin {
                    sha256: lock::tag(&stdout_sha256),
                    bytes: outcome.stdout.len() as u64,
                },
                stderr: StreamPin {
                    sha256: lock::tag(&stderr_sha256),
                    bytes: outcome.stderr.len() as u64,
                },
                artifacts_count: 0,
                artifacts: collected
                    .artifacts
                    .iter()
                    .map(|a| FilePin {
                        path: a.path.clone(),
                        sha256: lock::tag(&a.sha256),
                        bytes: a.bytes,
                    })
                    .collect(),
                exit_code: outcome.exit_code,
                outcome: outcome.kind.as_str().to_owned(),
            },
            result_sha256: lock::text_sha256_tagged(document),
            lock_sha256: String::new(),
        }
        .seal()
    };
    let render = |id: &str| {
        let document = render::render(&ResultDoc {
            result_id: id,
            created_utc: &created,
            request_id: approved.request_id(),
            backend: backend_name,
            purpose: approved.purpose(),
            exit_code: outcome.exit_code,
            runtime_sec: outcome.runtime_sec,
            outcome: outcome.kind,
            outcome_detail: outcome.detail.as_deref(),
            artifacts: &collected.artifacts,
            expected_outputs: approved.outputs(),
            stdout: &outcome.stdout,
            stderr: &outcome.stderr,
            stdout_sha256: &stdout_sha256,
            stderr_sha256: &stderr_sha256,
            stdout_capped: outcome.stdout_capped,
            stderr_capped: outcome.stderr_capped,
            provenance: Provenance {
                command: &command,
                engine: &outcome.engine,
                guest: ctx.guest.map(|(n, s)| (n.as_str(), s.as_str())),
                runner_version: crate::RUNNER_VERSION,
                limits: ctx.limits,
                cpu_limit_text: &approved.limits().cpu_limit,
                request_sha256: approved.normalized_sha256(),
                policy_sha256: &policy.sha256,
                confinement: &outcome.confinement,
                approved_by: approved.approved_by(),
                approved_utc: approved.approved_utc(),
                approval_key: ctx
                    .plan
                    .approval_key
                    .as_ref()
                    .map(|k| (k.key_id.as_str(), k.name.as_str())),
            },
            findings,
            excerpt_lines: policy.output.excerpt_lines,
            rules: policy.rules_for(crate::policy::RuleTarget::Result),
        });
        // The lock, the statement and (when asked) its signature, or no result at all:
        // a run asked to sign never publishes unsigned.
        let (lock, lock_text) = lock_for(id, &document).map_err(|e| format!("the lock: {e}"))?;
        let st = statement::statement_text(&lock, &format!("{id}.md"))
            .map_err(|e| format!("the in-toto statement: {e}"))?;
        let mut extras = vec![(lock::lock_file_name(id), lock_text.into_bytes())];
        let envelope = match ctx.sign_key {
            Some(key) => {
                let envelope = crate::sign::sign(statement::PAYLOAD_TYPE, st.as_bytes(), key);
                let text = serde_json::to_string(&envelope)
                    .map_err(|e| format!("the statement's DSSE envelope: {e}"))?;
                Some((statement::envelope_file_name(id), text.into_bytes()))
            }
            None => None,
        };
        extras.push((statement::statement_file_name(id), st.into_bytes()));
        extras.extend(envelope);
        Ok::<_, String>((Rendered { document, extras }, lock))
    };
    let (path, lock) = staging
        .publish_with(&base, render)
        .map_err(|e| io(e.to_string()))?;
    Ok((path, lock))
}
