//! What can stop a run before its result exists, one enum per stage. Each error knows
//! its process exit code ([`runner_contract::exit_codes`]) and a stable reason code: the `code` of
//! the reason `runner exec --json` prints, which hosts branch on. A run that got as far
//! as the sandbox always ends in a result (whatever the guest did); these are the
//! failures around it.

use crate::beside::BesideError;
use crate::guest::GuestError;
use crate::result::PublishError;
use crate::stage::StageError;
use runner_contract::exit_codes;
use runner_core::request::Reason;
use runner_sandbox::BackendError;
use std::io;
use std::path::PathBuf;

/// Reading and judging the request.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the request is {size} bytes; the policy allows at most {max}")]
    TooLarge { size: u64, max: u64 },
    /// The validator's or the approval's reasons, every one of them.
    #[error("the request was rejected ({} reasons)", .0.len())]
    Rejected(Vec<Reason>),
}

/// Making the engine ready: locating (or fetching) and compiling the guest, finding the
/// monty worker. Nothing depends on the inputs yet.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Guest(#[from] GuestError),
    #[error(transparent)]
    Engine(BackendError),
    #[error(transparent)]
    MontyWorker(BackendError),
    /// The request's package environment is not installed, or its tree was modified.
    #[error(transparent)]
    Environment(#[from] crate::environment::EnvError),
}

/// Setting up the run's directories: the results directory, the run directory, the
/// inputs, the `/out` tmpfs.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    ResultsDir(PublishError),
    #[error(transparent)]
    RunDir(StageError),
    #[error(transparent)]
    Inputs(StageError),
    #[error(transparent)]
    OutMount(BackendError),
    /// The run's clock start or seed could not be drawn (`[determinism]`).
    #[error("cannot draw the run's clock start and seed: {0}")]
    Determinism(std::io::Error),
    /// The run's network door (exchange directory, broker) could not be set up.
    #[error("network: {0}")]
    Network(Box<super::network::NetworkSetupError>),
    /// A replayed lock ran a pre-initialised guest module that is not available here.
    #[error(transparent)]
    Preinit(crate::guest::preinit::Unavailable),
}

/// Collecting `/out` and publishing the result (the message names the results
/// directory: that is where the operator looks).
#[derive(Debug, thiserror::Error)]
#[error("results directory {}: {cause}", dir.display())]
pub struct PublishFailure {
    pub dir: PathBuf,
    pub cause: PublishCause,
}

