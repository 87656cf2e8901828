//! The policy: limits maxima, request size cap, output caps, the guest registry, the
//! forbidden-content rules, approval, confinement, determinism, network and package
//! environments, parsed from text (`policies/default.toml` is built in; reading a
//! policy file is `runner::policy::load`'s). Unknown keys are errors; every regular
//! expression of a policy file is compiled at parse time so a bad rule fails before any
//! request is judged (the built-in policy's are compiled when first used: see
//! [`crate::rule_pattern`]), and every trusted approval key is parsed at parse time so
//! a bad key fails before any signature is checked.

pub mod confinement;
pub mod determinism;

use self::confinement::ConfinementPolicy;
use self::determinism::DeterminismPolicy;
use crate::digest::sha256_hex;
use crate::rule_pattern::RulePattern;
pub use crate::rules::{
    DEFAULT_POLICY_TOML, ForbiddenRule, ForbiddenRuleFile, GuestMapping, LimitMaxima, OutputCaps,
    RequestRules, ResultText, RuleTarget,
};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("policy {origin}: {message}")]
    Invalid { origin: String, message: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    request: RequestRules,
    limits: LimitMaxima,
    output: OutputCaps,
    #[serde(default)]
    guests: Vec<GuestMapping>,
    #[serde(default)]
    forbidden: Vec<ForbiddenRuleFile>,
    /// Absent: signatures not required, separation of duties on.
    #[serde(default)]
    approval: Option<ApprovalFile>,
    /// Absent: [`ConfinementPolicy::default`], the built-in policy's table. Present:
    /// every layer stated.
    #[serde(default)]
    confinement: Option<ConfinementPolicy>,
    /// Absent: virtual clocks and a recorded seed ([`DeterminismPolicy::default`]).
    #[serde(default)]
    determinism: Option<DeterminismPolicy>,
    /// Absent: no origin allowed (`network: allowlist` refused).
    #[serde(default)]
    network: Option<crate::net::NetworkFile>,
    /// Package environments requests may select by `language`.
    #[serde(default)]
    environments: Vec<crate::environment::EnvironmentSpec>,
}

/// The `[approval]` table as written. Both switches are required when the table is
/// present: a security setting should be stated, not inherited.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalFile {
    require_signed_approval: bool,
    separation_of_duties: bool,
    #[serde(default)]
    trusted: Vec<TrustedKeyFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustedKeyFile {
    name: String,
    public_key: String,
}

/// Who may approve, and how (`[approval]` in the policy).
#[derive(Debug, Clone)]
pub struct ApprovalPolicy {
    /// `runner exec` and `runner validate` reject a request without a valid signature
    /// (`TR-….md.sig`) by a trusted key registered under its `approved_by`.
    pub require_signed_approval: bool,
    /// `runner approve` refuses, and the approval check rejects, a request whose
    /// `requested_by` is its approver.
    pub separation_of_duties: bool,
    /// The operators' public keys, each under the name `approved_by` must carry.
    pub trusted: Vec<TrustedKey>,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            require_signed_approval: false,
            separation_of_duties: true,
            trusted: Vec::new(),
        }
    }
}

/// One `[[approval.trusted]]` entry, its key parsed.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub name: String,
    pub key: ed25519_dalek::VerifyingKey,
    /// `sha256:<hex>` of the raw public key ([`key_id`]).
    pub key_id: String,
}

impl ApprovalPolicy {
    /// The trusted entry holding the key with this id.
    pub fn trusted_by_key_id(&self, key_id: &str) -> Option<&TrustedKey> {
        self.trusted.iter().find(|t| t.key_id == key_id)
    }
}

/// The effective policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub request: RequestRules,
    pub limits: LimitMaxima,
    pub output: OutputCaps,
    pub guests: Vec<GuestMapping>,
    /// The rules that apply to tool requests (the request validator scans with these).
    /// Every kind's rules: [`Policy::rules_for`].
    pub forbidden: Vec<ForbiddenRule>,
    /// Approval rules and the trusted operator keys.
    pub approval: ApprovalPolicy,
    /// Which worker confinement layers a run requires (`[confinement]`).
    pub confinement: ConfinementPolicy,
    /// The guest's clocks and entropy (`[determinism]`).
    pub determinism: DeterminismPolicy,
    /// What `network: allowlist` may reach (`[network]`).
    pub network: crate::net::NetworkPolicy,
    /// The operator's package environments (`[[environments]]`), checked at load.
    pub environments: Vec<crate::environment::EnvironmentSpec>,
    /// The rules per [`RuleTarget`], in policy order.
    rules_by_target: [Vec<ForbiddenRule>; 4],
    /// sha256 of the policy text as loaded (pinned in results and locks).
    pub sha256: String,
    /// sha256 of what in the policy decides how an accepted request runs
    /// (`run_sha256`): the hash `runner replay` compares.
    pub run_sha256: String,
    /// Where it came from: `built-in` or a path.
    pub origin: String,
    /// The policy text as loaded, for `runner policy show`.
    pub text: String,
}

