//! Publishing a run: `/out` collected, the streams stored, the lock drafted from what
//! the run pinned, then the document rendered under its final name and the lock, the
//! in-toto statement and (when asked) its signature written beside it — all of them,
//! or no result at all.

use super::RunPlan;
use super::error::{PublishCause, PublishFailure};
use crate::result::collect::{self, Collected, WalkLimits};
use crate::result::{Rendered, ResultsRoot, Staging};
use crate::stage::{RunDir, StagedInput};
use ed25519_dalek::SigningKey;
use runner_core::digest::sha256_hex;
use runner_core::lock::FilePin;
use runner_core::lock::GuestPin;
use runner_core::lock::LimitsPin;
use runner_core::lock::Lock;
use runner_core::lock::OutputsPin;
use runner_core::lock::PolicyPin;
use runner_core::lock::RequestPin;
use runner_core::lock::RuntimePin;
use runner_core::lock::StreamPin;
use runner_core::lock::statement;
use runner_core::policy::Policy;
use runner_core::policy::RuleTarget;
use runner_core::request::BackendKind;
use runner_core::request::Work;
use runner_core::result::render::{self, Provenance, ResultDoc};
use runner_core::run::Limits;
use runner_sandbox::Outcome;
use std::path::PathBuf;

/// What publishing needs besides the run's outcome.
pub(super) struct Context<'a> {
    pub plan: &'a RunPlan,
    pub policy: &'a Policy,
    pub staged: &'a [StagedInput],
    pub limits: &'a Limits,
    pub guest: Option<&'a (String, String)>,
    /// The pre-initialised module run instead of the guest's plain one (sha256 hex).
    pub preinit: Option<&'a str>,
    pub environment: Option<&'a runner_core::environment::Located>,
    pub sign_key: Option<&'a SigningKey>,
    /// The clocks and entropy the guest ran with.
    pub determinism: &'a runner_core::determinism::Determinism,
    /// What the broker recorded (a run granted `network: allowlist`).
    pub network: Option<&'a crate::net::broker::BrokerOutput>,
}

/// Collects `/out`, stores the streams, and publishes the result document with its
/// lock and in-toto statement (and signature). Returns the document's path and the lock.
pub(super) fn publish(
    ctx: &Context<'_>,
    run: &RunDir,
    staging: Staging,
    results: &ResultsRoot,
    outcome: &Outcome,
    mut findings: Vec<String>,
) -> Result<(PathBuf, Lock), PublishFailure> {
    let fail = |cause: PublishCause| PublishFailure {
        dir: results.path().to_owned(),
        cause,
    };
    let dest = staging.out_dir().map_err(|e| fail(e.into()))?;
    let walk = WalkLimits {
        max_entries: ctx.limits.out_files,
        max_depth: 32,
    };
    // Whatever the guest left, the run ends in a complete result: a /out that cannot
    // even be reopened is a finding, not a lost run.
    let mut collected = match run.out() {
        Ok(out) => {
            collect::collect(&out, &dest, walk).map_err(|e| fail(PublishCause::Collect(e)))?
        }
        Err(e) => Collected {
            findings: vec![format!(
                "/out could not be reopened after the run ({e}); nothing was collected"
            )],
            ..Default::default()
        },
    };
    findings.append(&mut collected.findings);
    runner_sandbox::phases::mark("publish.out_collected");
    staging
        .write_stream("stdout", &outcome.stdout)
        .map_err(|e| fail(e.into()))?;
    staging
        .write_stream("stderr", &outcome.stderr)
        .map_err(|e| fail(e.into()))?;
    // The response bodies the guest was given, beside the streams, so `verify` can
    // re-derive their hashes and `replay` can serve them again.
    if let Some(network) = ctx.network {
        for name in &network.bodies {
            let bytes = network.body_dir.read(name).map_err(|e| {
                fail(PublishCause::RecordedBody {
                    path: run.path().join(super::network::NET_BODIES).join(name),
                    source: e,
                })
            })?;
            staging
                .write_stream(name, &bytes)
                .map_err(|e| fail(e.into()))?;
        }
    }

    runner_sandbox::phases::mark("publish.streams_written");
    let now = time::OffsetDateTime::now_utc();
    let created = runner_core::result::utc_timestamp(now);
    let base = crate::result::result_id(now, ctx.plan.approved.request_id());
    // The streams are hashed once: the lock pins these hashes, the document shows them,
    // and a document is rendered again for each name tried.
    let streams = StreamHashes {
        stdout: sha256_hex(&outcome.stdout),
        stderr: sha256_hex(&outcome.stderr),
    };
    let draft = draft_lock(ctx, &created, outcome, &streams, &collected);
    let render = |id: &str| {
        let document = render_document(ctx, id, &created, outcome, &streams, &collected, &findings);
        runner_sandbox::phases::mark("publish.rendered");
        // The lock, the statement and (when asked) its signature, or no result at all:
        // a run asked to sign never publishes unsigned.
        let (lock, lock_text) = Lock {
            result_id: id.to_owned(),
            result_sha256: runner_core::lock::text_sha256_tagged(&document),
            ..draft.clone()
        }
        .seal()
        .map_err(|e| format!("the lock: {e}"))?;
        let st = statement::statement_text(&lock, &format!("{id}.md"))
            .map_err(|e| format!("the in-toto statement: {e}"))?;
        let mut extras = vec![(
            runner_core::lock::lock_file_name(id),
            lock_text.into_bytes(),
        )];
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
        runner_sandbox::phases::mark("publish.sealed");
        Ok::<_, String>((Rendered { document, extras }, lock))
    };
    staging
        .publish_with(&base, render)
        .map_err(|e| fail(e.into()))
}