/// What went wrong while publishing.
#[derive(Debug, thiserror::Error)]
pub enum PublishCause {
    /// Staging, writing or renaming the result's files.
    #[error(transparent)]
    Staging(#[from] crate::result::PublishError),
    #[error("collecting /out: {0}")]
    Collect(std::io::Error),
    /// A response body the guest was given could not be read back for the result.
    #[error("reading the recorded body {}: {source}", path.display())]
    RecordedBody {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Any failure of the pipeline before a result exists.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Judge(#[from] JudgeError),
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The sandbox itself failed (not the guest: a guest's failure is an outcome).
    #[error("{0}")]
    Sandbox(#[from] BackendError),
    #[error(transparent)]
    Publish(#[from] PublishFailure),
    /// Usage of the pipeline (a signing key that cannot be read).
    #[error("{message}")]
    Usage { code: &'static str, message: String },
}

impl RunError {
    /// The process exit code this failure maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Judge(JudgeError::Unreadable { .. }) => exit_codes::IO,
            Self::Judge(_) => exit_codes::REJECT,
            Self::Setup(SetupError::Inputs(e)) if !is_io(e) => exit_codes::INPUT_MISMATCH,
            Self::Usage { .. } => exit_codes::USAGE,
            Self::Prepare(_) | Self::Setup(_) | Self::Sandbox(_) | Self::Publish(_) => {
                exit_codes::IO
            }
        }
    }

    /// The stable reason code (for a rejected request: the first reason's).
    pub fn reason_code(&self) -> &'static str {
        match self {
            Self::Judge(JudgeError::Unreadable { .. }) => "io.unreadable",
            Self::Judge(JudgeError::TooLarge { .. }) => "request.too_large",
            Self::Judge(JudgeError::Rejected(_)) => "request.rejected",
            Self::Prepare(PrepareError::MontyWorker(_)) => "backend.unavailable",
            Self::Prepare(PrepareError::Environment(crate::environment::EnvError::Tampered {
                ..
            })) => "environment.tampered",
            Self::Prepare(PrepareError::Environment(_)) => "environment.unavailable",
            Self::Prepare(_) => "guest.unavailable",
            Self::Setup(SetupError::ResultsDir(PublishError::ResultsDir(
                BesideError::NotARealDir { .. },
            ))) => "result.dir_symlink",
            Self::Setup(SetupError::ResultsDir(_)) => "result.write",
            Self::Setup(SetupError::RunDir(_)) => "stage.run_dir",
            Self::Setup(SetupError::OutMount(_)) => "stage.out_mount",
            Self::Setup(SetupError::Determinism(_)) => "stage.determinism",
            Self::Setup(SetupError::Network(_)) => "network.setup",
            Self::Setup(SetupError::Preinit(_)) => "guest.unavailable",
            Self::Setup(SetupError::Inputs(e)) => stage_reason(e),
            Self::Sandbox(_) => "backend.failed",
            Self::Publish(_) => "result.write",
            Self::Usage { code, .. } => code,
        }
    }

    /// Every reason, as `runner exec` reports them: a rejected request keeps each of
    /// the validator's reasons (with their lines); anything else is one reason.
    pub fn reasons(&self) -> Vec<Reason> {
        match self {
            Self::Judge(JudgeError::Rejected(reasons)) => reasons.clone(),
            other => vec![Reason::new(other.reason_code(), other.to_string(), None)],
        }
    }
}

fn is_io(e: &StageError) -> bool {
    matches!(e, StageError::RunDir(_) | StageError::Copy { .. })
}

fn stage_reason(e: &StageError) -> &'static str {
    match e {
        StageError::Missing { .. } => "stage.input_missing",
        StageError::Symlink { .. } => "stage.input_symlink",
        StageError::NotRegular { .. } => "stage.input_not_regular",
        StageError::HashMismatch { .. } => "stage.input_hash_mismatch",
        StageError::InputsDir(BesideError::Io { .. }) => "stage.inputs_dir",
        StageError::InputsDir(BesideError::NotARealDir { .. }) => "stage.inputs_dir_symlink",
        StageError::Hardlinked { .. } => "stage.input_hardlinked",
        StageError::RunDir(_) | StageError::Copy { .. } => "stage.io",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_maps_to_its_documented_exit_code() {
        let unreadable = RunError::from(JudgeError::Unreadable {
            path: "TR-x.md".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
        assert_eq!(unreadable.exit_code(), exit_codes::IO);
        assert_eq!(unreadable.reason_code(), "io.unreadable");
        let large = RunError::from(JudgeError::TooLarge { size: 9, max: 8 });
        assert_eq!(large.exit_code(), exit_codes::REJECT);
        assert_eq!(
            large.to_string(),
            "the request is 9 bytes; the policy allows at most 8"
        );
        let missing = RunError::from(SetupError::Inputs(StageError::Missing {
            path: "a.csv".into(),
            dir: "inputs".into(),
        }));
        assert_eq!(missing.exit_code(), exit_codes::INPUT_MISMATCH);
        assert_eq!(missing.reason_code(), "stage.input_missing");
        let copy = RunError::from(SetupError::Inputs(StageError::RunDir(io::Error::other(
            "disk full",
        ))));
        assert_eq!(copy.exit_code(), exit_codes::IO);
        assert_eq!(copy.reason_code(), "stage.io");
        let rejected = RunError::from(JudgeError::Rejected(vec![
            Reason::new("a.b", "one", Some(3)),
            Reason::new("c.d", "two", None),
        ]));
        assert_eq!(rejected.exit_code(), exit_codes::REJECT);
        let reasons = rejected.reasons();
        assert_eq!(reasons.len(), 2);
        assert_eq!(
            (reasons[0].code.as_str(), reasons[0].line),
            ("a.b", Some(3))
        );
    }
}
