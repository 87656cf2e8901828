//! The run pipeline: judge → prepare → set up → run → publish.
//!
//! `runner exec` (one request or a batch), `runner replay` and a long-running host all
//! run requests through one [`Pipeline`], so a request gets the same verdict, result,
//! lock and statement whichever way it came in. What a pipeline holds is what runs may
//! share: the policy, one wasmtime engine and the guests it has verified ([`Engines`]),
//! the signing key. What each run keeps to itself is everything else: its judgement,
//! its run directory, its `/out` tmpfs, its worker process and its result.
//!
//! Each stage fails with its own error ([`error`]); a run that reached the sandbox
//! always ends in a published result, whatever the guest did.

pub mod error;
pub mod network;
mod prepare;
mod publish;
pub mod replay;

pub use error::{JudgeError, PrepareError, PublishCause, PublishFailure, RunError, SetupError};
pub use prepare::Engines;

use crate::approval::ApprovalKey;
use crate::determinism::Fresh as _;
use crate::guest::manifest::GuestManifest;
use crate::result::{ResultsRoot, Staging};
use crate::stage::{self, InputsRoot, RunDir};
use ed25519_dalek::SigningKey;
use runner_core::lock::Lock;
use runner_core::policy::Policy;
use runner_core::policy::RuleTarget;
use runner_core::request::{ApprovedRequest, Work};
use runner_core::run::Limits;
use runner_sandbox::Outcome;
use runner_sandbox::SandboxSpec;
use runner_sandbox::confine;
use runner_sandbox::read::{Read2, read_document};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs requests under one policy. Cheap to share between threads (`&Pipeline` is all a
/// run needs); a batch or a host builds one and runs every request through it.
pub struct Pipeline {
    policy: Policy,
    engines: Engines,
    sign_key: Option<SigningKey>,
    progress: Option<MakeProgress>,
    /// Where run directories are made (default: the system temporary directory).
    run_base: std::sync::OnceLock<PathBuf>,
}

/// Makes the reporter of one run's preparation steps (a guest's download and compile):
/// called when a run starts preparing, dropped when it is done.
pub type MakeProgress = Box<dyn Fn() -> Box<dyn FnMut(&str)> + Send + Sync>;

/// A judged request, ready to run (by `exec`, or again by `replay`).
pub struct RunPlan {
    pub approved: ApprovedRequest,
    /// The request's text as read (hashed normalized in the lock).
    pub request_text: String,
    /// The trusted key whose signature approved the request (`None`: unsigned).
    pub approval_key: Option<ApprovalKey>,
    /// Set by a replay: the baseline its lock records it was compared against.
    pub replay_of: Option<runner_core::lock::ReplayOf>,
    /// Set by a replay: the clocks and entropy the baseline recorded. `None`: fresh
    /// values under the policy's `[determinism]`.
    pub determinism: Option<runner_core::determinism::Determinism>,
    /// Set by a replay of a run with network: the recording its broker serves.
    pub network_replay: Option<network::Recording>,
    /// Which module may run: a new run's choice, or the one a replayed lock recorded.
    pub preinit: crate::guest::preinit::Choice,
}

/// A request file's bytes, read once ([`Pipeline::read_request`]), or why they could
/// not be read: what a run judges and what [`Pipeline::start_worker_ahead`] peeks at.
pub struct RequestRead(Result<Vec<u8>, JudgeError>);

/// What one run left behind.
pub struct RunSummary {
    pub result_path: PathBuf,
    pub lock: Lock,
    pub outcome: Outcome,
}

impl Pipeline {
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            engines: Engines::default(),
            sign_key: None,
            progress: None,
            run_base: std::sync::OnceLock::new(),
        }
    }

    /// Make every run's directory under `base` instead of the system temporary
    /// directory (a host's scratch directory, which the next host sweeps if this one is
    /// killed). Set before the first run; a second call is ignored.
    pub fn set_run_base(&self, base: &Path) {
        let _ = self.run_base.set(base.to_owned());
    }

    /// Sign every run's in-toto statement with `key` (a run asked to sign never
    /// publishes unsigned).
    pub fn with_sign_key(mut self, key: Option<SigningKey>) -> Self {
        self.sign_key = key;
        self
    }

    /// Keep up to `n` workers per engine (ERA, Monty) started ahead of the requests, for
    /// a host or a batch that runs many (see `runner_sandbox::worker::WorkerPool`); 0,
    /// the default, starts each worker when its run needs it. Set before the first run.
    pub fn set_warm_workers(&self, n: usize) {
        self.engines.set_warm_workers(n);
    }

    /// For a process that runs one request: its worker starts as soon as the run has
    /// prepared its engine, while the run stages (see [`Engines::set_one_worker_ahead`]).
    /// Set before the run.
    pub fn set_one_worker_ahead(&self) {
        self.engines.set_one_worker_ahead();
    }

    /// Reads the request at `path` once (a regular file, at most the policy's
    /// `request.max_bytes`), for [`Pipeline::start_worker_ahead`] and
    /// [`Pipeline::judge_read`] both.
    ///
    /// # Ambient authority
    /// Reads `path`, a file the operator named ([`runner_sandbox::read::read_document`]).
    pub fn read_request(&self, path: &Path) -> RequestRead {
        let max = self.policy.request.max_bytes;
        RequestRead(match read_document(path, max) {
            Ok(Read2::Bytes(bytes)) => Ok(bytes),
            Ok(Read2::TooLarge(size)) => Err(JudgeError::TooLarge { size, max }),
            Err(source) => Err(JudgeError::Unreadable {
                path: path.to_owned(),
                source,
            }),
        })
    }

    /// With [`Pipeline::set_one_worker_ahead`]: starts the worker of `request` now,
    /// before it is judged, from a peek at its front matter (`backend:`, and for ERA
    /// the guest its `language:` selects), so that the worker's process start and
    /// module load run on the other core while the request is judged and staged.
    /// Nothing is decided from the peek: judging is unchanged, and a refused request's
    /// worker is ended unused with the pipeline. Anything unclear starts nothing here
    /// (the run starts its worker as it prepares its engine).
    pub fn start_worker_ahead(&self, request: &RequestRead) {
        let Ok(bytes) = &request.0 else {
            return;
        };
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        match peek_front_matter(text, "backend") {
            Some(b) if b.eq_ignore_ascii_case("monty") => self.engines.start_monty_ahead(),
            Some(b) if b.eq_ignore_ascii_case("era") => {
                let guest = peek_front_matter(text, "language")
                    .and_then(|l| self.policy.guest_for_language(l));
                if let (Some(guest), Ok(determinism)) = (guest, self.policy.determinism.fresh()) {
                    self.engines.start_era_ahead(&guest.guest, &determinism);
                }
            }
            _ => {}
        }
    }

    /// Start the warm workers of both engines now (see [`Engines::warm_up`]); the ERA
    /// pool preloads the guest a `language: python` request's `python` command selects
    /// under this pipeline's policy (the default guest), chosen as validation chooses it.
    pub fn warm_up(&self) -> Result<(), PrepareError> {
        let guest = self
            .policy
            .guest_for_language("python")
            .filter(|g| g.programs.iter().any(|p| p == "python"))
            .or_else(|| self.policy.guest_for_program("python"))
            .map(|g| g.guest.clone());
        // The clock a fresh run gets decides whether its module can be the
        // pre-initialised one; a policy whose clock cannot be set up warms the plain one
        // (its runs will say why).
        let determinism = self.policy.determinism.fresh().ok();
        self.engines.warm_up(guest.as_deref(), determinism.as_ref())
    }

    /// What the warm workers did (ready now, runs warm and cold, replaced).
    pub fn worker_stats(&self) -> runner_sandbox::worker::PoolStats {
        self.engines.pool_counters().snapshot()
    }

    /// The live counters behind [`Pipeline::worker_stats`], for a host's metrics.
    pub fn worker_counters(&self) -> std::sync::Arc<runner_sandbox::worker::PoolCounters> {
        std::sync::Arc::clone(self.engines.pool_counters())
    }

    /// Report the steps of preparing an engine (a guest's download and compile).
    pub fn with_progress(mut self, progress: MakeProgress) -> Self {
        self.progress = Some(progress);
        self
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The public half of the key every run's statement is signed with, if any.
    pub fn verifying_key(&self) -> Option<ed25519_dalek::VerifyingKey> {
        self.sign_key.as_ref().map(SigningKey::verifying_key)
    }

    /// Judges the request at `path`, runs it with its inputs from `inputs` (default:
    /// `inputs/` beside it) and publishes into `results` (default: `results/` beside it).
    pub fn exec(
        &self,
        request: &Path,
        inputs: Option<&Path>,
        results: Option<&Path>,
    ) -> Result<RunSummary, RunError> {
        let plan = self.judge(request)?;
        let inputs = InputsRoot::for_request(inputs, request);
        let results = ResultsRoot::for_request(results, request);
        self.run(&plan, &inputs, &results)
    }

    /// Reads and validates the request at `path` and checks its approval (signature,
    /// separation of duties); a REJECT carries every reason.
    pub fn judge(&self, path: &Path) -> Result<RunPlan, RunError> {
        self.judge_read(path, self.read_request(path))
    }

    /// [`Pipeline::judge`] of the request `request` read from `path`
    /// ([`Pipeline::read_request`]).
    pub fn judge_read(&self, path: &Path, request: RequestRead) -> Result<RunPlan, RunError> {
        let bytes = request.0?;
        let judged =
            crate::approval::judge(path, &bytes, &self.policy).map_err(JudgeError::Rejected)?;
        // The validator accepted it, so it is UTF-8.
        let request_text = String::from_utf8(bytes).unwrap_or_default();
        runner_sandbox::phases::mark("runner.judged");
        Ok(RunPlan {
            approved: judged.request,
            request_text,
            approval_key: judged.approval_key,
            replay_of: None,
            determinism: None,
            network_replay: None,
            preinit: Default::default(),
        })
    }

    /// Prepares the engine, sets up the run's directories and inputs, runs, and
    /// publishes the result with its lock and in-toto statement.
    pub fn run(
        &self,
        plan: &RunPlan,
        inputs: &InputsRoot,
        results: &ResultsRoot,
    ) -> Result<RunSummary, RunError> {
        let limits = limits_for(&plan.approved, &self.policy);
        // The engine first: a missing guest is fetched (with progress) and compiled
        // once; none of that depends on the inputs.
        let mut reporter = self.progress.as_ref().map(|make| make());
        let prepared = self
            .engines
            .prepare(&plan.approved, &self.policy, &mut |msg: &str| {
                if let Some(report) = reporter.as_mut() {
                    report(msg);
                }
            })?;
        drop(reporter);
        runner_sandbox::phases::mark("runner.engine_prepared");

        // The results directory is opened (a symlinked default refused) before anything
        // runs: a run whose result could not be published must not happen.
        let staging = Staging::new(results).map_err(SetupError::ResultsDir)?;
        let determinism = match &plan.determinism {
            Some(recorded) => recorded.clone(),
            None => self
                .policy
                .determinism
                .fresh()
                .map_err(SetupError::Determinism)?,
        };
        let run = RunDir::create(self.run_base.get().map(PathBuf::as_path))
            .map_err(SetupError::RunDir)?;
        let staged = stage::stage_inputs(plan.approved.inputs(), inputs, &run)
            .map_err(SetupError::Inputs)?;
        runner_sandbox::phases::mark("runner.staged");
        // A guest's scratch `/tmp` is a directory inside `/out`: its own inode is the
        // runner's, not one of the guest's `out_files` entries (what it holds still is).
        // The sandbox (tmpfs, worker) gets the one more; collection keeps the cap.
        // So is the network exchange directory `/net` of a run granted the network.
        let extra = u64::from(plan.approved.network_allowlist())
            + u64::from(
                prepared
                    .run
                    .guest()
                    .is_some_and(|g| g.runtime.scratch.is_some()),
            );
        let mount_limits = Limits {
            out_files: limits.out_files.saturating_add(extra),
            ..limits.clone()
        };
        let tmpfs =
            confine::mount_out_tmpfs(&run.out_dir, &mount_limits).map_err(SetupError::OutMount)?;
        runner_sandbox::phases::mark("runner.out_mounted");
        let mut engine = prepared.run;
        let broker = network::start(
            &self.policy,
            plan.approved.network_allowlist(),
            plan.network_replay.as_ref(),
            &run,
            &mut engine,
            limits.wall,
        )?;
        let preinit = select_module(plan, engine.guest_mut(), &run.in_dir, &determinism)?;
        runner_sandbox::phases::mark("runner.module_selected");
        let spec = SandboxSpec {
            program: (),
            in_dir: run.in_dir.clone(),
            out_dir: run.out_dir.clone(),
            capture_dir: run.capture_dir.clone(),
            limits: mount_limits,
            confinement: self.policy.confinement.clone(),
            determinism,
        };
        // While a guest's worker runs, a second thread prepares the result rules'
        // literal conditions (`runner_core::rule_pattern`; about 3 ms of the built-in
        // policy's): the parent is otherwise idle until the worker ends. A rule's regex
        // is compiled only later, for a text holding the literals its matches need, which
        // a plain result rarely does. Not for monty: its worker ends within a few ms, and
        // the thread then only delayed publishing (measured: hello wall 1.07-1.14x with
        // it, against 0.90-0.95x for ERA).
        let outcome = if engine.guest().is_some() {
            std::thread::scope(|scope| {
                scope.spawn(|| self.policy.warm(RuleTarget::Result));
                engine.execute(&spec)
            })
        } else {
            engine.execute(&spec)
        };
        let network = broker.map(crate::net::broker::Broker::finish);
        network::remove_exchange(&run);
        let outcome = outcome?;
        if engine.guest().is_some_and(|g| g.runtime.scratch.is_some()) {
            run.remove_scratch();
        }

        runner_sandbox::phases::mark("runner.collected");
        let findings = stage::recheck_inputs(&staged, &run);
        let (result_path, lock) = publish::publish(
            &publish::Context {
                plan,
                policy: &self.policy,
                staged: &staged,
                limits: &limits,
                guest: prepared.guest.as_ref(),
                preinit: preinit.as_deref(),
                environment: prepared.environment.as_ref(),
                sign_key: self.sign_key.as_ref(),
                determinism: &spec.determinism,
                network: network.as_ref(),
            },
            &run,
            staging,
            results,
            &outcome,
            findings,
        )?;
        runner_sandbox::phases::mark("runner.published");
        if let Some(t) = tmpfs {
            // The outputs are copied; a failed unmount only delays freeing the tmpfs.
            let _ = t.unmount();
        }
        runner_sandbox::phases::mark("runner.unmounted");
        Ok(RunSummary {
            result_path,
            lock,
            outcome,
        })
    }
}

