//! Package environments: named, hash-pinned sets of pure-Python wheels that
//! the operator declares in the policy (`[[environments]]`) and a request selects by its
//! `language`.
//!
//! An environment is stored once, content-addressed, under the environment directory
//! (`$RUNNER_ENV_DIR`, else `<cache dir>/envs`, created 0700):
//!
//! - `trees/<tree_sha256>/`: the wheels unpacked (directories 0700, files 0600), which
//!   the guest sees read-only at [`GUEST_MOUNT`](runner_core::environment::GUEST_MOUNT), on its `PYTHONPATH` after the stdlib
//!   (a wheel with a top-level `sitecustomize`/`usercustomize` or a stdlib module name
//!   is refused, [`wheel::unpack`]);
//! - `sets/<set_id>.json`: which tree holds a package set ([`set_id`]), written once the
//!   tree is complete.
//!
//! Nothing in the store is trusted on read: [`locate`] re-hashes the whole tree
//! ([`tree::tree_sha256`]) before every run and refuses one that differs from its record.
//!
//! Files: [`wheel`] (checking and unpacking a wheel), [`tree`] (the tree's hash),
//! [`fetch`] (pip), this file (the policy's table, the store, listing).

pub mod fetch;
pub mod stdlib;
pub mod tree;
pub mod wheel;

/// The policy's `[[environments]]` table (and a package set's identity) is
/// `runner-core`'s (no I/O), checked with the policy.
use runner_core::environment::{EnvironmentSpec, Located, PackagePin, set_id};

use crate::store::{Staged, StagedDir, create_dir_all, open_to_workers};
use cap_std::fs::Dir;
use runner_core::digest::is_sha256_hex;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// Why an environment could not be installed, found or verified.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("environment `{env}`: cannot {action} {}: {source}", path.display())]
    Io {
        env: String,
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("environment `{env}`: wheel {}: {reason}", wheel.display())]
    Wheel {
        env: String,
        wheel: PathBuf,
        reason: String,
    },
    #[error("environment `{env}`: {reason}")]
    Invalid { env: String, reason: String },
    /// Never installed on this host (or installed for another package set).
    #[error(
        "environment `{env}` is not installed on this host; run `runner env fetch {env}` \
         (or `runner env install {env} --wheel FILE…` offline)"
    )]
    NotInstalled { env: String },
    /// The stored tree is not what was installed.
    #[error(
        "environment `{env}`: the installed tree {} hashes to {actual}, not {expected} as \
         recorded when it was installed; it was modified. Remove it and run `runner env \
         fetch {env}` again",
        path.display()
    )]
    Tampered {
        env: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("environment `{env}`: pip failed ({status}) for {requirements}:\n{stderr_tail}")]
    PipFailed {
        env: String,
        requirements: String,
        status: String,
        stderr_tail: String,
    },
    #[error("environment `{env}`: cannot run `{python} -m pip`: {source}")]
    PythonNotFound {
        env: String,
        python: String,
        #[source]
        source: io::Error,
    },
}

impl EnvError {
    fn io(env: &str, action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let (env, path) = (env.to_owned(), path.to_owned());
        move |source| EnvError::Io {
            env,
            action,
            path,
            source,
        }
    }
}

/// `sets/<set_id>.json`: the record of an installed set.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SetRecord {
    name: String,
    guest: String,
    packages: Vec<PackagePin>,
    tree_sha256: String,
}

/// The environment directory used when the caller does not name one: `$RUNNER_ENV_DIR`
/// if set, else `<cache dir>/envs`.
///
/// # Ambient Authority
/// Reads the process environment and, as a last resort, the password database.
pub fn default_env_dir() -> PathBuf {
    match runner_sandbox::env::non_empty("RUNNER_ENV_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => runner_sandbox::cache::default_cache_dir().join("envs"),
    }
}

/// `sets/<set_id>.json`, relative to the store.
fn record_name(spec: &EnvironmentSpec) -> PathBuf {
    Path::new("sets").join(format!("{}.json", set_id(spec)))
}

fn tree_dir(env_dir: &Path, tree_sha256: &str) -> PathBuf {
    env_dir.join("trees").join(tree_sha256)
}

/// The store at `env_dir`, `None` when nothing was ever installed there.
fn open_store(env: &str, env_dir: &Path) -> Result<Option<Dir>, EnvError> {
    runner_sandbox::store_root::open(env_dir).map_err(EnvError::io(env, "open", env_dir))
}

