//! The policy's rules about documents, as data: the request file's own budgets
//! ([`RequestRules`]), the forbidden-content rules ([`ForbiddenRule`], compiled from
//! their `[[forbidden]]` entries by [`compile`]) and the kinds of document they judge
//! ([`RuleTarget`]). The policy file as a whole (limits, guests, confinement, keys, ...)
//! is `runner::policy`, which loads it and builds these with the functions here.

use crate::rule_pattern::RulePattern;
use serde::Deserialize;

/// The built-in policy text (`policies/default.toml`).
pub const DEFAULT_POLICY_TOML: &str = include_str!("../../policies/default.toml");

/// Rules about the request file itself.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestRules {
    pub max_bytes: u64,
    pub max_yaml_depth: usize,
    pub max_yaml_nodes: usize,
}

/// One `[[forbidden]]` entry as written in a policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForbiddenRuleFile {
    code: String,
    message: String,
    pattern: String,
    #[serde(default)]
    spaced: Vec<String>,
    /// The document kinds the rule judges; absent means all of them.
    #[serde(default)]
    applies_to: Option<Vec<RuleTarget>>,
    /// What the pattern is matched against; absent means every reading of a line.
    #[serde(default)]
    reading: RuleReading,
    /// What of a result the rule judges; absent means all of it.
    #[serde(default)]
    result_text: ResultText,
}

/// What text of a tool result a forbidden rule judges (`result_text` in the policy).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ResultText {
    /// Every line, the runner's own included.
    #[default]
    All,
    /// Only what the runner did not write: the stdout and stderr excerpts and the text
    /// it quotes as code spans (`/out` names, findings, the request's purpose). The
    /// runner's own lines hold its command record and sha256 digests, which read as
    /// code and as encoded text to rules about those.
    Guest,
}

/// What text a forbidden rule's pattern judges (`reading` in the policy).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RuleReading {
    /// The line, its de-obfuscated views and every decoded or rendered reading.
    #[default]
    Any,
    /// Only what a blob that only an encoding explains decodes to (base64 that reads as
    /// words, a line of Morse, ROT13 that turns gibberish into English): a rule here
    /// makes the encoding itself a finding.
    Decoded,
}

/// The kinds of document a forbidden-content rule can apply to (`applies_to` in the
/// policy). Governed packets are packets: their strings are scanned with the packet rules.
/// `Code` is the `## Code` section of a monty request (the rest of that request is a
/// `Request`): a program that merely names a host path or a `password=` keyword is not
/// an attempt to reach the host, so code gets rules of its own.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RuleTarget {
    Request,
    Result,
    Packet,
    Code,
}

impl RuleTarget {
    pub const ALL: [RuleTarget; 4] = [
        RuleTarget::Request,
        RuleTarget::Result,
        RuleTarget::Packet,
        RuleTarget::Code,
    ];

    /// The target's place in a per-target table ([`by_target`]).
    pub fn index(self) -> usize {
        match self {
            RuleTarget::Request => 0,
            RuleTarget::Result => 1,
            RuleTarget::Packet => 2,
            RuleTarget::Code => 3,
        }
    }
}

/// A compiled forbidden-content rule.
#[derive(Debug, Clone)]
pub struct ForbiddenRule {
    /// Stable reason code, for example `forbidden.secret`.
    pub code: String,
    pub message: String,
    pub pattern: RulePattern,
    /// Words matched against runs of spaced-out letters.
    pub spaced: Vec<String>,
    /// The document kinds the rule judges.
    pub applies_to: Vec<RuleTarget>,
    /// What text the pattern judges.
    pub reading: RuleReading,
    /// What of a result the rule judges.
    pub result_text: ResultText,
}

/// The largest limits a request may ask for.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitMaxima {
    pub max_memory_limit_mb: u64,
    pub max_time_limit_sec: u64,
    pub max_cpu_limit_sec: u64,
}

/// Caps on what a run may produce.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputCaps {
    pub stdout_max_bytes: u64,
    pub stderr_max_bytes: u64,
    pub out_max_bytes: u64,
    pub out_max_files: u64,
    pub excerpt_lines: usize,
}

/// One entry of the guest registry.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuestMapping {
    pub guest: String,
    pub programs: Vec<String>,
    pub languages: Vec<String>,
}

