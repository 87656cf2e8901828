//! `runner policy show [--json]`: the effective policy — the built-in
//! `policies/default.toml` or the file given with `--policy`, which replaces it whole.

use super::output;
use runner_core::policy::GuestMapping;
use runner_core::policy::LimitMaxima;
use runner_core::policy::OutputCaps;
use runner_core::policy::Policy;
use runner_core::policy::RequestRules;
use runner_core::policy::RuleTarget;
use serde::Serialize;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner policy show
  runner --policy policies/default.toml policy show --json")]
pub struct PolicyCommand {
    #[command(subcommand)]
    pub action: PolicyAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyAction {
    /// Print the effective policy: its origin and sha256 (the one results and locks pin),
    /// then its text; with --json the parsed values, defaults filled in.
    #[command(after_help = "\
Examples:
  runner policy show
  runner --policy policies/default.toml policy show --json | jq .effective.limits
  runner policy show --json | jq -r .sha256")]
    Show {
        /// Print one JSON object (schema: schemas/policy-show.json) instead of the text.
        /// Example: `runner policy show --json`.
        #[arg(long)]
        json: bool,
    },
}

/// What `runner policy show --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PolicyReport {
    /// `built-in` or the path given with `--policy`.
    pub origin: String,
    /// sha256 of the policy text (64 lowercase hex), as pinned in results and locks.
    pub sha256: String,
    /// sha256 (64 lowercase hex) of the canonical JSON of the tables that decide how an
    /// accepted request runs (`[output]`, `[[guests]]`, `[confinement]`, and
    /// `[determinism]` when not the default): pinned in
    /// locks as `policy.run_sha256`, and what `runner replay` compares.
    pub run_sha256: String,
    /// The parsed policy, defaults filled in.
    pub effective: EffectivePolicy,
    /// The policy file's text as loaded.
    pub text: String,
}

/// The values the runner enforces.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EffectivePolicy {
    pub request: RequestRules,
    pub limits: LimitMaxima,
    pub output: OutputCaps,
    /// The guest registry: which program words and languages select which guest.
    pub guests: Vec<GuestMapping>,
    pub approval: ApprovalView,
    /// `[confinement]`: each worker confinement layer, `required` or `optional` (see
    /// `policies/default.toml`).
    pub confinement: serde_json::Map<String, serde_json::Value>,
    /// `[determinism]`: the guest's clocks (`virtual` or `host`) and entropy (`seeded`
    /// or `host`); absent from the file: both virtual and seeded.
    pub determinism: runner_core::policy::determinism::DeterminismPolicy,
    /// Forbidden-content rules: those judging requests first, then those for results
    /// only, then those for packets only, each group in policy order.
    pub forbidden: Vec<RuleView>,
}

/// `[approval]`, with the trusted keys by name and key id.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ApprovalView {
    pub require_signed_approval: bool,
    pub separation_of_duties: bool,
    pub trusted: Vec<TrustedKeyView>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TrustedKeyView {
    pub name: String,
    /// `sha256:<hex>` of the raw public key.
    pub key_id: String,
}

/// One forbidden-content rule.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RuleView {
    pub code: String,
    pub message: String,
    /// The regular expression (Rust `regex` syntax, case-insensitive, multi-line).
    pub pattern: String,
    pub spaced: Vec<String>,
    /// The document kinds it judges: `request`, `result`, `packet`, `code`.
    pub applies_to: Vec<RuleTarget>,
    /// What the pattern is matched against: `any` (the line, its de-obfuscated views
    /// and every decoded or rendered reading) or `decoded` (only what an encoded blob
    /// decodes to).
    pub reading: runner_core::rules::RuleReading,
    /// What of a tool result it judges: `all`, or `guest` (only what the runner did not
    /// write: the excerpt lines and the text it quotes as code spans).
    pub result_text: runner_core::rules::ResultText,
}

/// The report for `policy`.
pub fn report(policy: &Policy) -> PolicyReport {
    // Every rule, whatever it applies to, once each, in policy order.
    let mut forbidden: Vec<RuleView> = Vec::new();
    for target in RuleTarget::ALL {
        for rule in policy.rules_for(target) {
            if !forbidden
                .iter()
                .any(|r| r.code == rule.code && r.pattern == rule.pattern.as_str())
            {
                forbidden.push(RuleView {
                    code: rule.code.clone(),
                    message: rule.message.clone(),
                    pattern: rule.pattern.as_str().to_owned(),
                    spaced: rule.spaced.clone(),
                    applies_to: rule.applies_to.clone(),
                    reading: rule.reading,
                    result_text: rule.result_text,
                });
            }
        }
    }
    PolicyReport {
        origin: policy.origin.clone(),
        sha256: policy.sha256.clone(),
        run_sha256: policy.run_sha256.clone(),
        effective: EffectivePolicy {
            request: policy.request.clone(),
            limits: policy.limits.clone(),
            output: policy.output.clone(),
            guests: policy.guests.clone(),
            approval: ApprovalView {
                require_signed_approval: policy.approval.require_signed_approval,
                separation_of_duties: policy.approval.separation_of_duties,
                trusted: policy
                    .approval
                    .trusted
                    .iter()
                    .map(|t| TrustedKeyView {
                        name: t.name.clone(),
                        key_id: t.key_id.clone(),
                    })
                    .collect(),
            },
            confinement: match serde_json::to_value(&policy.confinement) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            },
            determinism: policy.determinism,
            forbidden,
        },
        text: policy.text.clone(),
    }
}

impl PolicyCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        match self.action {
            PolicyAction::Show { json } => {
                if json {
                    return super::print_json(&report(policy));
                }
                output::note(format!(
                    "# policy: {} (sha256 {}, run tables {})",
                    policy.origin, policy.sha256, policy.run_sha256
                ));
                let mut text = policy.text.clone();
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                super::print_stdout(&text)
            }
        }
    }
}
