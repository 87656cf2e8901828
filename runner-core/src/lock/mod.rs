//! The replay lock (`TS-….lock.json`), after `../shared/references/replay-lock.md`.
//!
//! One canonical JSON object (RFC 8785) per run pins everything the run depended on —
//! the request's normalized text, the policy, the backend and engine, the guest's
//! sha256, the limits, every input — and everything it produced: stdout, stderr, every
//! artifact, the exit code, the outcome, and the result document itself. Its
//! `lock_sha256` is the sha256 of the canonical JSON of the object without that key:
//! the run's content address (L1). Digests carry their algorithm, `sha256:<hex>` (L9).
//!
//! Reading is strict (L8): the file must be exactly the canonical text of a lock
//! object, every key known and present, and `lock_sha256` must re-derive.

use crate::jcs;
pub mod statement;

use serde::{Deserialize, Serialize};

/// The value of `lock_type`.
pub const LOCK_TYPE: &str = "runner.lock/v1";

/// `sha256:<hex>` of bytes.
pub fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::digest::sha256_hex(bytes))
}

/// `sha256:<hex>` of text after the project's text normalization (BOM, CRLF, NFC).
pub fn text_sha256_tagged(text: &str) -> String {
    sha256_tagged(crate::normalize::for_hashing(text).as_bytes())
}

/// Adds the algorithm tag to a bare hex digest.
pub fn tag(hex: &str) -> String {
    format!("sha256:{hex}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub lock_type: String,
    pub result_id: String,
    pub created_utc: String,
    pub request: RequestPin,
    pub policy: PolicyPin,
    pub backend: String,
    pub runtime: RuntimePin,
    pub limits: LimitsPin,
    pub inputs_count: u64,
    pub inputs: Vec<FilePin>,
    pub outputs: OutputsPin,
    /// `sha256:` of the result document's normalized text.
    pub result_sha256: String,
    /// The baseline a replay was compared against (`runner replay`); absent in the lock
    /// of a plain `runner exec`, and in locks written before replays recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<ReplayOf>,
    /// The guest's clocks and entropy: what a replay runs with. Absent in
    /// locks written before runs recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determinism: Option<crate::determinism::DeterminismPin>,
    /// The egress log of a run granted `network: allowlist`; absent for a
    /// run without network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::net::NetworkLog>,
    /// What the run used (CPU, memory, wall time, bytes written).
    /// Varies run to run, like `created_utc`: replay compares the outputs it names,
    /// never this. Absent in locks written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::run::Usage>,
    pub lock_sha256: String,
}

/// What a replay's run was compared against: the baseline's lock, and each pin of the
/// baseline that differed from what the replay ran under (empty for a strict replay).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayOf {
    /// The baseline's `result_id`.
    pub result_id: String,
    /// The baseline's `lock_sha256`.
    pub lock_sha256: String,
    /// `strict` (every run pin equal) or `across-upgrade` (`--across-upgrade`).
    pub mode: String,
    pub changed_pins: Vec<PinChange>,
}

/// One pin whose value in the baseline's lock (`expected`) is not the one in force
/// (`actual`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PinChange {
    /// `policy` (the run-affecting tables, `policy.run_sha256`), `policy_text` (the
    /// whole text, `policy.sha256`), `runner`, `engine`, `guest`, `environment` or `limits`.
    pub pin: String,
    pub expected: String,
    pub actual: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestPin {
    pub request_id: String,
    /// `sha256:` of the request's normalized text.
    pub sha256: String,
    pub requested_by: String,
    pub approved_by: String,
    pub approved_utc: String,
    /// The key whose signature approved the request; `null` when it ran unsigned.
    pub approval_key: Option<ApprovalKeyPin>,
}

/// A trusted operator key that signed the request's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalKeyPin {
    /// `sha256:` of the raw Ed25519 public key.
    pub key_id: String,
    /// The name the policy trusts the key under (equal to `approved_by`).
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPin {
    /// `built-in` or the path given with `--policy`.
    pub origin: String,
    /// sha256 of the policy's text, comments included.
    pub sha256: String,
    /// sha256 of what in the policy decides how an accepted request runs
    /// ([`crate::policy::Policy::run_sha256`]); what replay compares. Absent in locks
    /// written before it existed (replay then compares `sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimePin {
    pub runner_version: String,
    /// `wasmtime` or `monty`.
    pub engine: String,
    pub engine_version: String,
    /// The guest, for ERA runs; `null` for monty.
    pub guest: Option<GuestPin>,
    /// The package environment mounted on the guest's import path; absent when the
    /// request selected none (and in locks written before environments existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentPin>,
}