impl RunPlan {
    /// The engine this request needs and its version.
    pub fn engine_identity(&self) -> (String, String) {
        match self.approved.work() {
            Work::Era { .. } => ("wasmtime".into(), runner_wasmtime::WASMTIME_VERSION.into()),
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
}

/// The value of `key` in the front matter of `text` (between the opening and closing
/// `---` lines), unquoted; a peek for [`Pipeline::start_worker_ahead`], not a parse.
fn peek_front_matter<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    lines
        .take_while(|line| line.trim_end() != "---")
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .map(|value| value.trim().trim_matches(['"', '\'']))
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

/// Which module the guest runs: its plain module, or the pre-initialised one where
/// `guest::preinit::select` finds it reproduces the plain run (the one place that
/// decides). Returns the pre-initialised module's sha256 hex when it was chosen.
fn select_module(
    plan: &RunPlan,
    guest: Option<&mut runner_sandbox::GuestProgram>,
    in_dir: &std::path::Path,
    determinism: &runner_core::determinism::Determinism,
) -> Result<Option<String>, SetupError> {
    let Some(guest) = guest else {
        return Ok(None);
    };
    let Ok(manifest) = GuestManifest::embedded() else {
        return Ok(None);
    };
    let Some(entry) = manifest.get(&guest.guest) else {
        return Ok(None);
    };
    crate::guest::preinit::select(
        entry,
        &crate::guest::store::default_guest_dir(),
        guest,
        in_dir,
        determinism,
        &plan.preinit,
    )
    .map_err(SetupError::Preinit)
}

#[cfg(test)]
mod tests {
    use super::peek_front_matter;

    #[test]
    fn the_peek_reads_only_the_front_matter() {
        let text =
            "---\nrequest_id: \"x\"\nbackend: monty\nlanguage: 'python'\n---\nbackend: ERA\n";
        assert_eq!(peek_front_matter(text, "backend"), Some("monty"));
        assert_eq!(peek_front_matter(text, "language"), Some("python"));
        assert_eq!(peek_front_matter(text, "network"), None);
        assert_eq!(peek_front_matter("backend: ERA\n", "backend"), None);
        assert_eq!(
            peek_front_matter("---\n---\nbackend: ERA\n", "backend"),
            None
        );
    }
}
