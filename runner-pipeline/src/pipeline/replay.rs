//! Replay: re-run the request a lock pins and compare every output (stdout, stderr,
//! each artifact, exit code, outcome).
//!
//! Strict (the default): a replay refuses to run, naming each difference, when the
//! runner, engine, guest or the run-affecting part of the policy (`policy.run_sha256`)
//! available now is not the one pinned: a replay on something else is not a replay.
//! Across an upgrade ([`ReplayMode::AcrossUpgrade`]): it runs under what is in force
//! now and reports each pin that changed (old and new) beside the comparison; the
//! verdict is then `MATCH_ACROSS_UPGRADE` or `DRIFT`, never a plain `MATCH`. In both
//! modes a changed request is refused (it is another analysis), the policy in force
//! judges the request again, and inputs whose hash differs from the pin are drift with
//! nothing run (the request's approval covers only the pinned bytes). The replay's own
//! lock records the baseline it was compared against ([`ReplayOf`]).

use super::{Pipeline, RunError, RunPlan, limits_for};
use crate::lock::verify::{find_request, result_location};
use crate::result::ResultsRoot;
use crate::stage::InputsRoot;
use runner_contract::exit_codes;
use runner_contract::verdict::{OutputVerdict, ReplayVerdict};
use runner_core::determinism::DeterminismPin;
use runner_core::lock::EnvironmentPin;
use runner_core::lock::LimitsPin;
use runner_core::lock::Lock;
use runner_core::lock::OutputsPin;
use runner_core::lock::PinChange;
use runner_core::lock::ReplayOf;
use runner_core::lock::lock_file_name;
use runner_core::lock::tag;
use runner_core::lock::text_sha256_tagged;
use runner_core::request::Work;
use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};

/// An error told again (an `io::Error` is not `Clone`): its kind and its message.
pub(super) fn copy_error(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}

/// One compared output.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutputComparison {
    pub name: String,
    pub expected: String,
    pub actual: String,
    pub verdict: OutputVerdict,
}

/// Whether a replay may run when pins differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    /// Refuse when any run pin differs (the default).
    Strict,
    /// Run under what is in force now, and report which pins changed.
    AcrossUpgrade,
}

impl ReplayMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::AcrossUpgrade => "across-upgrade",
        }
    }
}

/// Where a replay's network answers come from (a baseline with an egress log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkSource {
    /// The baseline's recording, offline (the default).
    Recorded,
    /// Fetched again, under the allowlist and caps in force (`--live`; a strict replay
    /// has checked they are the pinned ones), each exchange compared with the
    /// baseline's ([`ExchangeComparison`]).
    Live,
}

/// One exchange of the baseline beside the live replay's, paired by order.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ExchangeComparison {
    /// The exchange's sequence number (the baseline's; the replay's when the baseline
    /// has none at that place).
    pub seq: u32,
    pub method: String,
    pub url: String,
    /// `same` (same status and body hash, or the same refusal), `changed_body` (same
    /// status, another body), `changed_status`, `now_refused` (allowed in the
    /// baseline, refused now), `now_allowed`, `changed_refusal` (refused both times,
    /// for another reason), `different_request` (the guest asked for something else
    /// at this place), `not_requested` (the baseline's exchange has no counterpart
    /// now), `new_request` (one the baseline did not make).
    #[schemars(extend("enum" = ["same", "changed_body", "changed_status", "now_refused", "now_allowed", "changed_refusal", "different_request", "not_requested", "new_request"]))]
    pub verdict: &'static str,
    /// The baseline's: `200 sha256:…`, `refused network.…`, the request when it
    /// differs, or `absent`.
    pub expected: String,
    /// The replay's, in the same form.
    pub actual: String,
}

/// The pin name of the whole policy text: reported, never a reason to refuse (when the
/// lock has `policy.run_sha256`, which is what replay compares).
pub const POLICY_TEXT_PIN: &str = "policy_text";

