//! `runner serve --inbox DIR --results DIR [--quarantine DIR] [--jobs N] [--json]`: a
//! long-running host that runs every request renamed into the inbox (see
//! [`runner_serve`] for the protocol, the claims and the signals).
//!
//! Output: for each request handled, its result's path on stdout (or with `--json` one
//! JSON object per line, schema `schemas/serve.json`); what the host does, and why a
//! request is quarantined or retried, on stderr as log lines.

use runner_contract::exit_codes;
use runner_contract::verdict::ServeVerdict;
use runner_core::policy::Policy;
use runner_pipeline::pipeline::Pipeline;
#[cfg(feature = "metrics")]
use runner_serve::metrics::{self, Metrics};
use runner_serve::{Config, Handled, Level, Observer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner serve --inbox /srv/tool-exec/inbox --results /srv/tool-exec/results --jobs 2
  runner serve --inbox inbox --results results --json --log-format json
  runner serve --inbox inbox --results results --metrics 127.0.0.1:9464
  runner serve --nats nats://127.0.0.1:4222 --jobs 2 --json

Submit a request by writing its inputs into INBOX/<stem>.inputs/, renaming its .sig in
(when signed), then renaming TR-….md in: the .md appearing is the commit point. Each is
run once, its result written as `runner exec` writes it, and the request moved to
INBOX/done/ (a rejected one, with its reasons, to quarantine).

SIGTERM or SIGINT: stop claiming, finish the running requests, exit 0. A second signal:
exit at once with 128 + the signal number; the running requests stay claimed and run
again when a host starts.")]
pub struct ServeCommand {
    /// The inbox to watch (it must exist). Example: `--inbox /srv/tool-exec/inbox`.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "nats",
        conflicts_with = "nats"
    )]
    pub inbox: Option<PathBuf>,
    /// Directory to write the results into (created if missing; with `--inbox`).
    /// Example: `--results /srv/tool-exec/results`.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "nats",
        conflicts_with = "nats"
    )]
    pub results: Option<PathBuf>,
    /// Where rejected requests go, each with `NAME.reasons.md` and `NAME.reasons.json`
    /// (default: `INBOX/quarantine/`). Example: `--quarantine /srv/tool-exec/quarantine`.
    #[arg(long, value_name = "DIR", conflicts_with = "nats")]
    pub quarantine: Option<PathBuf>,
    /// Take requests from NATS JetStream instead of an inbox: a durable pull consumer on
    /// `toolexec.requests`, inputs from the object store bucket `toolexec-inputs`, results
    /// into `toolexec-results` and summaries on `toolexec.results.<request_id>` (see the
    /// README). Example: `--nats nats://127.0.0.1:4222`.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// With `--nats`: the durable consumer's name, shared by every host of a deployment.
    /// Example: `--consumer runner`.
    #[arg(long, value_name = "NAME", default_value = "runner", requires = "nats")]
    pub consumer: String,
    /// With `--nats`: at the N-th delivery of a request that failed for reasons not its
    /// own, publish it on `toolexec.dead` instead of retrying. Example: `--max-deliver 5`.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "nats",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_deliver: u32,
    /// With `--nats`: seconds the server waits for an ack before redelivering to another
    /// host (a running request extends it every third of it). Example: `--ack-wait 30`.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, requires = "nats",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub ack_wait: u32,
    /// Run up to N requests at once (each in its own worker process). Example: `--jobs 2`.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: u32,
    /// Sign every run's in-toto statement with this Ed25519 private key (PKCS#8 PEM).
    /// Example: `--sign-key keys/ci.key`.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// Serve Prometheus metrics on `http://ADDR/metrics` (and `/healthz`): requests by
    /// verdict and outcome, latency from the `.md` appearing to the result published,
    /// queue depth, worker failures. A port alone binds loopback. Example: `--metrics
    /// 127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR", value_parser = parse_metrics_addr)]
    pub metrics: Option<SocketAddr>,
    /// Print one JSON object per request handled (JSON Lines, schema: schemas/serve.json)
    /// instead of result paths. Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// `PORT` (loopback) or `IP:PORT`.
fn parse_metrics_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse::<SocketAddr>()
        .map_err(|e| format!("{e}: give PORT or IP:PORT, for example 127.0.0.1:9464"))
}

/// Prints each request handled, logs the host's messages, counts for the metrics.
struct Printer {
    json: bool,
    #[cfg(feature = "metrics")]
    metrics: Option<Arc<Metrics>>,
}

impl Observer for Printer {
    fn queue_depth(&self, _depth: usize) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.set_queue_depth(_depth);
        }
    }

    fn handled(&self, handled: &Handled) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.observe(handled);
        }
        if self.json {
            super::print_json(handled);
            return;
        }
        match (handled.verdict, &handled.run.result_path) {
            (ServeVerdict::Accept, Some(path)) => {
                super::print_stdout(&format!("{path}\n"));
                super::output::note(format!(
                    "{}: {}{}",
                    handled.request,
                    handled
                        .run
                        .outcome
                        .map_or("published before a restart", |k| k.as_str()),
                    handled
                        .moved_to
                        .as_deref()
                        .map(|m| format!(", moved to {m}"))
                        .unwrap_or_default()
                ));
            }
            (ServeVerdict::Reject, _) => {
                let codes: Vec<&str> = handled.reasons.iter().map(|r| r.code.as_str()).collect();
                super::output::warning(format!(
                    "{}: quarantined ({}){}",
                    handled.request,
                    codes.join(", "),
                    handled
                        .moved_to
                        .as_deref()
                        .map(|m| format!(" as {m}"))
                        .unwrap_or_default()
                ));
            }
            _ => {}
        }
    }

    fn log(&self, level: Level, message: &str) {
        match level {
            Level::Info => super::output::note(message),
            Level::Warn => super::output::warning(message),
            Level::Error => super::output::error(message),
        }
    }
}