fn backend_name(ctx: &Context<'_>) -> &'static str {
    match ctx.plan.approved.backend() {
        BackendKind::Era => "ERA",
        BackendKind::Monty => "monty",
    }
}

fn file_pin(path: &str, sha256: &str, bytes: u64) -> FilePin {
    FilePin {
        path: path.to_owned(),
        sha256: runner_core::lock::tag(sha256),
        bytes,
    }
}

/// Everything the lock pins except the result's own id and hash (known only once the
/// document has its name).
/// The sha256 hex of the run's stdout and stderr.
struct StreamHashes {
    stdout: String,
    stderr: String,
}

fn draft_lock(
    ctx: &Context<'_>,
    created: &str,
    outcome: &Outcome,
    streams: &StreamHashes,
    collected: &Collected,
) -> Lock {
    let approved = &ctx.plan.approved;
    let (engine, engine_version) = ctx.plan.engine_identity();
    let stream = |bytes: &[u8], sha256: &str| StreamPin {
        sha256: runner_core::lock::tag(sha256),
        bytes: bytes.len() as u64,
    };
    Lock {
        lock_type: runner_core::lock::LOCK_TYPE.into(),
        result_id: String::new(),
        created_utc: created.to_owned(),
        request: RequestPin {
            request_id: approved.request_id().to_owned(),
            sha256: runner_core::lock::text_sha256_tagged(&ctx.plan.request_text),
            requested_by: approved.requested_by().to_owned(),
            approved_by: approved.approved_by().to_owned(),
            approved_utc: approved.approved_utc().to_owned(),
            approval_key: ctx.plan.approval_key.as_ref().map(|k| {
                runner_core::lock::ApprovalKeyPin {
                    key_id: k.key_id.clone(),
                    name: k.name.clone(),
                }
            }),
        },
        policy: PolicyPin {
            origin: ctx.policy.origin.clone(),
            sha256: runner_core::lock::tag(&ctx.policy.sha256),
            run_sha256: Some(runner_core::lock::tag(&ctx.policy.run_sha256)),
        },
        backend: backend_name(ctx).to_owned(),
        runtime: RuntimePin {
            runner_version: crate::RUNNER_VERSION.to_owned(),
            engine,
            engine_version,
            guest: ctx.guest.map(|(name, sha)| GuestPin {
                name: name.clone(),
                sha256: runner_core::lock::tag(sha),
                preinit_sha256: ctx.preinit.map(runner_core::lock::tag),
            }),
            environment: ctx.environment.map(runner_core::lock::EnvironmentPin::of),
        },
        limits: LimitsPin::from(ctx.limits),
        inputs_count: 0,
        inputs: ctx
            .staged
            .iter()
            .map(|i| file_pin(&i.path, &i.sha256, i.bytes))
            .collect(),
        outputs: OutputsPin {
            stdout: stream(&outcome.stdout, &streams.stdout),
            stderr: stream(&outcome.stderr, &streams.stderr),
            artifacts_count: 0,
            artifacts: collected
                .artifacts
                .iter()
                .map(|a| file_pin(&a.path, &a.sha256, a.bytes))
                .collect(),
            exit_code: outcome.exit_code,
            outcome: outcome.kind.as_str().to_owned(),
        },
        result_sha256: String::new(),
        replay_of: ctx.plan.replay_of.clone(),
        determinism: Some(ctx.determinism.into()),
        network: ctx.network.map(|n| n.log.clone()),
        usage: outcome.usage.as_deref().cloned(),
        lock_sha256: String::new(),
    }
}

/// The result document under its final id.
fn render_document(
    ctx: &Context<'_>,
    id: &str,
    created: &str,
    outcome: &Outcome,
    streams: &StreamHashes,
    collected: &Collected,
    findings: &[String],
) -> String {
    let approved = &ctx.plan.approved;
    let command = match approved.work() {
        Work::Era { command_line, .. } => command_line.clone(),
        Work::Monty { code, .. } => {
            format!("monty: {} lines of code from ## Code", code.lines().count())
        }
    };
    render::render(&ResultDoc {
        result_id: id,
        created_utc: created,
        request_id: approved.request_id(),
        backend: backend_name(ctx),
        purpose: approved.purpose(),
        exit_code: outcome.exit_code,
        runtime_sec: outcome.runtime_sec,
        outcome: outcome.kind,
        outcome_detail: outcome.detail.as_deref(),
        artifacts: &collected.artifacts,
        expected_outputs: approved.outputs(),
        stdout: &outcome.stdout,
        stderr: &outcome.stderr,
        stdout_sha256: &streams.stdout,
        stderr_sha256: &streams.stderr,
        stdout_capped: outcome.stdout_capped,
        stderr_capped: outcome.stderr_capped,
        provenance: Provenance {
            command: &command,
            engine: &outcome.engine,
            guest: ctx.guest.map(|(n, s)| (n.as_str(), s.as_str())),
            environment: ctx
                .environment
                .map(|e| runner_core::lock::EnvironmentPin::of(e).summary()),
            runner_version: crate::RUNNER_VERSION,
            limits: ctx.limits,
            cpu_limit_text: &approved.limits().cpu_limit,
            request_sha256: approved.normalized_sha256(),
            policy_sha256: &ctx.policy.sha256,
            confinement: &outcome.confinement,
            approved_by: approved.approved_by(),
            approved_utc: approved.approved_utc(),
            approval_key: ctx
                .plan
                .approval_key
                .as_ref()
                .map(|k| (k.key_id.as_str(), k.name.as_str())),
            determinism: &runner_core::determinism::describe(ctx.determinism),
        },
        findings,
        network: ctx.network.map(|n| &n.log),
        excerpt_lines: ctx.policy.output.excerpt_lines,
        rules: ctx.policy.rules_for(RuleTarget::Result),
    })
}