/// What a replay found.
pub struct Replayed {
    /// Every compared output (or, when inputs drifted, every drifted input: then
    /// nothing ran).
    pub outputs: Vec<OutputComparison>,
    /// Each pin of the baseline that differs from what is in force now.
    pub changed_pins: Vec<PinChange>,
    /// The replay's own result (`None` when nothing ran).
    pub result_path: Option<PathBuf>,
    /// What the baseline saw that was not recorded (the host's clocks or entropy), so
    /// that output depending on it drifts: one line each.
    pub notes: Vec<String>,
    /// With [`NetworkSource::Live`]: each exchange of the baseline beside the
    /// replay's; empty otherwise.
    pub network: Vec<ExchangeComparison>,
}

impl Replayed {
    pub fn matched(&self) -> bool {
        self.outputs
            .iter()
            .all(|o| o.verdict == OutputVerdict::Match)
    }

    /// Whether a pin that can change a run changed (the whole policy text alone cannot).
    pub fn upgraded(&self) -> bool {
        self.changed_pins.iter().any(|p| p.pin != POLICY_TEXT_PIN)
    }

    /// `MATCH`, `MATCH_ACROSS_UPGRADE` (every output matched, a run pin changed) or
    /// `DRIFT`.
    pub fn verdict(&self) -> ReplayVerdict {
        match (self.matched(), self.upgraded()) {
            (false, _) => ReplayVerdict::Drift,
            (true, true) => ReplayVerdict::MatchAcrossUpgrade,
            (true, false) => ReplayVerdict::Match,
        }
    }
}

/// Why a replay did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// What is pinned is not what is available now (or the lock cannot be trusted).
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
    #[error(transparent)]
    Run(#[from] RunError),
}

impl ReplayError {
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Refused(_) => exit_codes::REJECT,
            Self::Run(e) => e.exit_code(),
        }
    }

    /// Each reason, one line each.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Self::Refused(lines) => lines.clone(),
            Self::Run(e) => e
                .reasons()
                .into_iter()
                .map(|r| format!("{}: {}", r.code, r.message))
                .collect(),
        }
    }
}

/// Where a replay finds its pieces.
pub struct ReplaySource<'a> {
    /// The result to reproduce (`TS-….md`); its lock is read from beside it.
    pub result: &'a Path,
    /// The request (default: found beside the results directory by id and hash).
    pub request: Option<&'a Path>,
    /// The inputs (default: `inputs/` beside the request).
    pub inputs: Option<&'a Path>,
}