/// An option of a part this binary was built without: said, exit code USAGE.
#[cfg(not(all(feature = "metrics", feature = "nats")))]
fn built_without(feature: &str, option: &str) -> i32 {
    super::output::error(format!(
        "{option}: this runner was built without its `{feature}` feature (cargo build --features {feature})"
    ));
    exit_codes::USAGE
}

impl ServeCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        // Before any thread starts (the metrics responder), so all of them block the
        // stop signals and the host reads them.
        if let Err(e) = runner_serve::block_signals() {
            super::output::error(format!("cannot block SIGTERM and SIGINT: {e}"));
            return exit_codes::INTERNAL;
        }
        #[cfg(not(feature = "metrics"))]
        if self.metrics.is_some() {
            return built_without("metrics", "--metrics");
        }
        #[cfg(not(feature = "nats"))]
        if self.nats.is_some() {
            return built_without("nats", "--nats");
        }
        #[cfg(feature = "metrics")]
        let metrics = match self.metrics {
            None => None,
            Some(addr) => {
                let m = Arc::new(Metrics::new());
                match metrics::serve_http(addr, Arc::clone(&m)) {
                    Ok(bound) => {
                        super::output::note(format!("metrics on http://{bound}/metrics"));
                        Some(m)
                    }
                    Err(e) => {
                        super::output::error(format!("cannot listen on {addr} for metrics: {e}"));
                        return exit_codes::IO;
                    }
                }
            }
        };
        let pipeline = match Pipeline::for_command(policy, self.sign_key.as_deref(), None) {
            Ok(pipeline) => pipeline,
            Err(e) => {
                super::output::error(format!("{}: {e}", e.reason_code()));
                return e.exit_code();
            }
        };
        let jobs = usize::try_from(self.jobs).unwrap_or(1);
        // A host runs requests all day: its workers start ahead of them.
        pipeline.set_warm_workers(runner_pipeline::report::warm_workers(jobs.max(1)));
        #[cfg(feature = "metrics")]
        if let Some(m) = &metrics {
            m.watch_workers(pipeline.worker_counters());
        }
        let printer = Printer {
            json: self.json,
            #[cfg(feature = "metrics")]
            metrics,
        };
        // The pools start now, not at the first request of each kind, in a thread of
        // their own: claiming starts at once (a request that comes first waits for the
        // same preparation, which is done once), and a start-up error is said at once,
        // not after a guest's first fetch and compile (seconds to minutes with a cold
        // cache).
        let pipeline = Arc::new(pipeline);
        let warming = Arc::clone(&pipeline);
        let warm_up = std::thread::Builder::new()
            .name("runner-warm-up".into())
            .spawn(move || {
                if let Err(e) = warming.warm_up() {
                    super::output::warning(format!(
                        "warm workers not started ahead ({e}); the first request starts them"
                    ));
                }
            })
            .map_err(|e| {
                super::output::warning(format!(
                    "warm workers not started ahead (no thread for it: {e}); the first request starts them"
                ));
            })
            .ok();
        let code = match self.serve_with(&pipeline, &printer, jobs) {
            None => {
                super::output::error("give --inbox DIR --results DIR, or --nats URL");
                exit_codes::USAGE
            }
            Some(Ok(runner_serve::Stopped::Graceful)) => exit_codes::OK,
            Some(Err(e)) => {
                super::output::error(e);
                exit_codes::IO
            }
        };
        // The warm-up ends before the process does (a fetch or compile cut short would
        // leave its temporaries behind); the host says so, and a further stop signal
        // ends it at once.
        if let Some(warm_up) = warm_up {
            if !warm_up.is_finished() {
                let _ = runner_serve::unblock_signals();
                super::output::note(
                    "waiting for the warm-up (a guest's first fetch or compile) to end before exiting; \
                     a further SIGTERM or SIGINT stops at once",
                );
            }
            let _ = warm_up.join();
        }
        code
    }

    /// Serve the inbox or the NATS stream until stopped; `None`: neither was given.
    fn serve_with(
        self,
        pipeline: &runner_pipeline::pipeline::Pipeline,
        printer: &Printer,
        jobs: usize,
    ) -> Option<Result<runner_serve::Stopped, runner_serve::ServeError>> {
        match (self.nats, self.inbox, self.results) {
            #[cfg(feature = "nats")]
            (Some(url), _, _) => {
                let config = runner_serve::nats::NatsConfig {
                    url,
                    consumer: self.consumer,
                    jobs,
                    max_deliver: self.max_deliver,
                    ack_wait: std::time::Duration::from_secs(u64::from(self.ack_wait)),
                };
                Some(runner_serve::nats::run(&config, pipeline, printer))
            }
            (None, Some(inbox), Some(results)) => {
                let config = Config {
                    inbox,
                    results,
                    quarantine: self.quarantine,
                    jobs,
                };
                Some(runner_serve::run(&config, pipeline, printer))
            }
            // clap requires --inbox and --results without --nats.
            _ => None,
        }
    }
}
