//! A run granted `network: allowlist`: its exchange directory, the read-only
//! `sitecustomize.py` that wires urllib to it (ERA guests) or the `fetch` of the Monty
//! worker, and the broker serving it ([`crate::net`]).

use super::SetupError;
use super::prepare::Run;
use crate::net;
use crate::net::broker::{Broker, BrokerError, Source};
use crate::stage::RunDir;
use runner_core::net::Exchange;
use runner_core::policy::Policy;
use runner_sandbox::runtime::ReadOnlyMount;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A baseline's recording, for a replay: its exchanges and the directory holding its
/// bodies (the baseline result's own directory), opened (or why it could not be: each
/// exchange then finds no body, and says so).
#[derive(Debug)]
pub struct Recording {
    pub exchanges: Vec<Exchange>,
    pub bodies: std::io::Result<cap_std::fs::Dir>,
}

/// Gives `program` its network door (an ERA guest: `/net` and the urllib handler; Monty:
/// its worker's `fetch`) and starts the broker; `Ok(None)` for a run without network.
///
/// Everything is made through the run directory's handles ([`RunDir::dir`],
/// [`RunDir::out`], the latter after the `/out` tmpfs is mounted); the paths built
/// here are for the guest's mounts. The broker it starts uses the network as
/// [`Broker::start`] says, until the run's time limit `wall` from now at the latest.
pub(super) fn start(
    policy: &Policy,
    allowlist: bool,
    recording: Option<&Recording>,
    run: &RunDir,
    program: &mut Run,
    wall: Duration,
) -> Result<Option<Broker>, SetupError> {
    if !allowlist {
        return Ok(None);
    }
    // Taken before the guest starts: the broker's deadline is never later than the
    // worker's.
    let deadline = Instant::now() + wall;
    let exchange_path = run.out_dir.join(runner_sandbox::runtime::NET_IN_OUT);
    let exchange = run
        .out()
        .and_then(|out| {
            out.create_dir(runner_sandbox::runtime::NET_IN_OUT)?;
            out.open_dir(runner_sandbox::runtime::NET_IN_OUT)
        })
        .map_err(NetworkSetupError::io("create", &exchange_path))?;
    match program {
        // Monty code calls `fetch(...)`, which its worker answers through the same
        // exchange directory.
        Run::Monty { program, .. } => program.network = true,
        Run::Era { program: guest, .. } => {
            let lib = run.path().join(NET_LIB);
            run.dir()
                .create_dir(NET_LIB)
                .and_then(|()| run.dir().open_dir(NET_LIB))
                .and_then(|dir| dir.write("sitecustomize.py", net::SITECUSTOMIZE))
                .map_err(NetworkSetupError::io("write", &lib))?;
            guest.runtime.mounts.push(ReadOnlyMount {
                host: lib,
                guest: net::GUEST_LIB.into(),
            });
            // First on the one PYTHONPATH: its sitecustomize is the one imported.
            crate::guest::site::add_python_path(&mut guest.runtime.env, &[net::GUEST_LIB], &[]);
            // The guest waits a little longer than the broker's own timeout for an answer.
            guest.runtime.env.push((
                "RUNNER_NET_WAIT_SEC".into(),
                (policy.network.timeout_sec + 5).to_string(),
            ));
            guest.runtime.exchange = Some(net::GUEST_EXCHANGE.into());
        }
    }
    let bodies_path = run.path().join(NET_BODIES);
    let bodies = run
        .dir()
        .create_dir(NET_BODIES)
        .and_then(|()| run.dir().open_dir(NET_BODIES))
        .map_err(NetworkSetupError::io("create", &bodies_path))?;
    let source = match recording {
        Some(r) => Source::Replay {
            recorded: r.exchanges.clone(),
            bodies: r
                .bodies
                .as_ref()
                .map_err(super::replay::copy_error)
                .and_then(|d| d.try_clone()),
        },
        None => Source::Live,
    };
    Broker::start(policy.network.clone(), exchange, bodies, source, deadline)
        .map(Some)
        .map_err(|e| NetworkSetupError::Broker(e).into())
}

/// Why a run's network door could not be set up ([`SetupError::Network`]).
#[derive(Debug, thiserror::Error)]
pub enum NetworkSetupError {
    /// An entry of the exchange (`/out/.net`, the guest's `net-lib`, the bodies) could not
    /// be made.
    #[error("cannot {action} {}: {source}", path.display())]
    Entry {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Broker(BrokerError),
}

impl NetworkSetupError {
    /// Maps an I/O error of `action` on `path` (shown in the message).
    fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SetupError + 'a {
        move |source| {
            NetworkSetupError::Entry {
                action,
                path: path.to_owned(),
                source,
            }
            .into()
        }
    }
}

impl From<NetworkSetupError> for SetupError {
    fn from(e: NetworkSetupError) -> Self {
        SetupError::Network(Box::new(e))
    }
}

/// The run directory's entry holding the read-only `sitecustomize.py` (ERA guests).
const NET_LIB: &str = "net-lib";
/// The run directory's entry where the broker keeps the response bodies.
pub(super) const NET_BODIES: &str = "net-bodies";

/// Removes the exchange directory from `/out` (never an output).
pub(super) fn remove_exchange(run: &RunDir) {
    if let Ok(out) = run.out() {
        crate::stage::remove_entry(&out, runner_sandbox::runtime::NET_IN_OUT);
    }
}