impl Pipeline {
    /// Re-runs what `source.result`'s lock pins, publishing into `results`, and compares.
    ///
    /// # Ambient authority
    /// Opens the directory of the result named by the operator (through
    /// [`runner_sandbox::host`]) and reads the lock (and, offline, the recorded bodies)
    /// through it.
    pub fn replay(
        &self,
        source: &ReplaySource<'_>,
        results: &ResultsRoot,
        mode: ReplayMode,
        network: NetworkSource,
    ) -> Result<Replayed, ReplayError> {
        let refuse = |msg: String| ReplayError::Refused(vec![msg]);
        let (id, dir) = result_location(source.result);
        let lock_path = dir.join(lock_file_name(&id));
        let results_dir = runner_sandbox::host::open_dir(&dir);
        let bytes = results_dir
            .as_ref()
            .map_err(copy_error)
            .and_then(|d| d.read(lock_file_name(&id)))
            .map_err(|e| refuse(format!("cannot read the lock {}: {e}", lock_path.display())))?;
        let lock = Lock::parse(&bytes).map_err(|e| {
            refuse(format!(
                "the lock {} is not trustworthy: {e}",
                lock_path.display()
            ))
        })?;
        let request_path = source
            .request
            .map(Path::to_path_buf)
            .or_else(|| find_request(&dir, &lock.request.request_id, &lock.request.sha256))
            .ok_or_else(|| {
                refuse(format!(
                    "request {} not found beside the results; pass --request",
                    lock.request.request_id
                ))
            })?;
        let mut plan = self.judge(&request_path)?;
        // The clocks and entropy the baseline recorded; a lock from before they were
        // recorded ran with the host's, and so does its replay.
        plan.determinism = Some(match &lock.determinism {
            Some(pin) => pin
                .to_determinism()
                .map_err(|e| refuse(format!("the lock {}: {e}", lock_path.display())))?,
            None => runner_core::determinism::Determinism::default(),
        });
        let mut notes = DeterminismPin::unreproducible(lock.determinism.as_ref());
        if network == NetworkSource::Live && lock.network.is_none() {
            notes.push(
                "--live: the baseline made no network exchange, so there is nothing to fetch again"
                    .to_owned(),
            );
        }
        // Located once: it hashes the installed tree, and both the pins and the refusal
        // below read it.
        let environment_now = self.environment_now(&plan);
        let changed_pins = self.pin_differences(&lock, &plan, &environment_now);
        let refused = self.refusals(
            &lock,
            mode,
            &changed_pins,
            &environment_now,
            (&plan.request_text, &request_path),
            &lock_path,
        );
        if !refused.is_empty() {
            return Err(ReplayError::Refused(refused));
        }
        let inputs = InputsRoot::for_request(source.inputs, &request_path);
        let drift = input_drift(&lock, &inputs);
        if !drift.is_empty() {
            return Ok(Replayed {
                outputs: drift,
                changed_pins,
                result_path: None,
                notes,
                network: Vec::new(),
            });
        }
        // A run with network is replayed offline: its broker serves the recording;
        // with --live it fetches again.
        if network == NetworkSource::Recorded {
            plan.network_replay = lock.network.as_ref().map(|n| super::network::Recording {
                exchanges: n.exchanges.clone(),
                bodies: results_dir
                    .as_ref()
                    .map_err(copy_error)
                    .and_then(|d| d.open_dir(&id)),
            });
        }
        plan.preinit = pinned_module(&lock);
        plan.replay_of = Some(ReplayOf {
            result_id: lock.result_id.clone(),
            lock_sha256: lock.lock_sha256.clone(),
            mode: mode.as_str().to_owned(),
            changed_pins: changed_pins.clone(),
        });
        let summary = self.run(&plan, &inputs, results)?;
        let network = match network {
            NetworkSource::Live => {
                compare_exchanges(lock.network.as_ref(), summary.lock.network.as_ref())
            }
            NetworkSource::Recorded => Vec::new(),
        };
        Ok(Replayed {
            outputs: compare(&lock, &summary.lock),
            changed_pins,
            result_path: Some(summary.result_path),
            notes,
            network,
        })
    }

    /// Why the replay cannot run: in strict mode every pin that changed (but the policy
    /// text, reported only); in any mode a pinned environment that is not here, and a
    /// request that is not the one the lock pins.
    fn refusals(
        &self,
        lock: &Lock,
        mode: ReplayMode,
        changed_pins: &[PinChange],
        environment_now: &Result<Option<EnvironmentPin>, EnvironmentNow>,
        (request_text, request_path): (&str, &Path),
        lock_path: &Path,
    ) -> Vec<String> {
        let mut refused = Vec::new();
        if mode == ReplayMode::Strict {
            refused.extend(
                changed_pins
                    .iter()
                    .filter(|p| p.pin != POLICY_TEXT_PIN)
                    // An environment that is not here gets its own line, below.
                    .filter(|p| !(p.pin == "environment" && p.actual.starts_with("unavailable")))
                    .map(|p| self.refusal(lock, p)),
            );
        }
        // A pinned environment that is not here is refused in any mode, with the
        // command that brings it back.
        if let (Some(pinned), Err(why)) = (&lock.runtime.environment, environment_now) {
            refused.push(format!(
                "environment: the lock pins `{}` (tree {}), which is not available here: \
                 {why}; run `runner env fetch --from-lock {}`",
                pinned.name,
                pinned.tree_sha256,
                lock_path.display()
            ));
        }
        let request_sha = text_sha256_tagged(request_text);
        if request_sha != lock.request.sha256 {
            refused.push(format!(
                "the request {} has sha256 {request_sha}; the lock pins {} (another request \
                 is another analysis, in any mode)",
                request_path.display(),
                lock.request.sha256
            ));
        }
        refused
    }