impl Policy {
    /// The built-in default policy.
    pub fn builtin() -> Self {
        // The built-in text is checked by a unit test, so this cannot fail at run time.
        #[allow(clippy::expect_used)]
        Self::parse_rules(DEFAULT_POLICY_TOML, "built-in", |source| {
            Ok::<_, std::convert::Infallible>(RulePattern::deferred(source))
        })
        .expect("the built-in policy is valid")
    }

    /// Parses a policy's text; `origin` (`built-in` or the file's path) names it in
    /// errors and in [`Policy::origin`].
    pub fn parse(text: &str, origin: &str) -> Result<Self, PolicyError> {
        Self::parse_rules(text, origin, |source| {
            RulePattern::compile(source).map_err(|e| e.to_string())
        })
    }

    /// [`Policy::parse`], each rule's pattern made by `pattern` (compiled now, or
    /// deferred for the built-in policy).
    fn parse_rules<P, E>(text: &str, origin: &str, pattern: P) -> Result<Self, PolicyError>
    where
        P: Fn(&str) -> Result<RulePattern, E>,
        E: std::fmt::Display,
    {
        let invalid = |message: String| PolicyError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        let file: PolicyFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.request.max_bytes == 0 {
            return Err(invalid("request.max_bytes must be positive".into()));
        }
        if file.output.excerpt_lines == 0 {
            return Err(invalid("output.excerpt_lines must be positive".into()));
        }
        let forbidden =
            crate::rules::compile(file.forbidden, pattern).map_err(|e| invalid(e.to_string()))?;
        let approval = match file.approval {
            None => ApprovalPolicy::default(),
            Some(a) => approval_policy(a).map_err(|e| invalid(e.to_string()))?,
        };
        let rules_by_target = crate::rules::by_target(&forbidden);
        let confinement = file.confinement.unwrap_or_default();
        let determinism = file.determinism.unwrap_or_default();
        let network = match file.network.clone() {
            None => crate::net::NetworkPolicy::default(),
            Some(n) => {
                crate::net::NetworkPolicy::from_file(n).map_err(|e| invalid(e.to_string()))?
            }
        };
        let run_sha256 = run_sha256(
            &file.output,
            &file.guests,
            &confinement,
            &determinism,
            file.network.as_ref(),
        )
        .map_err(|e| invalid(format!("cannot canonicalize the run tables: {e}")))?;
        crate::environment::check_specs(&file.environments, &file.guests)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            request: file.request,
            limits: file.limits,
            output: file.output,
            guests: file.guests,
            forbidden: rules_by_target[RuleTarget::Request.index()].clone(),
            approval,
            confinement,
            determinism,
            network,
            environments: file.environments,
            rules_by_target,
            sha256: sha256_hex(text.as_bytes()),
            run_sha256,
            origin: origin.to_owned(),
            text: text.to_owned(),
        })
    }

    /// The forbidden-content rules that judge documents of kind `target`. The result
    /// writer withholds excerpt lines with `rules_for(RuleTarget::Result)`, the same rules
    /// the result validator applies, so a result the runner writes passes its own gate.
    pub fn rules_for(&self, target: RuleTarget) -> &[ForbiddenRule] {
        &self.rules_by_target[target.index()]
    }

    /// Prepares the rules for `target` now (their literal conditions; the pipeline does
    /// it for the result rules while a guest runs, so publishing does not wait for them).
    pub fn warm(&self, target: RuleTarget) {
        for rule in self.rules_for(target) {
            rule.pattern.warm();
        }
    }

    /// The guest a request's `language` selects, if any (case-insensitive): a guest's
    /// own language, or one of a package environment's, which selects the environment's
    /// guest.
    pub fn guest_for_language(&self, language: &str) -> Option<&GuestMapping> {
        let language = language.trim().to_ascii_lowercase();
        let direct = self.guests.iter().find(|g| {
            g.languages
                .iter()
                .any(|l| l.eq_ignore_ascii_case(&language))
        });
        direct.or_else(|| {
            let env = self.environment_for_language(&language)?;
            self.guests.iter().find(|g| g.guest == env.guest)
        })
    }

    /// The package environment a request's `language` selects, if any
    /// (case-insensitive).
    pub fn environment_for_language(
        &self,
        language: &str,
    ) -> Option<&crate::environment::EnvironmentSpec> {
        let language = language.trim();
        self.environments
            .iter()
            .find(|e| e.languages.iter().any(|l| l.eq_ignore_ascii_case(language)))
    }

    /// The package environment named `name`.
    pub fn environment(&self, name: &str) -> Option<&crate::environment::EnvironmentSpec> {
        self.environments.iter().find(|e| e.name == name)
    }

    /// The guest a command's program word selects, if any: the first that registers it.
    pub fn guest_for_program(&self, program: &str) -> Option<&GuestMapping> {
        self.guests
            .iter()
            .find(|g| g.programs.iter().any(|p| p == program))
    }

    /// Every language a request may name: the guests' and the environments'.
    pub fn languages(&self) -> Vec<&str> {
        let guests = self.guests.iter().flat_map(|g| &g.languages);
        let envs = self.environments.iter().flat_map(|e| &e.languages);
        guests.chain(envs).map(String::as_str).collect()
    }
}

