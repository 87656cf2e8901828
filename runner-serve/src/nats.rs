//! `runner serve --nats URL`: the same host as the inbox one, fed by a NATS JetStream
//! work queue instead of a directory. The engine coordinates the work (who takes which
//! request, redelivery, acknowledgement); the runner only runs what it is handed.
//!
//! **Subjects, streams, buckets** (created when missing, with these names):
//! - stream `TOOLEXEC` (work-queue retention) on `toolexec.requests`: one message per
//!   request, its body the request's bytes; the header `Runner-Approval` carries the
//!   request's `.sig` (the DSSE envelope) base64-encoded, when it is signed;
//! - a durable pull consumer (default name `runner`, shared by every host) that each
//!   host pulls one message per free worker from;
//! - object store bucket `toolexec-inputs`: each declared input is the object named by
//!   its sha256 hex; it is fetched and its bytes hashed: a missing object or other bytes
//!   is a refused input (a REJECT, as on disk);
//! - object store bucket `toolexec-results`: a result's files under their names in a
//!   results directory (`TS-….md`, `TS-….lock.json`, `TS-…/stdout`, …), then
//!   `index/<reuse key>` holding the summary (the commit point); a REJECT stores its
//!   summary as `rejected/<sha256 of the message body>`;
//! - stream `TOOLEXEC_RESULTS` on `toolexec.results.>`: the summary (one JSON object) is
//!   published on `toolexec.results.<request_id>` (`toolexec.results.rejected` when the
//!   request is not valid enough to have an id), and only then is the request acked;
//! - stream `TOOLEXEC_DEAD` on `toolexec.dead`: a request that failed for reasons not
//!   its own `max_deliver` times, with those reasons.
//!
//! **Redelivery.** Before running, a host looks up `index/<reuse key>` ([`runner_pipeline::reuse`]):
//! a request whose result is stored is answered with the stored summary (`"reused":
//! true`) and acked, not run again. While a request runs its host tells the server it is
//! in progress every third of `ack_wait`; a host that dies stops doing so and the server
//! redelivers the request after `ack_wait` to another host.
//!
//! **Failures.** A REJECT (invalid, unapproved, refused input) is a result: published
//! and acked. A failure that is not the request's (a sandbox that cannot start, the
//! object store unreachable) is nak'ed with a backoff (1 s doubling to 30 s); at the
//! `max_deliver`-th delivery it is published on `toolexec.dead` with its reasons and
//! terminated. The consumer itself redelivers without limit: the dead-letter decision is
//! the host's, so no request is dropped without a dead letter.

use super::{Handled, Level, Observer, RunFacts, ServeError, Stopped, is_refusal};
use async_nats::jetstream::{self, AckKind, consumer::pull, object_store, stream};
use base64::Engine as _;
use cap_std::fs::Dir;
use futures_util::StreamExt;
use runner_contract::outcome::OutcomeKind;
use runner_contract::verdict::ServeVerdict;
use runner_core::request::Reason;
use runner_pipeline::pipeline::{Pipeline, RunPlan};
use runner_pipeline::result::ResultsRoot;
use runner_pipeline::stage::InputsRoot;
use serde::Serialize;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::AsyncReadExt;

pub const REQUESTS_STREAM: &str = "TOOLEXEC";
pub const REQUESTS_SUBJECT: &str = "toolexec.requests";
pub const RESULTS_STREAM: &str = "TOOLEXEC_RESULTS";
pub const RESULTS_SUBJECT_PREFIX: &str = "toolexec.results";
pub const DEAD_STREAM: &str = "TOOLEXEC_DEAD";
pub const DEAD_SUBJECT: &str = "toolexec.dead";
pub const INPUTS_BUCKET: &str = "toolexec-inputs";
pub const RESULTS_BUCKET: &str = "toolexec-results";
/// The header carrying the request's `.sig` file, base64 (standard alphabet, padded).
pub const APPROVAL_HEADER: &str = "Runner-Approval";

/// How long to wait for the server on connect and on each call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one pull waits for a message before checking for a stop.
const PULL_WAIT: Duration = Duration::from_secs(1);

/// One NATS host's settings.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    pub url: String,
    /// The durable consumer's name (every host of one deployment uses the same).
    pub consumer: String,
    /// Requests run at once (each in its own worker process).
    pub jobs: usize,
    /// Deliveries after which a request failing for reasons not its own is dead-lettered.
    pub max_deliver: u32,
    /// How long the server waits for an ack (or an in-progress signal) before redelivering.
    pub ack_wait: Duration,
}