    /// Each pin of `lock` that is not what is in force now: the policy's run tables
    /// (`policy`; for a lock older than `run_sha256`, its whole text), the whole policy
    /// text (`policy_text`, reported only), the runner, the engine, the guest, the limits
    /// the run gets (the request's, capped by the policy's `[output]`), and the
    /// environment (`environment_now`, located by the caller).
    fn pin_differences(
        &self,
        lock: &Lock,
        plan: &RunPlan,
        environment_now: &Result<Option<EnvironmentPin>, EnvironmentNow>,
    ) -> Vec<PinChange> {
        let policy = self.policy();
        let mut out = Vec::new();
        let mut change = |pin: &str, expected: String, actual: String| {
            if expected != actual {
                out.push(PinChange {
                    pin: pin.to_owned(),
                    expected,
                    actual,
                });
            }
        };
        let text_sha = tag(&policy.sha256);
        match &lock.policy.run_sha256 {
            Some(pinned) => {
                change("policy", pinned.clone(), tag(&policy.run_sha256));
                change(POLICY_TEXT_PIN, lock.policy.sha256.clone(), text_sha);
            }
            // A lock from before run_sha256: the whole text is all it pins.
            None => change("policy", lock.policy.sha256.clone(), text_sha),
        }
        change(
            "runner",
            lock.runtime.runner_version.clone(),
            crate::RUNNER_VERSION.to_owned(),
        );
        let (engine, version) = plan.engine_identity();
        change(
            "engine",
            format!("{} {}", lock.runtime.engine, lock.runtime.engine_version),
            format!("{engine} {version}"),
        );
        change(
            "guest",
            lock.runtime
                .guest
                .as_ref()
                .map_or("none".to_owned(), |g| format!("{} {}", g.name, g.sha256)),
            plan.guest_pin()
                .map_or("none".to_owned(), |(n, s)| format!("{n} {}", tag(&s))),
        );
        change(
            "environment",
            lock.runtime
                .environment
                .as_ref()
                .map_or("none".to_owned(), EnvironmentPin::summary),
            match environment_now {
                Ok(Some(pin)) => pin.summary(),
                Ok(None) => "none".to_owned(),
                Err(why) => format!("unavailable ({why})"),
            },
        );
        let now = LimitsPin::from(&limits_for(&plan.approved, policy));
        let (expected, actual) = limits_difference(&lock.limits, &now);
        change("limits", expected, actual);
        out
    }

    /// The package environment the request would run with now, verified: `None` when
    /// its language selects none, the reason when it is not installed or not intact.
    fn environment_now(&self, plan: &RunPlan) -> Result<Option<EnvironmentPin>, EnvironmentNow> {
        let Work::Era {
            environment: Some(name),
            ..
        } = plan.approved.work()
        else {
            return Ok(None);
        };
        let spec = self
            .policy()
            .environment(name)
            .ok_or_else(|| EnvironmentNow::Undeclared(name.to_string()))?;
        crate::environment::locate(spec, &crate::environment::default_env_dir())
            .map(|found| Some(EnvironmentPin::of(&found)))
            .map_err(EnvironmentNow::Env)
    }