/// The value of `run_policy_type` in the object `run_sha256` hashes.
pub const RUN_POLICY_TYPE: &str = "runner.policy-run/v1";

/// sha256 (64 hex) of the canonical JSON (RFC 8785) of the tables that decide how an
/// accepted request runs and what it may produce: `[output]`, `[[guests]]` and the
/// effective `[confinement]` (defaults filled in) and `[determinism]` (when not the
/// default), with `run_policy_type`.
///
/// Left out, because they cannot change the outputs of a request that was accepted:
/// comments and formatting; `[approval]` (who may approve); `[request]`, `[limits]`
/// and `[[forbidden]]` (whether a request is accepted: a replay judges the request again
/// under the policy in force, so a change there is a REJECT, never hidden drift; the
/// forbidden rules also withhold excerpt lines of the result document, which replay
/// does not compare). The request's own limits are pinned in the lock by themselves.
/// `[network]` is included when present (what a guest may fetch changes what it
/// produces); a policy without it hashes as before the table existed.
fn run_sha256(
    output: &OutputCaps,
    guests: &[GuestMapping],
    confinement: &ConfinementPolicy,
    determinism: &DeterminismPolicy,
    network: Option<&crate::net::NetworkFile>,
) -> Result<String, serde_json::Error> {
    let mut value = serde_json::json!({
        "run_policy_type": RUN_POLICY_TYPE,
        "output": output,
        "guests": guests,
        "confinement": confinement,
    });
    // Hashed only when it is not the default, so that the run hash of a policy that
    // leaves `[determinism]` at its default is the one locks pinned before the table
    // existed (they still replay strictly).
    if *determinism != DeterminismPolicy::default()
        && let Some(map) = value.as_object_mut()
    {
        map.insert("determinism".into(), serde_json::json!(determinism));
    }
    if let Some(n) = network {
        value["network"] = serde_json::json!(n);
    }
    let text = crate::jcs::to_string(&value)?;
    Ok(sha256_hex(text.as_bytes()))
}

/// Parses and checks the trusted keys: names visible and single-line, every key an
/// Ed25519 SPKI PEM, no key listed twice (one key under two names would make the
/// signer's name ambiguous).
fn approval_policy(file: ApprovalFile) -> Result<ApprovalPolicy, TrustedKeyError> {
    let mut trusted: Vec<TrustedKey> = Vec::with_capacity(file.trusted.len());
    for (i, entry) in file.trusted.into_iter().enumerate() {
        let n = i + 1;
        let name = entry.name.trim().to_owned();
        if name.is_empty()
            || name
                .chars()
                .any(|c| c.is_control() || crate::normalize::is_invisible(c))
        {
            return Err(TrustedKeyError::BadName { entry: n });
        }
        let key = match parse_public_key_pem(&entry.public_key) {
            Ok(key) => key,
            Err(source) => {
                return Err(TrustedKeyError::BadKey {
                    entry: n,
                    name,
                    source,
                });
            }
        };
        let key_id = key_id(&key);
        if let Some(other) = trusted.iter().find(|t| t.key_id == key_id) {
            return Err(TrustedKeyError::ListedTwice {
                key_id,
                first: other.name.clone(),
                second: name,
            });
        }
        trusted.push(TrustedKey { name, key, key_id });
    }
    Ok(ApprovalPolicy {
        require_signed_approval: file.require_signed_approval,
        separation_of_duties: file.separation_of_duties,
        trusted,
    })
}