/// A package environment as a run used it: its name, the `sha256:` of its installed
/// tree (`runner::environment::tree`) and every wheel it was unpacked from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentPin {
    pub name: String,
    pub tree_sha256: String,
    pub packages: Vec<WheelPin>,
}

/// One wheel of an environment: package name, exact version, `sha256:` of the wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPin {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

impl EnvironmentPin {
    /// The pin of a verified environment.
    pub fn of(found: &crate::environment::Located) -> Self {
        Self {
            name: found.name.clone(),
            tree_sha256: tag(&found.tree_sha256),
            packages: found
                .packages
                .iter()
                .map(|p| WheelPin {
                    name: p.name.clone(),
                    version: p.version.clone(),
                    sha256: tag(&p.sha256),
                })
                .collect(),
        }
    }

    /// One line for comparisons and messages: `name tree=sha256:… pkg==ver sha256:…, …`.
    pub fn summary(&self) -> String {
        let packages: Vec<String> = self
            .packages
            .iter()
            .map(|p| format!("{}=={} {}", p.name, p.version, p.sha256))
            .collect();
        format!(
            "{} tree={} [{}]",
            self.name,
            self.tree_sha256,
            packages.join(", ")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestPin {
    pub name: String,
    pub sha256: String,
    /// The pre-initialised form of that guest the run actually ran (`sha256:` hex of
    /// the module `runner guest fetch` built, see `guest::preinit`); absent when the
    /// plain module ran, as in every lock before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preinit_sha256: Option<String>,
}

/// Limits as integers (milliseconds and bytes), so the lock holds no floats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsPin {
    pub memory_bytes: u64,
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub out_bytes: u64,
    pub out_files: u64,
}

impl From<&crate::run::Limits> for LimitsPin {
    fn from(l: &crate::run::Limits) -> Self {
        Self {
            memory_bytes: l.memory_bytes,
            wall_ms: l.wall.as_millis() as u64,
            cpu_ms: l.cpu.as_millis() as u64,
            stdout_bytes: l.stdout_bytes,
            stderr_bytes: l.stderr_bytes,
            out_bytes: l.out_bytes,
            out_files: l.out_files,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePin {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamPin {
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputsPin {
    pub stdout: StreamPin,
    pub stderr: StreamPin,
    pub artifacts_count: u64,
    pub artifacts: Vec<FilePin>,
    pub exit_code: i32,
    pub outcome: String,
}

/// Why a lock file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error("the lock is not JSON: {0}")]
    NotJson(String),
    #[error("the lock does not have the lock's fields: {0}")]
    Shape(String),
    #[error("the lock is not in canonical form (RFC 8785); it was edited or not written by runner")]
    NotCanonical,
    #[error("lock_type is `{0}`, expected `runner.lock/v1`")]
    Type(String),
    #[error("{what} says {declared} but holds {actual} entries")]
    Count {
        what: &'static str,
        declared: u64,
        actual: u64,
    },
    #[error(
        "lock_sha256 does not re-derive: the lock says {declared}, its content hashes to {actual}"
    )]
    Rollup { declared: String, actual: String },
    #[error("cannot encode the lock: {0}")]
    Encode(String),
}

impl Lock {
    /// Computes `lock_sha256` over the object without that key.
    pub fn rollup(&self) -> Result<String, LockError> {
        let mut value = serde_json::to_value(self).map_err(|e| LockError::Encode(e.to_string()))?;
        if let Some(map) = value.as_object_mut() {
            map.remove("lock_sha256");
        }
        jcs::digest(&value).map_err(|e| LockError::Encode(e.to_string()))
    }

    /// Sets `lock_sha256` and returns the canonical text to write. Refuses a lock holding
    /// an integer beyond 2^53 - 1: RFC 8785 writes every number as a double, so the
    /// text would name another number and read back as another lock, or not at all.
    pub fn seal(mut self) -> Result<(Self, String), LockError> {
        self.inputs_count = self.inputs.len() as u64;
        self.outputs.artifacts_count = self.outputs.artifacts.len() as u64;
        let value = serde_json::to_value(&self).map_err(|e| LockError::Encode(e.to_string()))?;
        if let Some((field, n)) = beyond_exact_doubles(&value, String::new()) {
            return Err(LockError::Encode(format!(
                "`{field}` is {n}, beyond 2^53 - 1, the largest integer canonical JSON holds exactly"
            )));
        }
        self.lock_sha256 = self.rollup()?;
        let text = jcs::to_string(&self).map_err(|e| LockError::Encode(e.to_string()))?;
        Ok((self, text))
    }

    /// Parses a lock file strictly: canonical bytes, every field known and present,
    /// counts that match, and a `lock_sha256` that re-derives.
    pub fn parse(bytes: &[u8]) -> Result<Self, LockError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| LockError::NotJson(e.to_string()))?;
        // The writer refuses these (see `seal`); a reader that took one would hold a lock
        // the writer cannot write back.
        if let Some((field, n)) = beyond_exact_doubles(&value, String::new()) {
            return Err(LockError::Shape(format!(
                "`{field}` is {n}, beyond 2^53 - 1, the largest integer canonical JSON holds exactly"
            )));
        }
        let lock: Lock =
            serde_json::from_value(value.clone()).map_err(|e| LockError::Shape(e.to_string()))?;
        // A missing optional key deserializes as null; re-serializing shows it.
        let again = serde_json::to_value(&lock).map_err(|e| LockError::Encode(e.to_string()))?;
        if again != value {
            return Err(LockError::Shape(
                "a field is missing or has a value of another type".into(),
            ));
        }
        let canonical = jcs::to_string(&value).map_err(|e| LockError::Encode(e.to_string()))?;
        if canonical.as_bytes() != bytes {
            return Err(LockError::NotCanonical);
        }
        if lock.lock_type != LOCK_TYPE {
            return Err(LockError::Type(lock.lock_type));
        }
        if lock.inputs_count != lock.inputs.len() as u64 {
            return Err(LockError::Count {
                what: "inputs_count",
                declared: lock.inputs_count,
                actual: lock.inputs.len() as u64,
            });
        }
        if lock.outputs.artifacts_count != lock.outputs.artifacts.len() as u64 {
            return Err(LockError::Count {
                what: "outputs.artifacts_count",
                declared: lock.outputs.artifacts_count,
                actual: lock.outputs.artifacts.len() as u64,
            });
        }
        let actual = lock.rollup()?;
        if actual != lock.lock_sha256 {
            return Err(LockError::Rollup {
                declared: lock.lock_sha256,
                actual,
            });
        }
        Ok(lock)
    }
}

/// The first integer (its dotted path and value) that a double cannot hold exactly.
fn beyond_exact_doubles(value: &serde_json::Value, at: String) -> Option<(String, String)> {
    const MAX_SAFE: u64 = (1 << 53) - 1;
    let join = |key: &str| {
        if at.is_empty() {
            key.to_owned()
        } else {
            format!("{at}.{key}")
        }
    };
    match value {
        serde_json::Value::Number(n) => {
            let big = n.as_u64().is_some_and(|u| u > MAX_SAFE)
                || n.as_i64().is_some_and(|i| i.unsigned_abs() > MAX_SAFE);
            big.then(|| (at, n.to_string()))
        }
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| beyond_exact_doubles(v, format!("{at}[{i}]"))),
        serde_json::Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| beyond_exact_doubles(v, join(k))),
        _ => None,
    }
}

