//! What goes wrong around a worker process that is not the guest's doing: starting it,
//! talking to it, supervising it, and the worker's own steps before its guest runs.
//! (A guest that fails, times out or runs out of memory is an [`crate::Outcome`].)
//! [`crate::BackendError::Worker`] carries it and shows it as `worker: …`.

use super::{MAX_REQUEST_BYTES, WorkerBinary};
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Why a worker could not run its guest.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    // The runner's side: finding, starting and supervising the worker.
    /// The worker binary is not a file (`binary` says how to build it).
    #[error(
        "cannot start the {} {}: it is missing; build it with `{}` (or `just build`), or set {}",
        binary.what, exe.display(), binary.build, binary.env
    )]
    Missing { binary: WorkerBinary, exe: PathBuf },
    /// The path of the running executable, next to which the worker lies, is unknown.
    #[error("cannot locate the runner binary: {0}")]
    LocateRunner(#[source] io::Error),
    /// The worker process could not be started.
    #[error("cannot start {}: {source}", exe.display())]
    Spawn {
        exe: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The request could not be encoded as JSON for the worker's stdin.
    #[error("cannot encode the request: {0}")]
    EncodeRequest(#[source] serde_json::Error),
    /// The worker's process id does not fit a `pid_t`.
    #[error("worker pid out of range")]
    PidOutOfRange(u32),
    /// Waiting for the worker to exit failed.
    #[error("waiting for the worker: {0}")]
    Wait(#[source] nix::errno::Errno),
    /// Reaping the exited worker failed.
    #[error("reaping the worker: {0}")]
    Reap(#[source] io::Error),
    /// A warm worker ended before it took its request, and was not retried.
    #[error("the warm worker ended ({status}) before it read its request")]
    NotDelivered { status: ExitStatus },
    /// The worker could not run the guest and said why in its reply
    /// ([`super::WorkerReply::Error`]): the one free-form message, since it is the
    /// worker's own error shown as text across the process boundary.
    #[error("{0}")]
    Reported(String),

    // The worker's side: its request, its captures, what it starts for the guest.
    /// Reading the request from stdin failed.
    #[error("cannot read the request: {0}")]
    ReadRequest(#[source] io::Error),
    /// The request is over [`MAX_REQUEST_BYTES`].
    #[error("request larger than {MAX_REQUEST_BYTES} bytes")]
    RequestTooLarge,
    /// The request is not the worker's JSON.
    #[error("malformed request: {0}")]
    MalformedRequest(#[source] serde_json::Error),
    /// A capture file (`capture_dir/stdout`, `capture_dir/stderr`) could not be written.
    #[error("cannot write {}: {source}", path.display())]
    WriteCapture {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A directory the guest is handed could not be opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A thread the guest runs on or with (`what`: "the interpreter", "async runtime",
    /// "epoch ticker") could not be started.
    #[error("cannot start {what}: {source}")]
    StartThread {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// A step of the engine's own, typed by the engine's crate (whose types this crate
    /// cannot name: `runner_wasmtime::engine::GuestSetupError`,
    /// `runner-monty`'s mount table).
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// Each variant's text is the message it replaced, byte for byte: users, logs and
    /// the result's Safety Notes read them.
    #[test]
    fn messages_are_the_ones_they_replaced() {
        let io = || io::Error::from_raw_os_error(2);
        let json = || serde_json::from_str::<u8>("x").unwrap_err();
        let binary = WorkerBinary {
            env: "RUNNER_MONTY_WORKER",
            bin: "runner-monty-worker",
            what: "Monty worker",
            build: "cargo build --release -p runner-monty --ignore-rust-version",
        };
        let cases: Vec<(WorkerError, String)> =
            vec![
            (
                WorkerError::Missing {
                    binary,
                    exe: "/x/runner-monty-worker".into(),
                },
                "cannot start the Monty worker /x/runner-monty-worker: it is missing; build it \
                 with `cargo build --release -p runner-monty --ignore-rust-version` (or `just \
                 build`), or set RUNNER_MONTY_WORKER"
                    .into(),
            ),
            (
                WorkerError::LocateRunner(io()),
                format!("cannot locate the runner binary: {}", io()),
            ),
            (
                WorkerError::Spawn {
                    exe: "/x/w".into(),
                    source: io(),
                },
                format!("cannot start /x/w: {}", io()),
            ),
            (
                WorkerError::EncodeRequest(json()),
                format!("cannot encode the request: {}", json()),
            ),
            (WorkerError::PidOutOfRange(u32::MAX), "worker pid out of range".into()),
            (
                WorkerError::Wait(nix::errno::Errno::ECHILD),
                "waiting for the worker: ECHILD: No child processes".into(),
            ),
            (
                WorkerError::Reap(io()),
                format!("reaping the worker: {}", io()),
            ),
            (
                WorkerError::NotDelivered {
                    status: ExitStatus::from_raw(9),
                },
                "the warm worker ended (signal: 9 (SIGKILL)) before it read its request".into(),
            ),
            (WorkerError::Reported("worker: no luck".into()), "worker: no luck".into()),
            (
                WorkerError::ReadRequest(io()),
                format!("cannot read the request: {}", io()),
            ),
            (
                WorkerError::RequestTooLarge,
                "request larger than 8388608 bytes".into(),
            ),
            (
                WorkerError::MalformedRequest(json()),
                format!("malformed request: {}", json()),
            ),
            (
                WorkerError::WriteCapture {
                    path: "/r/capture/stdout".into(),
                    source: io(),
                },
                format!("cannot write /r/capture/stdout: {}", io()),
            ),
            (
                WorkerError::Open {
                    path: "/r/out/.net".into(),
                    source: io(),
                },
                format!("cannot open /r/out/.net: {}", io()),
            ),
            (
                WorkerError::StartThread {
                    what: "the interpreter",
                    source: io(),
                },
                format!("cannot start the interpreter: {}", io()),
            ),
            (
                WorkerError::Engine(Box::new(io())),
                io().to_string(),
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text, "{error:?}");
            assert_eq!(
                crate::BackendError::from(error).to_string(),
                format!("worker: {text}")
            );
        }
    }
}
