//! `runner env fetch|install|list`: the policy's package environments
//! (`[[environments]]`), fetched with pip by name, version and sha256, installed from
//! local wheels on offline hosts, and listed.

use super::output::{self, Progress};
use runner_contract::exit_codes;
use runner_core::environment::EnvironmentSpec;
use runner_core::environment::Located;
use runner_core::environment::PackagePin;
use runner_core::policy::Policy;
use runner_pipeline::environment::{self, EnvironmentStatus};
use runner_pipeline::guest::GuestManifest;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner --policy policy.toml env list
  runner --policy policy.toml env fetch analysis
  runner --policy policy.toml env install analysis --wheel tabulate-0.9.0-py3-none-any.whl
  runner env fetch --from-lock results/TS-20261121-100000Z-TR-x.lock.json

Environments are stored content-addressed in $RUNNER_ENV_DIR (default: <cache>/envs).")]
pub struct EnvCommand {
    #[command(subcommand)]
    pub action: EnvAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum EnvAction {
    /// Download environments' wheels with pip (pinned by name, version and sha256),
    /// check they are pure Python, unpack them and record the tree's hash.
    #[command(after_help = "\
Examples:
  runner --policy policy.toml env fetch
  runner --policy policy.toml env fetch analysis --json
  runner env fetch --from-lock results/TS-20261121-100000Z-TR-x.lock.json")]
    Fetch {
        /// Environment names (default: every environment of the policy). Example:
        /// `analysis`.
        #[arg(value_name = "NAME", conflicts_with = "from_lock")]
        names: Vec<String>,
        /// Fetch the environment a result's lock pins (for `runner replay`). Example:
        /// `--from-lock results/TS-….lock.json`.
        #[arg(long, value_name = "LOCK")]
        from_lock: Option<PathBuf>,
        /// Print one JSON object (schema: schemas/env-fetch.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// Install an environment from local wheels (offline hosts), with fetch's checks.
    #[command(after_help = "\
Examples:
  pip download --no-deps --require-hashes -r pins.txt -d wheels/
  runner --policy policy.toml env install analysis --wheel wheels/*.whl")]
    Install {
        /// The environment's name in the policy. Example: `analysis`.
        #[arg(value_name = "NAME")]
        name: String,
        /// The wheel files, one per pinned package; each sha256 must be pinned. Example:
        /// `--wheel tabulate-0.9.0-py3-none-any.whl`.
        #[arg(long, value_name = "FILE", num_args = 1.., required = true)]
        wheel: Vec<PathBuf>,
        /// Print one JSON object (schema: schemas/env-fetch.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// List the policy's environments: installed?, tree sha256, packages.
    #[command(after_help = "\
Examples:
  runner --policy policy.toml env list
  runner --policy policy.toml env list --json | jq -r '.[] | select(.installed | not) | .name'")]
    List {
        /// Print a JSON array (schema: schemas/env-list.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
}

/// What `runner env fetch --json` and `runner env install --json` print.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EnvFetchReport {
    pub environments: Vec<EnvLocation>,
}

/// An installed, verified environment.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EnvLocation {
    pub name: String,
    /// The tree's directory (mounted read-only at `/site-packages` in the guest).
    pub path: PathBuf,
    /// sha256 of the installed tree (64 lowercase hex), as locks pin it.
    pub tree_sha256: String,
    pub packages: Vec<PackagePin>,
}

impl From<Located> for EnvLocation {
    fn from(l: Located) -> Self {
        Self {
            name: l.name,
            path: l.dir,
            tree_sha256: l.tree_sha256,
            packages: l.packages,
        }
    }
}

/// The rows of `runner env list --json`.
pub type EnvListReport = Vec<EnvironmentStatus>;

impl EnvCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        match run(self.action, policy) {
            Ok(code) => code,
            Err((code, e)) => {
                output::error(e);
                code
            }
        }
    }
}

type Failure = (i32, String);

fn usage(message: String) -> Failure {
    (exit_codes::USAGE, message)
}

fn io(message: impl ToString) -> Failure {
    (exit_codes::IO, message.to_string())
}

/// The policy's environment `name`, or a usage error listing the known ones.
fn spec<'a>(policy: &'a Policy, name: &str) -> Result<&'a EnvironmentSpec, Failure> {
    policy.environment(name).ok_or_else(|| {
        let known: Vec<&str> = policy
            .environments
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        usage(format!(
            "policy {} declares no environment `{name}` (declared: {})",
            policy.origin,
            if known.is_empty() {
                "none; add an [[environments]] table".to_owned()
            } else {
                known.join(", ")
            }
        ))
    })
}

/// `3.12` for an environment's guest.
fn python_version(spec: &EnvironmentSpec) -> Result<String, Failure> {
    let manifest = GuestManifest::embedded().map_err(io)?;
    let entry = manifest.require(&spec.guest).map_err(io)?;
    Ok(entry
        .python_version
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join("."))
}

/// The environment a lock pins, as a spec (no languages: it is only fetched).
/// The largest lock `--from-lock` reads (as `exec --reuse` does).
const MAX_LOCK_BYTES: u64 = 64 << 20;

fn spec_from_lock(path: &std::path::Path) -> Result<EnvironmentSpec, Failure> {
    let bytes = match runner_sandbox::read::read_document(path, MAX_LOCK_BYTES) {
        Ok(runner_sandbox::read::Read2::Bytes(bytes)) => bytes,
        Ok(runner_sandbox::read::Read2::TooLarge(size)) => {
            return Err(usage(format!(
                "{}: {size} bytes, larger than a lock can be ({MAX_LOCK_BYTES})",
                path.display()
            )));
        }
        Err(e) => return Err(io(format!("cannot read {}: {e}", path.display()))),
    };
    let lock = runner_core::lock::Lock::parse(&bytes)
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let pin = lock.runtime.environment.ok_or_else(|| {
        usage(format!(
            "{}: the lock pins no package environment; nothing to fetch",
            path.display()
        ))
    })?;
    let guest = lock
        .runtime
        .guest
        .map(|g| g.name)
        .ok_or_else(|| usage(format!("{}: the lock pins no guest", path.display())))?;
    let untag = |s: &str| s.strip_prefix("sha256:").unwrap_or(s).to_owned();
    Ok(EnvironmentSpec {
        name: pin.name,
        guest,
        languages: Vec::new(),
        packages: pin
            .packages
            .into_iter()
            .map(|p| PackagePin {
                name: p.name,
                version: p.version,
                sha256: untag(&p.sha256),
            })
            .collect(),
    })
}

fn run(action: EnvAction, policy: &Policy) -> Result<i32, Failure> {
    let dir = environment::default_env_dir();
    match action {
        EnvAction::Fetch {
            names,
            from_lock,
            json,
        } => {
            let specs: Vec<EnvironmentSpec> = match from_lock {
                Some(lock) => vec![spec_from_lock(&lock)?],
                None if names.is_empty() => policy.environments.clone(),
                None => names
                    .iter()
                    .map(|n| spec(policy, n).cloned())
                    .collect::<Result<_, _>>()?,
            };
            let progress = Progress::new();
            let mut report = EnvFetchReport {
                environments: Vec::new(),
            };
            for spec in &specs {
                let version = python_version(spec)?;
                progress.step(&format!("{}: checking the store", spec.name));
                let found =
                    environment::fetch::fetch(spec, &version, &dir, &mut progress.callback())
                        .map_err(io)?;
                report.environments.push(found.into());
            }
            drop(progress);
            print_report(json, &report)
        }
        EnvAction::Install { name, wheel, json } => {
            let spec = spec(policy, &name)?;
            let progress = Progress::new();
            let found =
                environment::install(spec, &wheel, &dir, &mut progress.callback()).map_err(io)?;
            drop(progress);
            print_report(
                json,
                &EnvFetchReport {
                    environments: vec![found.into()],
                },
            )
        }
        EnvAction::List { json } => {
            let rows: EnvListReport = environment::list(&policy.environments, &dir);
            let header = format!(
                "{:<16} {:<10} {:<64}  PACKAGES",
                "NAME", "INSTALLED", "TREE SHA256"
            );
            Ok(super::guest::print_list(json, &rows, &header, &dir, |r| {
                let packages: Vec<String> = r
                    .packages
                    .iter()
                    .map(|p| format!("{}=={}", p.name, p.version))
                    .collect();
                format!(
                    "{:<16} {:<10} {:<64}  {}",
                    r.name,
                    super::guest::yes_no(r.installed),
                    r.tree_sha256.as_deref().unwrap_or("-"),
                    packages.join(" ")
                )
            }))
        }
    }
}

fn print_report(json: bool, report: &EnvFetchReport) -> Result<i32, Failure> {
    if json {
        return Ok(super::print_json(report));
    }
    for e in &report.environments {
        crate::cli::outln!(
            "{}: {} (tree sha256 {})",
            e.name,
            e.path.display(),
            e.tree_sha256
        );
    }
    Ok(exit_codes::OK)
}