/// What a host publishes on `toolexec.results.<request_id>` and stores in the results
/// bucket: one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct NatsSummary {
    pub request_id: Option<String>,
    /// `sha256:` of the request's normalized text (of the raw bytes when it is not a
    /// valid request).
    pub request_sha256: String,
    /// ACCEPT (it ran; `result_id` names its files in `toolexec-results`) or REJECT.
    pub verdict: ServeVerdict,
    pub reasons: Vec<Reason>,
    pub result_id: Option<String>,
    /// The objects of the result in `toolexec-results`.
    pub objects: Vec<String>,
    pub outcome: Option<OutcomeKind>,
    pub exit_code: Option<i32>,
    pub runtime_sec: Option<f64>,
    /// The run's reuse key ([`runner_pipeline::reuse::key`]): its summary is `index/<key>`.
    pub reuse_key: Option<String>,
    /// True when this is a stored result answered again, not a new run.
    pub reused: bool,
    /// The delivery of the request message that produced this summary (1 = first).
    pub delivery: i64,
}

/// What a dead letter on `toolexec.dead` holds.
#[derive(Debug, Serialize)]
struct DeadLetter<'a> {
    request_id: Option<&'a str>,
    request_sha256: &'a str,
    stream_sequence: u64,
    deliveries: i64,
    reasons: &'a [Reason],
    /// The request message's body, base64.
    request_base64: String,
}

/// How one delivery ends.
enum Disposition {
    /// Published (ACCEPT, REJECT or reused): ack.
    Answered(NatsSummary),
    /// Not the request's fault: nak, or dead-letter at the last delivery.
    Failed {
        request_id: Option<String>,
        request_sha256: String,
        reasons: Vec<Reason>,
    },
}

struct Host<'a> {
    rt: tokio::runtime::Runtime,
    js: jetstream::Context,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    inputs: object_store::ObjectStore,
    results: object_store::ObjectStore,
    pipeline: &'a Pipeline,
    observer: &'a dyn Observer,
    config: &'a NatsConfig,
    stopping: AtomicBool,
    /// This host's scratch directory ([`crate::scratch`]): each request's directory.
    scratch: std::path::PathBuf,
}

fn nats_err(what: &str) -> impl Fn(String) -> ServeError + '_ {
    move |e| ServeError::Nats(format!("{what}: {e}"))
}

/// Runs a NATS host until a signal stops it.
///
/// # Ambient authority
/// Connects to the NATS server named; writes runs under the system temp directory.
pub fn run(
    config: &NatsConfig,
    pipeline: &Pipeline,
    observer: &dyn Observer,
) -> Result<Stopped, ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| nats_err("cannot start the async runtime")(e.to_string()))?;
    let (js, consumer, inputs, results) = rt.block_on(connect(config))?;
    let (scratch, swept) = super::host_scratch(pipeline)?;
    super::log_swept_scratch(observer, swept);
    let host = Host {
        scratch: scratch.path().to_owned(),
        rt,
        js,
        consumer,
        inputs,
        results,
        pipeline,
        observer,
        config,
        stopping: AtomicBool::new(false),
    };
    host.observer.log(
        Level::Info,
        &format!(
            "serving nats {} (stream {REQUESTS_STREAM}, consumer {}, {} at a time, max_deliver {}, ack_wait {} s)",
            config.url,
            config.consumer,
            config.jobs,
            config.max_deliver,
            config.ack_wait.as_secs_f64()
        ),
    );
    let stopped = std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1) {
            scope.spawn(|| host.work());
        }
        host.wait_for_signal()
    });
    host.observer
        .log(Level::Info, "stopped: every running request finished");
    drop(host);
    drop(scratch);
    Ok(stopped)
}

/// Connects, and creates the streams, buckets and consumer that are missing.
async fn connect(
    config: &NatsConfig,
) -> Result<
    (
        jetstream::Context,
        jetstream::consumer::Consumer<pull::Config>,
        object_store::ObjectStore,
        object_store::ObjectStore,
    ),
    ServeError,
> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(CALL_TIMEOUT)
        .name("runner serve")
        .connect(config.url.as_str())
        .await
        .map_err(|e| nats_err(&format!("cannot connect to {}", config.url))(e.to_string()))?;
    let js = jetstream::new(client);
    let requests = ensure_stream(
        &js,
        stream::Config {
            name: REQUESTS_STREAM.into(),
            subjects: vec![REQUESTS_SUBJECT.into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            ..Default::default()
        },
    )
    .await?;
    for (name, subject) in [
        (RESULTS_STREAM, format!("{RESULTS_SUBJECT_PREFIX}.>")),
        (DEAD_STREAM, DEAD_SUBJECT.to_owned()),
    ] {
        ensure_stream(
            &js,
            stream::Config {
                name: name.into(),
                subjects: vec![subject],
                storage: stream::StorageType::File,
                ..Default::default()
            },
        )
        .await?;
    }
    let inputs = ensure_bucket(&js, INPUTS_BUCKET).await?;
    let results = ensure_bucket(&js, RESULTS_BUCKET).await?;
    let consumer = requests
        .get_or_create_consumer(
            &config.consumer,
            pull::Config {
                durable_name: Some(config.consumer.clone()),
                filter_subject: REQUESTS_SUBJECT.into(),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: config.ack_wait,
                // Unlimited: the dead-letter decision is the host's (see the module doc).
                max_deliver: -1,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| nats_err(&format!("consumer {}", config.consumer))(e.to_string()))?;
    Ok((js, consumer, inputs, results))
}

/// The stream, created when missing (another host creating it at the same time is fine).
async fn ensure_stream(
    js: &jetstream::Context,
    config: stream::Config,
) -> Result<stream::Stream, ServeError> {
    let name = config.name.clone();
    for _ in 0..3 {
        if let Ok(s) = js.get_stream(&name).await {
            return Ok(s);
        }
        match js.create_stream(config.clone()).await {
            Ok(s) => return Ok(s),
            Err(e) => {
                tracing::debug!("creating stream {name}: {e}; looking again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    js.get_stream(&name)
        .await
        .map_err(|e| nats_err(&format!("stream {name}"))(e.to_string()))
}

async fn ensure_bucket(
    js: &jetstream::Context,
    bucket: &str,
) -> Result<object_store::ObjectStore, ServeError> {
    for _ in 0..3 {
        if let Ok(b) = js.get_object_store(bucket).await {
            return Ok(b);
        }
        let config = object_store::Config {
            bucket: bucket.into(),
            storage: stream::StorageType::File,
            ..Default::default()
        };
        match js.create_object_store(config).await {
            Ok(b) => return Ok(b),
            Err(e) => {
                tracing::debug!("creating bucket {bucket}: {e}; looking again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    js.get_object_store(bucket)
        .await
        .map_err(|e| nats_err(&format!("object store bucket {bucket}"))(e.to_string()))
}

impl Host<'_> {
    /// The main thread: the first SIGTERM or SIGINT stops the pulls (what runs
    /// finishes); a second one exits at once and the server redelivers what ran.
    fn wait_for_signal(&self) -> Stopped {
        use nix::sys::signal::{SigSet, Signal};
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        set.add(Signal::SIGINT);
        let first = set.wait();
        self.observer.log(
            Level::Info,
            &format!(
                "{}: no new requests; waiting for the running ones (a second signal stops at once)",
                first.map_or_else(|e| e.to_string(), |s| s.to_string())
            ),
        );
        self.stopping.store(true, Ordering::SeqCst);
        // The workers end by themselves; a second signal while they finish exits.
        std::thread::spawn(move || {
            if let Ok(signal) = set.wait() {
                eprintln!("{signal} again: stopping now; the running requests will be redelivered");
                std::process::exit(128 + signal as i32);
            }
        });
        Stopped::Graceful
    }

    /// A worker: pulls one message at a time until the host stops.
    fn work(&self) {
        let mut idle_errors = 0u32;
        while !self.stopping.load(Ordering::SeqCst) {
            let next = self.rt.block_on(async {
                let mut batch = self
                    .consumer
                    .fetch()
                    .max_messages(1)
                    .expires(PULL_WAIT)
                    .messages()
                    .await
                    .map_err(|e| e.to_string())?;
                match tokio::time::timeout(PULL_WAIT * 3, batch.next()).await {
                    Ok(Some(Ok(m))) => Ok(Some(m)),
                    Ok(Some(Err(e))) => Err(e.to_string()),
                    Ok(None) | Err(_) => Ok(None),
                }
            });
            match next {
                Ok(Some(message)) => {
                    idle_errors = 0;
                    self.handle(message);
                }
                Ok(None) => {}
                Err(e) => {
                    idle_errors = idle_errors.saturating_add(1);
                    self.observer
                        .log(Level::Warn, &format!("pulling a request: {e}"));
                    std::thread::sleep(Duration::from_millis(200 * u64::from(idle_errors.min(10))));
                }
            }
        }
    }

    fn handle(&self, message: jetstream::Message) {
        let (delivery, sequence) = message
            .info()
            .map(|i| (i.delivered, i.stream_sequence))
            .unwrap_or((1, 0));
        let message = std::sync::Arc::new(message);
        // While it runs, tell the server every third of ack_wait that it is in progress.
        let beat = {
            let message = std::sync::Arc::clone(&message);
            let every = (self.config.ack_wait / 3).max(Duration::from_millis(100));
            self.rt.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let _ = message.ack_with(AckKind::Progress).await;
                }
            })
        };
        let disposition = self.process(&message, delivery);
        beat.abort();
        let result = self.rt.block_on(async {
            match disposition {
                Disposition::Answered(summary) => {
                    self.publish_summary(&summary).await?;
                    self.observer.handled(&handled(&summary, sequence));
                    message.double_ack().await.map_err(|e| format!("ack: {e}"))
                }
                Disposition::Failed {
                    request_id,
                    request_sha256,
                    reasons,
                } => {
                    let max = i64::from(self.config.max_deliver.max(1));
                    let name = request_id.clone().unwrap_or_else(|| format!("#{sequence}"));
                    if delivery >= max {
                        let letter = DeadLetter {
                            request_id: request_id.as_deref(),
                            request_sha256: &request_sha256,
                            stream_sequence: sequence,
                            deliveries: delivery,
                            reasons: &reasons,
                            request_base64: base64::engine::general_purpose::STANDARD
                                .encode(&message.payload),
                        };
                        let body = serde_json::to_vec(&letter).unwrap_or_default();
                        self.js
                            .publish(DEAD_SUBJECT, body.into())
                            .await
                            .map_err(|e| format!("dead letter: {e}"))?
                            .await
                            .map_err(|e| format!("dead letter: {e}"))?;
                        self.observer.log(
                            Level::Error,
                            &format!(
                                "{name}: dead-lettered on {DEAD_SUBJECT} after {delivery} deliveries: {}",
                                reason_text(&reasons)
                            ),
                        );
                        self.observer.handled(&Handled {
                            reasons,
                            ..Handled::new(OsStr::new(&name), ServeVerdict::Dead)
                        });
                        message
                            .double_ack_with(AckKind::Term)
                            .await
                            .map_err(|e| format!("term: {e}"))
                    } else {
                        let wait = Duration::from_secs(1u64 << (delivery - 1).clamp(0, 5))
                            .min(Duration::from_secs(30));
                        self.observer.log(
                            Level::Warn,
                            &format!(
                                "{name}: delivery {delivery} of {max} failed, redelivered in {} s: {}",
                                wait.as_secs(),
                                reason_text(&reasons)
                            ),
                        );
                        self.observer.handled(&Handled {
                            reasons,
                            ..Handled::new(OsStr::new(&name), ServeVerdict::Retry)
                        });
                        message
                            .ack_with(AckKind::Nak(Some(wait)))
                            .await
                            .map_err(|e| format!("nak: {e}"))
                    }
                }
            }
        });
        if let Err(e) = result {
            // Not acked: the server redelivers it after ack_wait, and the stored result
            // (if any) answers it then.
            self.observer.log(
                Level::Warn,
                &format!("request #{sequence}: {e}; it will be redelivered"),
            );
        }
    }

    /// Judges, looks for a stored result, fetches the inputs, runs and stores.
    fn process(&self, message: &jetstream::Message, delivery: i64) -> Disposition {
        let body = &message.payload;
        let raw_sha = runner_core::lock::sha256_tagged(body);
        let failed = |id: Option<String>, sha: String, reasons| Disposition::Failed {
            request_id: id,
            request_sha256: sha,
            reasons,
        };
        let (dir, run) = match self.stage_request(message, &raw_sha, delivery) {
            Ok(staged) => staged,
            Err(disposition) => return *disposition,
        };
        let request_path = dir.path().join("request.md");
        let plan = match self.pipeline.judge(&request_path) {
            Ok(plan) => plan,
            Err(e) if is_refusal(&e) => return self.reject(None, raw_sha, e.reasons(), delivery),
            Err(e) => return failed(None, raw_sha, e.reasons()),
        };
        let id = plan.approved.request_id().to_owned();
        let sha = runner_core::lock::text_sha256_tagged(&plan.request_text);
        let key = runner_pipeline::reuse::key(&plan, self.pipeline.policy());
        match self.rt.block_on(self.stored(&format!("index/{key}"))) {
            Ok(Some(mut summary)) => {
                summary["reused"] = serde_json::Value::Bool(true);
                summary["delivery"] = delivery.into();
                return Disposition::Answered(reused(summary, &id, &sha));
            }
            Ok(None) => {}
            Err(e) => {
                let r = Reason::new("nats.results_bucket", e, None);
                return failed(Some(id), sha, vec![r]);
            }
        }
        if delivery > i64::from(self.config.max_deliver.max(1)) {
            let r = Reason::new(
                "nats.max_deliver",
                format!(
                    "delivered {delivery} times (max_deliver {}): the earlier deliveries ended without an answer (a host stopped or lost its connection)",
                    self.config.max_deliver
                ),
                None,
            );
            return failed(Some(id), sha, vec![r]);
        }
        let inputs_dir = dir.path().join("inputs");
        match self
            .rt
            .block_on(self.fetch_inputs(&plan, &run, &inputs_dir))
        {
            Ok(Ok(())) => {}
            Ok(Err(refused)) => return self.reject(Some(&plan), sha, refused, delivery),
            Err(e) => {
                let r = Reason::new("nats.inputs_bucket", e, None);
                return failed(Some(id), sha, vec![r]);
            }
        }
        let results_dir = dir.path().join("results");
        let summary = match self.pipeline.run(
            &plan,
            &InputsRoot::named(&inputs_dir),
            &ResultsRoot::named(&results_dir),
        ) {
            Ok(summary) => summary,
            Err(e) if is_refusal(&e) => {
                return self.reject(Some(&plan), sha, e.reasons(), delivery);
            }
            Err(e) => return failed(Some(id), sha, e.reasons()),
        };
        let result_id = summary.lock.result_id.clone();
        let mut out = NatsSummary {
            request_id: Some(id.clone()),
            request_sha256: sha.clone(),
            verdict: ServeVerdict::Accept,
            reasons: Vec::new(),
            result_id: Some(result_id.clone()),
            objects: Vec::new(),
            outcome: Some(summary.outcome.kind),
            exit_code: Some(summary.outcome.exit_code),
            runtime_sec: Some(summary.outcome.runtime_sec),
            reuse_key: Some(key.clone()),
            reused: false,
            delivery,
        };
        let stored = run
            .open_dir("results")
            .map_err(|e| format!("listing the result in {}: {e}", results_dir.display()));
        match stored.and_then(|results| {
            self.rt.block_on(self.store_result(
                (&results, &results_dir),
                &result_id,
                &key,
                &mut out,
            ))
        }) {
            Ok(()) => Disposition::Answered(out),
            Err(e) => {
                let r = Reason::new("nats.results_bucket", e, None);
                failed(Some(id), sha, vec![r])
            }
        }
    }

    /// A fresh run directory holding the message's request (and its approval signature,
    /// from the header); `Err`: how the message ends when that cannot be.
    fn stage_request(
        &self,
        message: &jetstream::Message,
        raw_sha: &str,
        delivery: i64,
    ) -> Result<(tempfile::TempDir, Dir), Box<Disposition>> {
        let body = &message.payload;
        let failed = |reasons| Disposition::Failed {
            request_id: None,
            request_sha256: raw_sha.to_owned(),
            reasons,
        };
        // The run's scratch directory, held: the request, its inputs and its result are
        // written and read through the handle.
        let created = tempfile::Builder::new()
            .prefix("runner-nats-")
            .tempdir_in(&self.scratch)
            .and_then(|d| runner_sandbox::host::open_dir(d.path()).map(|run| (d, run)));
        let (dir, run) = match created {
            Ok(d) => d,
            Err(e) => {
                let r = Reason::new(
                    "nats.tmp",
                    format!("cannot create a run directory: {e}"),
                    None,
                );
                return Err(Box::new(failed(vec![r])));
            }
        };
        let mut written = run.write("request.md", body);
        if let Some(sig) = message
            .headers
            .as_ref()
            .and_then(|h| h.get(APPROVAL_HEADER))
        {
            match base64::engine::general_purpose::STANDARD.decode(sig.as_str().trim()) {
                Ok(bytes) => {
                    written = written.and_then(|()| run.write("request.md.sig", bytes));
                }
                Err(e) => {
                    let r = Reason::new(
                        "nats.approval_header",
                        format!("header {APPROVAL_HEADER} is not base64: {e}"),
                        None,
                    );
                    return Err(Box::new(self.reject(
                        None,
                        raw_sha.to_owned(),
                        vec![r],
                        delivery,
                    )));
                }
            }
        }
        if let Err(e) = written {
            let r = Reason::new("nats.tmp", format!("cannot write the request: {e}"), None);
            return Err(Box::new(failed(vec![r])));
        }
        Ok((dir, run))
    }

    /// A REJECT: its summary stored under `rejected/` and answered.
    fn reject(
        &self,
        plan: Option<&RunPlan>,
        sha: String,
        reasons: Vec<Reason>,
        delivery: i64,
    ) -> Disposition {
        let summary = NatsSummary {
            request_id: plan.map(|p| p.approved.request_id().to_owned()),
            request_sha256: sha,
            verdict: ServeVerdict::Reject,
            reasons,
            result_id: None,
            objects: Vec::new(),
            outcome: None,
            exit_code: None,
            runtime_sec: None,
            reuse_key: None,
            reused: false,
            delivery,
        };
        let name = format!(
            "rejected/{}",
            summary.request_sha256.trim_start_matches("sha256:")
        );
        let body = serde_json::to_vec(&summary).unwrap_or_default();
        if let Err(e) = self.rt.block_on(async {
            self.results
                .put(name.as_str(), &mut body.as_slice())
                .await
                .map_err(|e| e.to_string())
        }) {
            return Disposition::Failed {
                request_id: summary.request_id,
                request_sha256: summary.request_sha256,
                reasons: vec![Reason::new("nats.results_bucket", e, None)],
            };
        }
        Disposition::Answered(summary)
    }

    /// The JSON object stored as `name` in the results bucket, if there is one.
    async fn stored(&self, name: &str) -> Result<Option<serde_json::Value>, String> {
        let mut object = match self.results.get(name).await {
            Ok(o) => o,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("reading {name} from {RESULTS_BUCKET}: {e}")),
        };
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("reading {name} from {RESULTS_BUCKET}: {e}"))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{name} in {RESULTS_BUCKET} is not JSON: {e}"))
    }

    /// Fetches every declared input into `inputs/` of the run directory `run` (at
    /// `shown`, for messages) by its sha256 and checks its bytes. `Ok(Err(reasons))`:
    /// refused (missing or mismatched objects); `Err`: the store failed.
    async fn fetch_inputs(
        &self,
        plan: &RunPlan,
        run: &Dir,
        shown: &Path,
    ) -> Result<Result<(), Vec<Reason>>, String> {
        let mut refused = Vec::new();
        for input in plan.approved.inputs() {
            let relative = Path::new("inputs").join(input.relative());
            let target = shown.join(input.relative());
            let io = |e: std::io::Error| format!("writing {}: {e}", target.display());
            if let Some(parent) = relative.parent() {
                run.create_dir_all(parent).map_err(io)?;
            }
            let mut object = match self.inputs.get(&input.sha256).await {
                Ok(o) => o,
                Err(e) if e.kind() == object_store::GetErrorKind::NotFound => {
                    refused.push(Reason::new(
                        "nats.input_missing",
                        format!(
                            "input {}: no object {} in bucket {INPUTS_BUCKET}",
                            input.path, input.sha256
                        ),
                        None,
                    ));
                    continue;
                }
                Err(e) => {
                    return Err(format!(
                        "fetching {} from {INPUTS_BUCKET}: {e}",
                        input.sha256
                    ));
                }
            };
            let mut bytes = Vec::new();
            object
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| format!("fetching {} from {INPUTS_BUCKET}: {e}", input.sha256))?;
            let actual = runner_core::digest::sha256_hex(&bytes);
            if actual != input.sha256 {
                refused.push(Reason::new(
                    "nats.input_mismatch",
                    format!(
                        "input {}: object {} in bucket {INPUTS_BUCKET} holds bytes whose sha256 is {actual}",
                        input.path, input.sha256
                    ),
                    None,
                ));
                continue;
            }
            run.write(&relative, &bytes).map_err(io)?;
        }
        Ok(if refused.is_empty() {
            Ok(())
        } else {
            Err(refused)
        })
    }

    /// Uploads a result's files, then its summary as `index/<key>` (the commit point).
    /// `results` is the run's results directory, held, and where it is (for messages).
    async fn store_result(
        &self,
        results: (&Dir, &Path),
        result_id: &str,
        key: &str,
        summary: &mut NatsSummary,
    ) -> Result<(), String> {
        let (dir, shown) = results;
        let files = result_files(dir, result_id)
            .map_err(|e| format!("listing the result in {}: {e}", shown.display()))?;
        for name in files {
            let mut file = dir
                .open(&name)
                .map(|f| tokio::fs::File::from_std(f.into_std()))
                .map_err(|e| format!("{}: {e}", shown.join(&name).display()))?;
            self.results
                .put(name.as_str(), &mut file)
                .await
                .map_err(|e| format!("storing {name} in {RESULTS_BUCKET}: {e}"))?;
            summary.objects.push(name);
        }
        let body = serde_json::to_vec(&summary).map_err(|e| e.to_string())?;
        let index = format!("index/{key}");
        self.results
            .put(index.as_str(), &mut body.as_slice())
            .await
            .map_err(|e| format!("storing {index} in {RESULTS_BUCKET}: {e}"))?;
        Ok(())
    }

    async fn publish_summary(&self, summary: &NatsSummary) -> Result<(), String> {
        let subject = match &summary.request_id {
            Some(id) => format!("{RESULTS_SUBJECT_PREFIX}.{id}"),
            None => format!("{RESULTS_SUBJECT_PREFIX}.rejected"),
        };
        let body = serde_json::to_vec(summary).map_err(|e| e.to_string())?;
        self.js
            .publish(subject.clone(), body.into())
            .await
            .map_err(|e| format!("publishing on {subject}: {e}"))?
            .await
            .map_err(|e| format!("publishing on {subject}: {e}"))?;
        Ok(())
    }
}

/// A stored summary answered again: the stored fields, marked reused.
fn reused(stored: serde_json::Value, id: &str, sha: &str) -> NatsSummary {
    let s = |k: &str| stored[k].as_str().map(str::to_owned);
    NatsSummary {
        request_id: Some(id.to_owned()),
        request_sha256: sha.to_owned(),
        verdict: ServeVerdict::Accept,
        reasons: Vec::new(),
        result_id: s("result_id"),
        objects: stored["objects"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        outcome: stored["outcome"].as_str().and_then(OutcomeKind::parse),
        exit_code: stored["exit_code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok()),
        runtime_sec: stored["runtime_sec"].as_f64(),
        reuse_key: s("reuse_key"),
        reused: true,
        delivery: stored["delivery"].as_i64().unwrap_or(1),
    }
}

/// The files of result `id` in `dir`, as object names: `id.*` beside the document and
/// everything under `id/`, names relative to `dir`, in name order.
fn result_files(dir: &Dir, id: &str) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let dotted = format!("{id}.");
    for entry in dir.entries()? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type()?;
        if kind.is_file() && name.starts_with(&dotted) {
            out.push(name);
        } else if kind.is_dir() && name == id {
            walk(&entry.open_dir()?, &name, &mut out)?;
        }
    }
    out.sort();
    Ok(out)
}

fn walk(dir: &Dir, prefix: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in dir.entries()? {
        let entry = entry?;
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.open_dir()?, &name, out)?;
        } else if kind.is_file() {
            out.push(name);
        }
    }
    Ok(())
}

/// A summary as one line of `runner serve --json`.
fn handled(summary: &NatsSummary, sequence: u64) -> Handled {
    let name = summary
        .request_id
        .clone()
        .unwrap_or_else(|| format!("#{sequence}"));
    Handled {
        reasons: summary.reasons.clone(),
        run: RunFacts {
            result_path: summary
                .result_id
                .as_ref()
                .map(|id| format!("nats:{RESULTS_BUCKET}/{id}.md")),
            outcome: summary.outcome,
            exit_code: summary.exit_code,
            runtime_sec: summary.runtime_sec,
        },
        recovered: summary.reused,
        ..Handled::new(OsStr::new(&name), summary.verdict)
    }
}

fn reason_text(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(|r| format!("{}: {}", r.code, r.message))
        .collect::<Vec<_>>()
        .join("; ")
}