/// The record of `spec`'s package set in the store, if installed.
fn read_record(
    spec: &EnvironmentSpec,
    store: &Dir,
    env_dir: &Path,
) -> Result<Option<SetRecord>, EnvError> {
    let path = env_dir.join(record_name(spec));
    let text = match store.read_to_string(record_name(spec)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EnvError::io(&spec.name, "read", &path)(e)),
    };
    let record: SetRecord = serde_json::from_str(&text).map_err(|e| EnvError::Invalid {
        env: spec.name.clone(),
        reason: format!("the record {} is not readable: {e}", path.display()),
    })?;
    if !is_sha256_hex(&record.tree_sha256) {
        return Err(EnvError::Invalid {
            env: spec.name.clone(),
            reason: format!("the record {} names no tree hash", path.display()),
        });
    }
    Ok(Some(record))
}

/// The installed environment, its tree re-hashed and compared with the hash recorded
/// at install: [`EnvError::NotInstalled`] when absent, [`EnvError::Tampered`] when the
/// tree changed.
///
/// # Ambient Authority
/// Opens the store at `env_dir` (`runner_sandbox::store_root`).
pub fn locate(spec: &EnvironmentSpec, env_dir: &Path) -> Result<Located, EnvError> {
    let not_installed = || EnvError::NotInstalled {
        env: spec.name.clone(),
    };
    let store = open_store(&spec.name, env_dir)?.ok_or_else(not_installed)?;
    let record = read_record(spec, &store, env_dir)?.ok_or_else(not_installed)?;
    let dir = tree_dir(env_dir, &record.tree_sha256);
    let rel = Path::new("trees").join(&record.tree_sha256);
    let actual = match store
        .open_dir(&rel)
        .and_then(|tree| tree::tree_sha256(&tree, &dir))
    {
        Ok(hash) => hash,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(not_installed()),
        Err(e) => format!("unreadable ({e})"),
    };
    if actual != record.tree_sha256 {
        return Err(EnvError::Tampered {
            env: spec.name.clone(),
            path: dir,
            expected: record.tree_sha256,
            actual,
        });
    }
    let top = store
        .open_dir(&rel)
        .and_then(|tree| wheel::check_tree_top_level(&tree))
        .map_err(EnvError::io(&spec.name, "list", &dir))?;
    if let Err(e) = top {
        return Err(EnvError::Invalid {
            env: spec.name.clone(),
            reason: format!(
                "the installed tree {} is refused: {e}; remove the package from the \
                 environment",
                dir.display()
            ),
        });
    }
    // For trees unpacked before trees were made readable to the worker: only modes
    // change, which the tree hash does not cover.
    open_to_workers(&store, &rel, usize::MAX).map_err(EnvError::io(
        &spec.name,
        "open to the worker",
        &dir,
    ))?;
    Ok(Located {
        name: spec.name.clone(),
        dir,
        tree_sha256: record.tree_sha256,
        packages: spec.packages.clone(),
    })
}