    /// The line a strict replay refuses with for `pin`.
    fn refusal(&self, lock: &Lock, pin: &PinChange) -> String {
        match pin.pin.as_str() {
            "policy" if lock.policy.run_sha256.is_none() => format!(
                "policy: the lock pins {} ({}), the policy in force is {} ({}); the lock \
                 predates policy.run_sha256, so the whole policy text is compared \
                 (--across-upgrade replays it anyway)",
                pin.expected,
                lock.policy.origin,
                pin.actual,
                self.policy().origin
            ),
            "policy" => format!(
                "policy: the lock pins run tables {} ({}), the policy in force has {} ({})",
                pin.expected,
                lock.policy.origin,
                pin.actual,
                self.policy().origin
            ),
            "runner" | "engine" | "guest" | "environment" => format!(
                "{}: the lock pins {}, available is {}",
                pin.pin, pin.expected, pin.actual
            ),
            _ => format!(
                "{}: the lock pins {}, in force is {}",
                pin.pin, pin.expected, pin.actual
            ),
        }
    }
}

/// The fields of two limits pins that differ, as `name=value` lists (both empty when
/// they are equal).
fn limits_difference(a: &LimitsPin, b: &LimitsPin) -> (String, String) {
    let fields = |l: &LimitsPin| {
        [
            ("memory_bytes", l.memory_bytes),
            ("wall_ms", l.wall_ms),
            ("cpu_ms", l.cpu_ms),
            ("stdout_bytes", l.stdout_bytes),
            ("stderr_bytes", l.stderr_bytes),
            ("out_bytes", l.out_bytes),
            ("out_files", l.out_files),
        ]
    };
    let (mut expected, mut actual) = (Vec::new(), Vec::new());
    for ((name, x), (_, y)) in fields(a).into_iter().zip(fields(b)) {
        if x != y {
            expected.push(format!("{name}={x}"));
            actual.push(format!("{name}={y}"));
        }
    }
    (expected.join(" "), actual.join(" "))
}

/// Each exchange of the baseline's log beside the live replay's, paired by order.
pub fn compare_exchanges(
    expected: Option<&runner_core::net::NetworkLog>,
    actual: Option<&runner_core::net::NetworkLog>,
) -> Vec<ExchangeComparison> {
    use runner_core::net::Exchange;
    let e = expected.map_or(&[][..], |n| n.exchanges.as_slice());
    let a = actual.map_or(&[][..], |n| n.exchanges.as_slice());
    let answer = |x: &Exchange| match (&x.refusal, x.allowed()) {
        (_, true) => format!(
            "{} {}",
            x.status.map_or("-".to_owned(), |s| s.to_string()),
            x.response_sha256.as_deref().unwrap_or("-")
        ),
        (Some(code), false) => format!("refused {code}"),
        (None, false) => "refused".to_owned(),
    };
    let request = |x: &Exchange| {
        format!(
            "{} {} {} head {}",
            x.method,
            x.url,
            x.request_sha256,
            x.request_head_sha256.as_deref().unwrap_or("-")
        )
    };
    (0..e.len().max(a.len()))
        .filter_map(|i| {
            let (verdict, expected, actual, base) = match (e.get(i), a.get(i)) {
                (Some(x), Some(y)) if request(x) != request(y) => {
                    ("different_request", request(x), request(y), x)
                }
                (Some(x), Some(y)) => {
                    let verdict = match (x.allowed(), y.allowed()) {
                        (true, true) if x.status != y.status => "changed_status",
                        (true, true) if x.response_sha256 != y.response_sha256 => "changed_body",
                        (true, false) => "now_refused",
                        (false, true) => "now_allowed",
                        (false, false) if x.refusal != y.refusal => "changed_refusal",
                        _ => "same",
                    };
                    (verdict, answer(x), answer(y), x)
                }
                (Some(x), None) => ("not_requested", answer(x), "absent".to_owned(), x),
                (None, Some(y)) => ("new_request", "absent".to_owned(), answer(y), y),
                (None, None) => return None,
            };
            Some(ExchangeComparison {
                seq: base.seq,
                method: base.method.clone(),
                url: base.url.clone(),
                verdict,
                expected,
                actual,
            })
        })
        .collect()
}