/// The lock's file name beside a result `TS-….md`.
pub fn lock_file_name(result_id: &str) -> String {
    format!("{result_id}.lock.json")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Lock {
        Lock {
            lock_type: LOCK_TYPE.into(),
            result_id: "TS-20261121-100000Z-TR-x".into(),
            created_utc: "2026-11-21T10:00:00Z".into(),
            request: RequestPin {
                request_id: "TR-x".into(),
                sha256: tag(&"a".repeat(64)),
                requested_by: "core".into(),
                approved_by: "ada".into(),
                approved_utc: "2026-11-21T09:00:00Z".into(),
                approval_key: Some(ApprovalKeyPin {
                    key_id: tag(&"9".repeat(64)),
                    name: "ada".into(),
                }),
            },
            policy: PolicyPin {
                origin: "built-in".into(),
                sha256: tag(&"b".repeat(64)),
                run_sha256: Some(tag(&"2".repeat(64))),
            },
            backend: "ERA".into(),
            runtime: RuntimePin {
                runner_version: "0.1.0".into(),
                engine: "wasmtime".into(),
                engine_version: "48.0.8".into(),
                guest: Some(GuestPin {
                    name: "cpython-3.12".into(),
                    sha256: tag(&"c".repeat(64)),
                    preinit_sha256: None,
                }),
                environment: None,
            },
            limits: LimitsPin {
                memory_bytes: 1,
                wall_ms: 2,
                cpu_ms: 3,
                stdout_bytes: 4,
                stderr_bytes: 5,
                out_bytes: 6,
                out_files: 7,
            },
            inputs_count: 0,
            inputs: vec![FilePin {
                path: "/in/ü.csv".into(),
                sha256: tag(&"d".repeat(64)),
                bytes: 10,
            }],
            outputs: OutputsPin {
                stdout: StreamPin {
                    sha256: tag(&"e".repeat(64)),
                    bytes: 3,
                },
                stderr: StreamPin {
                    sha256: tag(&"f".repeat(64)),
                    bytes: 0,
                },
                artifacts_count: 0,
                artifacts: vec![FilePin {
                    path: "summary.json".into(),
                    sha256: tag(&"0".repeat(64)),
                    bytes: 2,
                }],
                exit_code: 0,
                outcome: "completed".into(),
            },
            result_sha256: tag(&"1".repeat(64)),
            replay_of: Some(ReplayOf {
                result_id: "TS-20261120-100000Z-TR-x".into(),
                lock_sha256: tag(&"3".repeat(64)),
                mode: "across-upgrade".into(),
                changed_pins: vec![PinChange {
                    pin: "policy".into(),
                    expected: tag(&"4".repeat(64)),
                    actual: tag(&"2".repeat(64)),
                }],
            }),
            determinism: Some(crate::determinism::DeterminismPin {
                clock: "virtual-fixed-step/v1".into(),
                clock_start_unix_us: Some(1_763_719_200_000_000),
                clock_step_ns: Some(1000),
                entropy: "chacha20-seeded/v1".into(),
                seed: Some("5".repeat(64)),
            }),
            network: None,
            usage: None,
            lock_sha256: String::new(),
        }
    }

    #[test]
    fn seal_then_parse_round_trips() {
        let (lock, text) = sample().seal().unwrap();
        assert!(lock.lock_sha256.starts_with("sha256:"));
        assert_eq!(lock.inputs_count, 1);
        assert_eq!(Lock::parse(text.as_bytes()).unwrap(), lock);
        assert!(!text.contains('\n') && !text.contains(": "));
    }

    #[test]
    fn any_field_change_breaks_the_rollup() {
        let (_, text) = sample().seal().unwrap();
        // Change one character inside every string value in turn: each must be caught.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut paths = Vec::new();
        collect_strings(&value, String::new(), &mut paths);
        assert!(paths.len() > 20);
        for pointer in paths {
            let mut v = value.clone();
            let s = v.pointer_mut(&pointer).unwrap();
            let old = s.as_str().unwrap().to_owned();
            *s = serde_json::Value::String(format!("{old}x"));
            let tampered = jcs::to_string(&v).unwrap();
            assert!(
                Lock::parse(tampered.as_bytes()).is_err(),
                "tampering {pointer} went unnoticed"
            );
        }
    }

    fn collect_strings(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(_) => out.push(at),
            serde_json::Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, x)| collect_strings(x, format!("{at}/{i}"), out)),
            serde_json::Value::Object(m) => m
                .iter()
                .for_each(|(k, x)| collect_strings(x, format!("{at}/{k}"), out)),
            _ => {}
        }
    }

    #[test]
    fn strictness() {
        let (_, text) = sample().seal().unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // Unknown key.
        let mut u = v.clone();
        u.as_object_mut().unwrap().insert("extra".into(), 1.into());
        assert!(matches!(
            Lock::parse(jcs::to_string(&u).unwrap().as_bytes()),
            Err(LockError::Shape(_))
        ));
        // Missing optional key.
        let mut a = v.clone();
        a["request"].as_object_mut().unwrap().remove("approval_key");
        assert!(matches!(
            Lock::parse(jcs::to_string(&a).unwrap().as_bytes()),
            Err(LockError::Shape(_))
        ));
        v["runtime"].as_object_mut().unwrap().remove("guest");
        assert!(matches!(
            Lock::parse(jcs::to_string(&v).unwrap().as_bytes()),
            Err(LockError::Shape(_))
        ));
        // The keys added later may be absent (older locks), never null.
        let (_, text) = sample().seal().unwrap();
        let sealed: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (parent, key) in [
            ("", "replay_of"),
            ("/policy", "run_sha256"),
            ("", "determinism"),
        ] {
            let mut n = sealed.clone();
            n.pointer_mut(parent)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove(key);
            n.as_object_mut().unwrap().remove("lock_sha256");
            n["lock_sha256"] = serde_json::json!(jcs::digest(&n).unwrap());
            let old = Lock::parse(jcs::to_string(&n).unwrap().as_bytes()).unwrap();
            assert_eq!(
                Lock::parse(jcs::to_string(&old).unwrap().as_bytes()),
                Ok(old)
            );
            n.pointer_mut(parent).unwrap()[key] = serde_json::Value::Null;
            n.as_object_mut().unwrap().remove("lock_sha256");
            n["lock_sha256"] = serde_json::json!(jcs::digest(&n).unwrap());
            assert!(matches!(
                Lock::parse(jcs::to_string(&n).unwrap().as_bytes()),
                Err(LockError::Shape(_))
            ));
        }
        // Pretty-printed: not canonical.
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        )
        .unwrap();
        assert_eq!(Lock::parse(pretty.as_bytes()), Err(LockError::NotCanonical));
        // A count that lies.
        let (mut lock, _) = sample().seal().unwrap();
        lock.inputs_count = 5;
        lock.lock_sha256 = lock.rollup().unwrap();
        let t = jcs::to_string(&lock).unwrap();
        assert!(matches!(
            Lock::parse(t.as_bytes()),
            Err(LockError::Count { .. })
        ));
    }

    /// Found by fuzzing (fuzz_lock): a count or limit beyond 2^53 was written as the
    /// nearest double, so the sealed lock read back with another value, or (near
    /// u64::MAX) not at all. Sealing now refuses it.
    #[test]
    fn seal_refuses_integers_a_double_cannot_hold() {
        let mut lock = sample();
        lock.limits.out_bytes = (1 << 53) - 1;
        let (sealed, text) = lock.seal().unwrap();
        assert_eq!(Lock::parse(text.as_bytes()).unwrap(), sealed);
        for n in [(1 << 53) + 1, u64::MAX] {
            let mut lock = sample();
            lock.limits.out_bytes = n;
            let err = lock.seal().unwrap_err().to_string();
            assert!(err.contains("`limits.out_bytes`"), "{err}");
        }
        let mut lock = sample();
        lock.outputs.artifacts[0].bytes = 1 << 60;
        let err = lock.seal().unwrap_err().to_string();
        assert!(err.contains("`outputs.artifacts[0].bytes`"), "{err}");
    }

    /// The reader refuses what the writer refuses. Canonical JSON writes 2^60 as
    /// `1152921504606847000` (ECMAScript's shortest digits), and that text read as a u64
    /// canonicalizes to itself: a fixed point the reader took and the writer could not
    /// seal again (the fuzz_lock invariant), so the reader refuses it too.
    #[test]
    fn parse_refuses_integers_beyond_2_pow_53_even_when_canonical() {
        let (sealed, _) = sample().seal().unwrap();
        let mut value = serde_json::to_value(&sealed).unwrap();
        value["limits"]["out_bytes"] = serde_json::json!(1_152_921_504_606_847_000_u64);
        value.as_object_mut().unwrap().remove("lock_sha256");
        value["lock_sha256"] = serde_json::json!(jcs::digest(&value).unwrap());
        let text = jcs::to_string(&value).unwrap();
        assert!(
            text.contains("\"out_bytes\":1152921504606847000,"),
            "{text}"
        );
        let err = Lock::parse(text.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, LockError::Shape(m) if m.contains("`limits.out_bytes`")),
            "{err}"
        );
    }

    #[test]
    fn text_hash_normalizes() {
        assert_eq!(
            text_sha256_tagged("\u{feff}a\r\né"),
            text_sha256_tagged("a\ne\u{301}")
        );
    }
}
