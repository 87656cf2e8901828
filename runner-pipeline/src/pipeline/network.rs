//! A run granted `network: allowlist`: its exchange directory, the read-only
//! `sitecustomize.py` that wires urllib to it (ERA guests) or the `fetch` of the Monty
//! worker, and the broker serving it ([`crate::net`]).

use super::SetupError;
use super::prepare::Run;
use crate::net::broker::{Broker, Source};
use crate::net::{self, Exchange};
use crate::policy::Policy;
use crate::stage::RunDir;
use runner_sandbox::runtime::ReadOnlyMount;
use std::path::PathBuf;

/// A baseline's recording, for a replay: its exchanges and the directory holding its
/// bodies (the baseline result's own directory).
#[derive(Debug, Clone)]
pub struct Recording {
    pub exchanges: Vec<Exchange>,
    pub bodies: PathBuf,
}

/// Gives `program` its network door (an ERA guest: `/net` and the urllib handler; Monty:
/// its worker's `fetch`) and starts the broker; `Ok(None)` for a run without network.
///
/// # Ambient authority
/// Creates directories and files under the run directory (and its `/out` tmpfs); the
/// broker it starts uses the network as [`Broker::start`] says.
pub(super) fn start(
    policy: &Policy,
    allowlist: bool,
    recording: Option<&Recording>,
    run: &RunDir,
    program: &mut Run,
) -> Result<Option<Broker>, SetupError> {
    if !allowlist {
        return Ok(None);
    }
    let fail = |m: String| SetupError::Network(m);
    let exchange = run.out_dir.join(runner_sandbox::runtime::NET_IN_OUT);
    std::fs::create_dir(&exchange)
        .map_err(|e| fail(format!("cannot create {}: {e}", exchange.display())))?;
    match program {
        // Monty code calls `fetch(...)`, which its worker answers through the same
        // exchange directory.
        Run::Monty { program, .. } => program.network = true,
        Run::Era { program: guest, .. } => {
            let lib = run.path().join("net-lib");
            std::fs::create_dir(&lib)
                .and_then(|()| std::fs::write(lib.join("sitecustomize.py"), net::SITECUSTOMIZE))
                .map_err(|e| fail(format!("cannot write {}: {e}", lib.display())))?;
            guest.runtime.mounts.push(ReadOnlyMount {
                host: lib,
                guest: net::GUEST_LIB.into(),
            });
            guest
                .runtime
                .env
                .push(("PYTHONPATH".into(), net::GUEST_LIB.into()));
            // The guest waits a little longer than the broker's own timeout for an answer.
            guest.runtime.env.push((
                "RUNNER_NET_WAIT_SEC".into(),
                (policy.network.timeout_sec + 5).to_string(),
            ));
            guest.runtime.exchange = Some(net::GUEST_EXCHANGE.into());
        }
    }
    let source = match recording {
        Some(r) => Source::Replay {
            recorded: r.exchanges.clone(),
            bodies: r.bodies.clone(),
        },
        None => Source::Live,
    };
    Broker::start(
        policy.network.clone(),
        exchange,
        run.path().join("net-bodies"),
        source,
    )
    .map(Some)
    .map_err(fail)
}

/// Removes the exchange directory from `/out` (never an output).
///
/// # Ambient authority
/// Removes a path under the run's own `out/`.
pub(super) fn remove_exchange(run: &RunDir) {
    let dir = run.out_dir.join(runner_sandbox::runtime::NET_IN_OUT);
    if std::fs::symlink_metadata(&dir).is_ok() {
        let _ = std::fs::remove_dir_all(&dir).or_else(|_| std::fs::remove_file(&dir));
    }
}