/// Installs `spec` from wheel files on disk: each wheel is matched to its package by
/// sha256 (a wheel matching none, or a package without a wheel, is refused), checked to
/// be pure Python and safe to unpack ([`wheel::unpack`]), and unpacked into a new tree;
/// the tree's hash is recorded. An already installed, verified set is kept.
///
/// # Ambient Authority
/// Reads `wheels` and writes under `env_dir`.
pub fn install(
    spec: &EnvironmentSpec,
    wheels: &[PathBuf],
    env_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Located, EnvError> {
    let env = spec.name.as_str();
    let by_package = wheel_per_package(spec, wheels)?;
    if let Ok(found) = locate(spec, env_dir) {
        progress(&format!(
            "{env}: already installed (tree sha256 {})",
            found.tree_sha256
        ));
        return Ok(found);
    }

    let store = runner_sandbox::store_root::create(env_dir)
        .map_err(EnvError::io(env, "create", env_dir))?;
    let private = |rel: &str| {
        create_dir_all(&store, rel, 0o700).map_err(EnvError::io(env, "create", &env_dir.join(rel)))
    };
    let (trees, sets) = (private("trees")?, private("sets")?);
    let work =
        StagedDir::new(&trees).map_err(EnvError::io(env, "create a directory in", env_dir))?;
    let root_path = env_dir.join("trees").join(work.name()).join("tree");
    let root = create_dir_all(&work.dir, "tree", 0o700)
        .map_err(EnvError::io(env, "create", &root_path))?;
    let mut budget = wheel::Budget::default();
    for (pin, path) in spec.packages.iter().zip(by_package) {
        let path = path.unwrap_or(Path::new(""));
        wheel::unpack(pin, path, &root, &mut budget).map_err(|reason| EnvError::Wheel {
            env: env.to_owned(),
            wheel: path.to_owned(),
            reason: reason.to_string(),
        })?;
        progress(&format!(
            "{env}: {} {} unpacked (wheel sha256 {})",
            pin.name, pin.version, pin.sha256
        ));
    }
    let tree_sha256 =
        tree::tree_sha256(&root, &root_path).map_err(EnvError::io(env, "hash", &root_path))?;
    open_to_workers(&work.dir, Path::new("tree"), usize::MAX).map_err(EnvError::io(
        env,
        "open to the worker",
        &root_path,
    ))?;
    let dest = tree_dir(env_dir, &tree_sha256);
    let placed = work.publish("tree", &tree_sha256).map_err(EnvError::io(
        env,
        "store the tree at",
        &dest,
    ))?;
    if !placed {
        // The same tree is already there (another name for the same set, or a record
        // lost): keep it if it still hashes right.
        let existing = trees
            .open_dir(&tree_sha256)
            .and_then(|d| tree::tree_sha256(&d, &dest))
            .map_err(EnvError::io(env, "hash", &dest))?;
        if existing != tree_sha256 {
            return Err(EnvError::Tampered {
                env: env.to_owned(),
                path: dest,
                expected: tree_sha256,
                actual: existing,
            });
        }
    }
    let record = SetRecord {
        name: env.to_owned(),
        guest: spec.guest.clone(),
        packages: spec.packages.clone(),
        tree_sha256: tree_sha256.clone(),
    };
    let path = env_dir.join(record_name(spec));
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    let mut staged =
        Staged::new(&sets, 0o600).map_err(EnvError::io(env, "create a file in", env_dir))?;
    io::Write::write_all(staged.file(), text.as_bytes())
        .map_err(EnvError::io(env, "write", &path))?;
    let file_name = format!("{}.json", set_id(spec));
    staged
        .publish_replacing(&file_name, true)
        .map_err(EnvError::io(env, "write", &path))?;
    progress(&format!(
        "{env}: installed, tree sha256 {tree_sha256} at {}",
        dest.display()
    ));
    Ok(Located {
        name: env.to_owned(),
        dir: dest,
        tree_sha256,
        packages: spec.packages.clone(),
    })
}

/// The wheel given for each pinned package of `spec`, in the spec's order, matched by
/// sha256: a wheel that matches no pin, a package given twice or one not given is an
/// error.
fn wheel_per_package<'a>(
    spec: &EnvironmentSpec,
    wheels: &'a [PathBuf],
) -> Result<Vec<Option<&'a Path>>, EnvError> {
    let env = spec.name.as_str();
    let mut by_package: Vec<Option<&Path>> = vec![None; spec.packages.len()];
    for path in wheels {
        let sha = wheel::file_sha256(path).map_err(EnvError::io(env, "read wheel", path))?;
        let Some(i) = spec.packages.iter().position(|p| p.sha256 == sha) else {
            return Err(EnvError::Wheel {
                env: env.to_owned(),
                wheel: path.clone(),
                reason: format!(
                    "its sha256 {sha} matches no package pinned for this environment (pinned: {})",
                    spec.packages
                        .iter()
                        .map(|p| format!("{} {} {}", p.name, p.version, p.sha256))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        if by_package[i].is_some() {
            return Err(EnvError::Wheel {
                env: env.to_owned(),
                wheel: path.clone(),
                reason: format!("package `{}` is given twice", spec.packages[i].name),
            });
        }
        by_package[i] = Some(path);
    }
    let missing: Vec<String> = spec
        .packages
        .iter()
        .zip(&by_package)
        .filter(|(_, w)| w.is_none())
        .map(|(p, _)| format!("{} {}", p.name, p.version))
        .collect();
    if !missing.is_empty() {
        return Err(EnvError::Invalid {
            env: env.to_owned(),
            reason: format!("no wheel given for {}", missing.join(", ")),
        });
    }
    Ok(by_package)
}

/// One row of `runner env list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EnvironmentStatus {
    pub name: String,
    pub guest: String,
    pub languages: Vec<String>,
    pub packages: Vec<PackagePin>,
    /// The set's record is present (cheap: [`locate`] is what proves the tree).
    pub installed: bool,
    /// The tree hash recorded at install, when installed.
    pub tree_sha256: Option<String>,
    /// The tree's directory, when installed.
    pub path: Option<PathBuf>,
}

/// The status of every environment of the policy, in policy order.
///
/// # Ambient Authority
/// Reads under `env_dir`.
pub fn list(specs: &[EnvironmentSpec], env_dir: &Path) -> Vec<EnvironmentStatus> {
    let store = runner_sandbox::store_root::open(env_dir).ok().flatten();
    specs
        .iter()
        .map(|spec| {
            let record = store
                .as_ref()
                .and_then(|store| read_record(spec, store, env_dir).ok().flatten());
            EnvironmentStatus {
                name: spec.name.clone(),
                guest: spec.guest.clone(),
                languages: spec.languages.clone(),
                packages: spec.packages.clone(),
                installed: record.is_some(),
                path: record.as_ref().map(|r| tree_dir(env_dir, &r.tree_sha256)),
                tree_sha256: record.map(|r| r.tree_sha256),
            }
        })
        .collect()
}