/// `sha256:<hex>` of the raw 32-byte public key: the key's id in envelopes and logs.
pub fn key_id(key: &ed25519_dalek::VerifyingKey) -> String {
    format!("sha256:{}", sha256_hex(key.as_bytes()))
}

/// An Ed25519 public key from its SPKI PEM text; the error says what it is not.
pub fn parse_public_key_pem(text: &str) -> Result<ed25519_dalek::VerifyingKey, PublicKeyError> {
    use ed25519_dalek::pkcs8::DecodePublicKey;
    ed25519_dalek::VerifyingKey::from_public_key_pem(text.trim())
        .map_err(|e| PublicKeyError(e.to_string()))
}

/// Text that is not an Ed25519 public key PEM ([`parse_public_key_pem`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an Ed25519 public key PEM: {0}")]
pub struct PublicKeyError(pub String);

/// What is wrong with an `[approval]` trusted key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustedKeyError {
    #[error(
        "approval.trusted entry {entry}: `name` must be a non-empty single line of visible text"
    )]
    BadName { entry: usize },
    #[error("approval.trusted entry {entry} ({name}): {source}")]
    BadKey {
        entry: usize,
        name: String,
        source: PublicKeyError,
    },
    #[error("approval.trusted: key {key_id} is listed twice (as `{first}` and as `{second}`)")]
    ListedTwice {
        key_id: String,
        first: String,
        second: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run hash ignores what cannot change a run's outputs (comments, the
    /// `[approval]` table, the acceptance rules) and follows what can (an output cap,
    /// a guest mapping, a confinement layer); the text hash follows everything.
    #[test]
    fn run_sha256_follows_only_the_run_tables() {
        let base = Policy::builtin();
        let variant = |from: &str, to: &str| {
            assert!(DEFAULT_POLICY_TOML.contains(from), "{from}");
            Policy::parse(&DEFAULT_POLICY_TOML.replacen(from, to, 1), "variant").unwrap()
        };
        let same_run = [
            variant("[request]", "# a comment\n[request]"),
            variant(
                "separation_of_duties = true",
                "separation_of_duties = false",
            ),
            variant("max_bytes = 1048576", "max_bytes = 1048577"),
            variant("max_time_limit_sec = 900", "max_time_limit_sec = 901"),
            variant("code = \"forbidden.", "code = \"forbidden.x"),
        ];
        let explicit_default = variant(
            "[confinement]",
            "[determinism]\nclock = \"virtual\"\nentropy = \"seeded\"\n[confinement]",
        );
        assert_eq!(explicit_default.run_sha256, base.run_sha256);
        for p in &same_run {
            assert_ne!(p.sha256, base.sha256);
            assert_eq!(p.run_sha256, base.run_sha256);
        }
        let other_run = [
            variant("out_max_files = 4096", "out_max_files = 4095"),
            variant("excerpt_lines = 200", "excerpt_lines = 20"),
            variant("\"python3.12\"]", "\"python3.12\", \"py\"]"),
            variant("landlock = \"optional\"", "landlock = \"required\""),
            variant(
                "[confinement]",
                "[determinism]\nclock = \"virtual\"\nentropy = \"host\"\n[confinement]",
            ),
        ];
        for p in &other_run {
            assert_ne!(p.run_sha256, base.run_sha256);
        }
        // An absent [confinement] means the built-in table: the same run hash.
        let start = DEFAULT_POLICY_TOML.find("[confinement]").unwrap();
        let end = DEFAULT_POLICY_TOML.find("[[guests]]").unwrap();
        let without = format!(
            "{}{}",
            &DEFAULT_POLICY_TOML[..start],
            &DEFAULT_POLICY_TOML[end..]
        );
        let p = Policy::parse(&without, "no confinement table").unwrap();
        assert_eq!(p.run_sha256, base.run_sha256);
    }

    #[test]
    fn builtin_policy_parses() {
        let p = Policy::parse(DEFAULT_POLICY_TOML, "built-in").unwrap();
        assert_eq!(p.request.max_bytes, 1 << 20);
        assert!(p.guest_for_program("python3").is_some());
        assert!(p.guest_for_program("bash").is_none());
        assert!(p.guest_for_language("Python").is_some());
        assert!(p.forbidden.iter().any(|r| r.code == "forbidden.secret"));
    }

    #[test]
    fn determinism_table_defaults_and_must_be_stated_whole() {
        use super::determinism::{ClockSource, DeterminismPolicy, EntropySource};
        assert_eq!(Policy::builtin().determinism, DeterminismPolicy::default());
        let with = |body: &str| format!("{DEFAULT_POLICY_TOML}\n[determinism]\n{body}");
        let p = Policy::parse(&with("clock = \"host\"\nentropy = \"host\"\n"), "t").unwrap();
        assert_eq!(
            (p.determinism.clock, p.determinism.entropy),
            (ClockSource::Host, EntropySource::Host)
        );
        for (body, named) in [
            ("clock = \"host\"\n", "entropy"),
            ("clock = \"fuel\"\nentropy = \"host\"\n", "fuel"),
            (
                "clock = \"host\"\nentropy = \"host\"\nseed = \"00\"\n",
                "seed",
            ),
        ] {
            let err = Policy::parse(&with(body), "t").unwrap_err().to_string();
            assert!(err.contains(named), "{err}");
        }
    }

    #[test]
    fn unknown_key_is_an_error() {
        let text = format!("{DEFAULT_POLICY_TOML}\n[surprise]\nx = 1\n");
        let err = Policy::parse(&text, "t").unwrap_err().to_string();
        assert!(err.contains("surprise"), "{err}");
    }

    #[test]
    fn applies_to_selects_rules_per_kind() {
        let p = Policy::builtin();
        let codes = |t| -> Vec<&str> { p.rules_for(t).iter().map(|r| r.code.as_str()).collect() };
        // `forbidden` is exactly the request rules.
        assert_eq!(
            p.forbidden
                .iter()
                .map(|r| r.code.as_str())
                .collect::<Vec<_>>(),
            codes(RuleTarget::Request)
        );
        assert!(codes(RuleTarget::Request).contains(&"forbidden.host_path"));
        assert!(!codes(RuleTarget::Packet).contains(&"forbidden.host_path"));
        assert!(!codes(RuleTarget::Request).contains(&"forbidden.runnable_command"));
        // Code names paths freely (they fail at run time); devices and secrets still count.
        assert!(!codes(RuleTarget::Code).contains(&"forbidden.host_path"));
        assert!(codes(RuleTarget::Code).contains(&"forbidden.privileged_device"));
        for t in RuleTarget::ALL {
            assert!(codes(t).contains(&"forbidden.secret"), "{t:?}");
            assert!(codes(t).contains(&"forbidden.package_install"), "{t:?}");
        }
        for t in [RuleTarget::Result, RuleTarget::Packet] {
            for code in [
                "forbidden.runnable_command",
                "forbidden.hierarchy_override",
                "forbidden.persistence",
                "forbidden.instruction_to_run",
            ] {
                assert!(codes(t).contains(&code), "{t:?} lacks {code}");
            }
        }
    }

    #[test]
    fn applies_to_unknown_kind_or_empty_is_an_error() {
        let base = "[request]\nmax_bytes = 1\nmax_yaml_depth = 1\nmax_yaml_nodes = 1\n[limits]\nmax_memory_limit_mb = 1\nmax_time_limit_sec = 1\nmax_cpu_limit_sec = 1\n[output]\nstdout_max_bytes = 1\nstderr_max_bytes = 1\nout_max_bytes = 1\nout_max_files = 1\nexcerpt_lines = 1\n";
        let rule = |applies: &str| {
            format!(
                "{base}[[forbidden]]\ncode = \"forbidden.x\"\nmessage = \"x\"\npattern = \"x\"\n{applies}"
            )
        };
        let p = Policy::parse(&rule("applies_to = [\"result\"]"), "t").unwrap();
        assert!(p.forbidden.is_empty());
        assert_eq!(p.rules_for(RuleTarget::Result).len(), 1);
        assert!(Policy::parse(&rule("applies_to = [\"email\"]"), "t").is_err());
        assert!(Policy::parse(&rule("applies_to = []"), "t").is_err());
        let all = Policy::parse(&rule(""), "t").unwrap();
        assert!(RuleTarget::ALL.iter().all(|t| all.rules_for(*t).len() == 1));
    }

    #[test]
    fn approval_table_defaults_and_trusted_keys() {
        use ed25519_dalek::pkcs8::EncodePublicKey;
        let p = Policy::builtin();
        assert!(!p.approval.require_signed_approval);
        assert!(p.approval.separation_of_duties);
        assert!(p.approval.trusted.is_empty());

        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let pem = key.to_public_key_pem(Default::default()).unwrap();
        let with = |body: &str| {
            DEFAULT_POLICY_TOML.replace(
                "require_signed_approval = false",
                &format!("require_signed_approval = true\n{body}"),
            )
        };
        let entry = |name: &str, pem: &str| {
            format!("[[approval.trusted]]\nname = \"{name}\"\npublic_key = \"\"\"\n{pem}\"\"\"\n")
        };
        // Sub-tables may follow `[approval]` anywhere in the file.
        let text = format!("{}\n{}", with(""), entry("operator-ada", &pem));
        let p = Policy::parse(&text, "t").unwrap();
        assert!(p.approval.require_signed_approval);
        assert_eq!(p.approval.trusted.len(), 1);
        assert_eq!(p.approval.trusted[0].name, "operator-ada");
        assert_eq!(p.approval.trusted[0].key_id, key_id(&key));
        assert!(p.approval.trusted_by_key_id(&key_id(&key)).is_some());

        // A key that does not parse, a key listed twice, an empty name, an unknown key.
        let truncated = &pem[..pem.len() / 2];
        let bad = format!("{}\n{}", with(""), entry("ada", truncated));
        let err = Policy::parse(&bad, "t").unwrap_err().to_string();
        assert!(err.contains("approval.trusted entry 1 (ada)"), "{err}");
        let twice = format!("{}\n{}{}", with(""), entry("ada", &pem), entry("bob", &pem));
        let err = Policy::parse(&twice, "t").unwrap_err().to_string();
        assert!(err.contains("listed twice"), "{err}");
        let empty = format!("{}\n{}", with(""), entry(" ", &pem));
        assert!(Policy::parse(&empty, "t").is_err());
        assert!(Policy::parse(&with("surprise = 1"), "t").is_err());
        // Both switches must be stated when the table is present.
        let missing = DEFAULT_POLICY_TOML.replace("separation_of_duties = true\n", "");
        assert_ne!(missing, DEFAULT_POLICY_TOML);
        assert!(Policy::parse(&missing, "t").is_err());
    }

    #[test]
    fn confinement_table_is_the_default_and_every_layer_must_be_stated() {
        use super::confinement::{Layer, Requirement};
        let p = Policy::builtin();
        assert_eq!(p.confinement, ConfinementPolicy::default());
        assert_eq!(
            p.confinement.requirement(Layer::Seccomp),
            Requirement::Required
        );
        assert_eq!(
            p.confinement.requirement(Layer::NetNamespace),
            Requirement::Optional
        );
        // Turning a layer to required parses; a missing key, an unknown layer or an
        // unknown value is a policy error.
        let strict = DEFAULT_POLICY_TOML.replace(
            "net_namespace = \"optional\"",
            "net_namespace = \"required\"",
        );
        assert_ne!(strict, DEFAULT_POLICY_TOML);
        let p = Policy::parse(&strict, "t").unwrap();
        assert_eq!(
            p.confinement.requirement(Layer::NetNamespace),
            Requirement::Required
        );
        let missing = DEFAULT_POLICY_TOML.replace("seccomp = \"required\"\n", "");
        assert_ne!(missing, DEFAULT_POLICY_TOML);
        let err = Policy::parse(&missing, "t").unwrap_err().to_string();
        assert!(err.contains("seccomp"), "{err}");
        let unknown = DEFAULT_POLICY_TOML.replace(
            "seccomp = \"required\"\n",
            "seccomp = \"required\"\napparmor = \"required\"\n",
        );
        assert!(Policy::parse(&unknown, "t").is_err());
        let value = DEFAULT_POLICY_TOML.replace("seccomp = \"required\"", "seccomp = \"off\"");
        assert!(Policy::parse(&value, "t").is_err());
    }

    #[test]
    fn bad_regex_is_an_error() {
        let text = DEFAULT_POLICY_TOML.replacen("pattern = '''", "pattern = '''(", 1);
        assert!(Policy::parse(&text, "t").is_err());
    }
}