/// Inputs whose bytes differ from the pin, each as a DRIFT entry.
fn input_drift(lock: &Lock, inputs: &InputsRoot) -> Vec<OutputComparison> {
    let mut out = Vec::new();
    for input in &lock.inputs {
        let actual = match crate::stage::hash_input(inputs, &input.path) {
            Ok(sha) => tag(&sha),
            Err(e) => format!("unavailable: {e}"),
        };
        if actual != input.sha256 {
            out.push(OutputComparison {
                name: format!("input {}", input.path),
                expected: input.sha256.clone(),
                actual,
                verdict: OutputVerdict::Drift,
            });
        }
    }
    out
}

/// Output by output: stdout, stderr, exit code, outcome, then every artifact path in
/// either lock.
pub fn compare(expected: &Lock, actual: &Lock) -> Vec<OutputComparison> {
    let entry = |name: String, e: String, a: String| {
        let verdict = if e == a {
            OutputVerdict::Match
        } else {
            OutputVerdict::Drift
        };
        OutputComparison {
            name,
            expected: e,
            actual: a,
            verdict,
        }
    };
    let (e, a) = (&expected.outputs, &actual.outputs);
    let mut out = vec![
        entry(
            "stdout".into(),
            e.stdout.sha256.clone(),
            a.stdout.sha256.clone(),
        ),
        entry(
            "stderr".into(),
            e.stderr.sha256.clone(),
            a.stderr.sha256.clone(),
        ),
        entry(
            "exit_code".into(),
            e.exit_code.to_string(),
            a.exit_code.to_string(),
        ),
        entry("outcome".into(), e.outcome.clone(), a.outcome.clone()),
    ];
    // The exchanges the guest made, each answered from the recording: what was asked
    // and what was given must be the recording's.
    if expected.network.is_some() || actual.network.is_some() {
        let digest = |l: &Lock| {
            l.network.as_ref().map_or("absent".to_owned(), |n| {
                let asked: Vec<_> = n
                    .exchanges
                    .iter()
                    .map(|x| {
                        (
                            &x.method,
                            &x.url,
                            &x.request_sha256,
                            &x.request_head_sha256,
                            &x.verdict,
                            &x.refusal,
                            x.status,
                            &x.response_sha256,
                        )
                    })
                    .collect();
                tag(&runner_core::digest::sha256_hex(
                    &serde_json::to_vec(&asked).unwrap_or_default(),
                ))
            })
        };
        out.push(entry(
            "network exchanges".into(),
            digest(expected),
            digest(actual),
        ));
    }
    let mut paths: Vec<&str> = e
        .artifacts
        .iter()
        .chain(&a.artifacts)
        .map(|x| x.path.as_str())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    for p in paths {
        let find = |l: &OutputsPin| {
            l.artifacts
                .iter()
                .find(|x| x.path == p)
                .map_or("absent".to_owned(), |x| x.sha256.clone())
        };
        out.push(entry(format!("artifact {p}"), find(e), find(a)));
    }
    out
}

/// Why the environment a request would run with now is not available (a replay's
/// `environment` pin then reads `unavailable (…)`).
#[derive(Debug, thiserror::Error)]
enum EnvironmentNow {
    #[error("the policy in force declares no environment `{0}`")]
    Undeclared(String),
    #[error(transparent)]
    Env(crate::environment::EnvError),
}

/// The module the lock's run ran: the plain one (every lock before the pre-initialised
/// guest, and runs it did not apply to) or that pre-initialised one.
fn pinned_module(lock: &Lock) -> crate::guest::preinit::Choice {
    match lock
        .runtime
        .guest
        .as_ref()
        .and_then(|g| g.preinit_sha256.as_ref())
    {
        None => crate::guest::preinit::Choice::Plain,
        Some(sha) => crate::guest::preinit::Choice::Pinned(
            sha.strip_prefix("sha256:").unwrap_or(sha).to_owned(),
        ),
    }
}
