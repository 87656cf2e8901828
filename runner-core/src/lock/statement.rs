//! The in-toto Statement (v1) emitted for each run: subjects are the result document
//! and the artifacts by digest; the predicate records the request, its approval, the
//! materials (inputs and guest) and the byproducts (stdout, stderr, exit code). Written
//! canonical (RFC 8785) as `TS-….intoto.json`; optionally signed in a DSSE envelope.

use super::{Lock, jcs};
use serde_json::{Value, json};

/// The in-toto statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// This project's predicate type.
pub const PREDICATE_TYPE: &str = "urn:runner:predicate:tool-exec-run:v1";
/// DSSE payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

fn hex(tagged: &str) -> &str {
    tagged.strip_prefix("sha256:").unwrap_or(tagged)
}

/// The statement for a sealed lock. `result_file` is the result document's file name.
pub fn statement(lock: &Lock, result_file: &str) -> Value {
    let mut subject =
        vec![json!({"name": result_file, "digest": {"sha256": hex(&lock.result_sha256)}})];
    subject.extend(
        lock.outputs.artifacts.iter().map(
            |a| json!({"name": format!("out/{}", a.path), "digest": {"sha256": hex(&a.sha256)}}),
        ),
    );
    // The recorded response bodies are materials of the run: what the guest was given.
    let network_materials = lock
        .network
        .iter()
        .flat_map(|n| &n.exchanges)
        .filter_map(|e| {
            e.response_sha256.as_ref().map(|sha| {
            json!({"uri": format!("{} {}", e.method, e.url), "digest": {"sha256": hex(sha)}})
        })
        });
    let mut materials: Vec<Value> = lock
        .inputs
        .iter()
        .map(|i| json!({"uri": i.path, "digest": {"sha256": hex(&i.sha256)}}))
        .collect();
    if let Some(g) = &lock.runtime.guest {
        materials.push(
            json!({"uri": format!("guest:{}", g.name), "digest": {"sha256": hex(&g.sha256)}}),
        );
    }
    // A package environment: its installed tree, and every wheel it came from.
    if let Some(e) = &lock.runtime.environment {
        materials.push(json!({
            "uri": format!("environment:{}", e.name),
            "digest": {"sha256": hex(&e.tree_sha256)},
        }));
        materials.extend(e.packages.iter().map(|p| {
            json!({
                "uri": format!("pkg:pypi/{}@{}", p.name, p.version),
                "digest": {"sha256": hex(&p.sha256)},
            })
        }));
    }
    materials.extend(network_materials);
    let mut statement = json!({
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "request": {"request_id": lock.request.request_id, "digest": {"sha256": hex(&lock.request.sha256)}},
            "approval": {
                "approved_by": lock.request.approved_by,
                "approved_utc": lock.request.approved_utc,
                "key": lock.request.approval_key.as_ref().map(|k| json!({"keyid": k.key_id, "name": k.name})),
            },
            "materials": materials,
            "runtime": {"runner_version": lock.runtime.runner_version, "engine": lock.runtime.engine, "engine_version": lock.runtime.engine_version},
            "policy": {"digest": {"sha256": hex(&lock.policy.sha256)}},
            "byproducts": {
                "stdout": {"digest": {"sha256": hex(&lock.outputs.stdout.sha256)}},
                "stderr": {"digest": {"sha256": hex(&lock.outputs.stderr.sha256)}},
                "exit_code": lock.outputs.exit_code,
                "outcome": lock.outputs.outcome,
            },
            "lock": {"digest": {"sha256": hex(&lock.lock_sha256)}},
        }
    });
    // The clocks and entropy the guest saw; absent, as in the lock, for a run recorded
    // before them, so such a statement still re-derives.
    if let (Some(pin), Some(predicate)) =
        (&lock.determinism, statement["predicate"].as_object_mut())
    {
        predicate.insert("determinism".into(), json!(pin));
    }
    // The egress log of a run with network; a run without has no key (its statement is
    // byte for byte what it was before the log existed).
    if let Some(n) = &lock.network {
        statement["predicate"]["network"] = json!(n);
    }
    if let Some(u) = &lock.usage {
        statement["predicate"]["usage"] = json!(u);
    }
    statement
}

/// Canonical text of the statement.
pub fn statement_text(lock: &Lock, result_file: &str) -> Result<String, serde_json::Error> {
    jcs::to_string(&statement(lock, result_file))
}

/// File names beside a result.
pub fn statement_file_name(result_id: &str) -> String {
    format!("{result_id}.intoto.json")
}
pub fn envelope_file_name(result_id: &str) -> String {
    format!("{result_id}.intoto.dsse.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_names_every_artifact_and_material() {
        let (lock, _) = crate::lock::tests::sample().seal().unwrap();
        let s = statement(&lock, "TS-x.md");
        assert_eq!(s["_type"], STATEMENT_TYPE);
        assert_eq!(s["subject"].as_array().unwrap().len(), 2);
        assert_eq!(s["subject"][1]["name"], "out/summary.json");
        assert_eq!(s["predicate"]["materials"].as_array().unwrap().len(), 2);
        assert_eq!(s["predicate"]["approval"]["approved_by"], "ada");
        assert_eq!(s["predicate"]["approval"]["key"]["name"], "ada");
        assert_eq!(
            s["predicate"]["approval"]["key"]["keyid"],
            format!("sha256:{}", "9".repeat(64))
        );
        assert_eq!(s["predicate"]["determinism"]["seed"], "5".repeat(64));
        let mut old = lock.clone();
        old.determinism = None;
        assert!(
            statement(&old, "TS-x.md")["predicate"]
                .get("determinism")
                .is_none()
        );
        assert_eq!(
            s["predicate"]["lock"]["digest"]["sha256"],
            lock.lock_sha256.trim_start_matches("sha256:")
        );
    }
}