/// What is wrong with a `[[forbidden]]` rule; each names the rule.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("forbidden rule code {code:?} must start with `forbidden.`")]
    Code { code: String },
    /// The pattern did not compile (`reason` is the pattern compiler's own text).
    #[error("forbidden rule {code}: {reason}")]
    Pattern { code: String, reason: String },
    #[error(
        "forbidden rule {code}: `applies_to` is empty (omit it to apply the rule to every kind)"
    )]
    EmptyAppliesTo { code: String },
}

/// Compiles `[[forbidden]]` entries in policy order, each rule's pattern made by
/// `pattern` (compiled now, or deferred for the built-in policy).
pub fn compile<P, E>(
    files: Vec<ForbiddenRuleFile>,
    pattern: P,
) -> Result<Vec<ForbiddenRule>, RuleError>
where
    P: Fn(&str) -> Result<RulePattern, E>,
    E: std::fmt::Display,
{
    let mut forbidden = Vec::with_capacity(files.len());
    for rule in files {
        if !rule.code.starts_with("forbidden.") {
            return Err(RuleError::Code { code: rule.code });
        }
        let pattern = pattern(&rule.pattern).map_err(|e| RuleError::Pattern {
            code: rule.code.clone(),
            reason: e.to_string(),
        })?;
        let spaced = rule.spaced.iter().map(|w| w.to_lowercase()).collect();
        let applies_to = match rule.applies_to {
            None => RuleTarget::ALL.to_vec(),
            Some(list) if list.is_empty() => {
                return Err(RuleError::EmptyAppliesTo { code: rule.code });
            }
            Some(list) => list,
        };
        forbidden.push(ForbiddenRule {
            code: rule.code,
            message: rule.message,
            pattern,
            spaced,
            applies_to,
            reading: rule.reading,
            result_text: rule.result_text,
        });
    }
    Ok(forbidden)
}

/// The rules per [`RuleTarget`] (indexed by [`RuleTarget::index`]), in policy order.
pub fn by_target(rules: &[ForbiddenRule]) -> [Vec<ForbiddenRule>; 4] {
    RuleTarget::ALL.map(|target| {
        rules
            .iter()
            .filter(|r| r.applies_to.contains(&target))
            .cloned()
            .collect::<Vec<_>>()
    })
}

/// The built-in policy's forbidden rules, patterns compiled when first used: what the
/// core's own tests judge with (`runner::policy::Policy::builtin` holds the same rules).
pub fn builtin() -> Vec<ForbiddenRule> {
    #[derive(Deserialize)]
    struct Rules {
        forbidden: Vec<ForbiddenRuleFile>,
    }
    // The built-in text is checked by a unit test, so this cannot fail at run time.
    #[allow(clippy::expect_used)]
    let file: Rules = toml::from_str(DEFAULT_POLICY_TOML).expect("the built-in policy is valid");
    #[allow(clippy::expect_used)]
    compile(file.forbidden, |source| {
        Ok::<_, std::convert::Infallible>(RulePattern::deferred(source))
    })
    .expect("the built-in rules are valid")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    /// Each bad rule is refused with its own message, naming the rule.
    #[test]
    fn bad_rules_are_refused_naming_the_rule() {
        let rule =
            |code: &str, pattern: &str, applies_to: Option<Vec<RuleTarget>>| ForbiddenRuleFile {
                code: code.into(),
                message: "m".into(),
                pattern: pattern.into(),
                spaced: Vec::new(),
                reading: RuleReading::Any,
                result_text: ResultText::All,
                applies_to,
            };
        let cases = [
            (
                rule("secret", "x", None),
                "forbidden rule code \"secret\" must start with `forbidden.`",
            ),
            (
                rule("forbidden.x", "(", None),
                "forbidden rule forbidden.x: bad pattern (",
            ),
            (
                rule("forbidden.x", "x", Some(Vec::new())),
                "forbidden rule forbidden.x: `applies_to` is empty (omit it to apply the rule to every kind)",
            ),
        ];
        for (file, want) in cases {
            let got = compile(vec![file], |p: &str| {
                if p == "(" {
                    Err(format!("bad pattern {p}"))
                } else {
                    Ok(RulePattern::deferred(p))
                }
            })
            .unwrap_err();
            assert_eq!(got.to_string(), want);
        }
    }

    #[test]
    fn builtin_rules_are_the_policy_files_and_cover_every_target() {
        let rules = builtin();
        assert!(rules.len() > 5, "{}", rules.len());
        let table = by_target(&rules);
        for target in RuleTarget::ALL {
            assert!(!table[target.index()].is_empty(), "{target:?} has no rule");
        }
    }
}
