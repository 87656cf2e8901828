//! The runner's site directory for the CPython guests: `_runner_asyncio.py` (asyncio's
//! event loop without the self-pipe WASI cannot make; see that file), the
//! `_runner_asyncio.pth` that has `site` import it, and `_runner_clocks.pth` (CPU-time
//! clocks, see [`CLOCKS_PTH`]), mounted read-only as the guest's `site-packages`.
//!
//! Pinned by the runner's version: both files are compiled into the binary (like the
//! network `sitecustomize.py` and the guest environment), written once into the guest
//! store under `site/<sha256 of both>/` and compared byte for byte with the embedded copy
//! before a pipeline uses them (a mismatch is rewritten, atomically). Nothing of it is a
//! new authority: a read-only directory of two text files the runner wrote.

use super::GuestError;
use crate::store::{Staged, create_dir_all};
use cap_std::fs::{Permissions, PermissionsExt};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The module that patches asyncio when it is imported.
pub const MODULE: &str = include_str!("site/_runner_asyncio.py");
/// The `.pth` line `site` runs at start-up: a finder that waits for
/// `asyncio.selector_events`, then removes itself and hands over to [`MODULE`]. Inline,
/// so a run that never imports asyncio does not look up, read or compile the module.
pub const PTH: &str = "import sys; exec(\"class F:\\n @staticmethod\\n def find_spec(name, path=None, target=None):\\n  if name != 'asyncio.selector_events':\\n   return None\\n  sys.meta_path.remove(F)\\n  import _runner_asyncio\\n  return _runner_asyncio.find_spec(name, path, target)\\nsys.meta_path.insert(0, F)\", {\"sys\": sys}) if sys.platform == \"wasi\" else None\n";

/// The `.pth` line that gives the guest CPU-time clocks that advance with the virtual
/// clock. cpython-3.12's `time.process_time()` comes from wasi-libc's `times()`, which
/// reports nanoseconds where CPython divides by `sysconf(_SC_CLK_TCK)` = 100 ticks: every
/// read jumped 60 s (two 3 µs clock steps times 10^7). It is divided back to nanoseconds.
/// No WASI build has `time.thread_time()` (no thread CPU clock); a guest is one thread, so
/// it is the process's. Reads no clock at start-up, so runs read the clock as before.
pub const CLOCKS_PTH: &str = include_str!("site/_runner_clocks.pth");

const FILES: [(&str, &str); 3] = [
    ("_runner_asyncio.py", MODULE),
    ("_runner_asyncio.pth", PTH),
    ("_runner_clocks.pth", CLOCKS_PTH),
];

/// sha256 over both files (name, NUL, content, NUL each): the directory's name.
pub fn site_sha256() -> String {
    let mut h = Sha256::new();
    for (name, text) in FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `(major, minor)` of a CPython version `X.Y[.Z…]`; `None` for anything else.
fn major_minor(python_version: &str) -> Option<(&str, &str)> {
    let mut parts = python_version.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then_some((major, minor))
}

/// Where a CPython `major.minor` guest (prefix `/usr/local`, as both pinned builds) looks
/// for its site-packages; `None` for a version that is not `X.Y[.Z…]`.
pub fn guest_site_packages(python_version: &str) -> Option<String> {
    let (major, minor) = major_minor(python_version)?;
    Some(format!(
        "/usr/local/lib/python{major}.{minor}/site-packages"
    ))
}

/// Where such a guest finds its standard library, in the order its own `sys.path`
/// lists them: the zip, then the directory.
pub fn guest_stdlib(python_version: &str) -> Option<[String; 2]> {
    let (major, minor) = major_minor(python_version)?;
    Some([
        format!("/usr/local/lib/python{major}{minor}.zip"),
        format!("/usr/local/lib/python{major}.{minor}"),
    ])
}

/// Sets the guest's one `PYTHONPATH` in `env`: `front`, then what it held, then
/// `back`, each directory once. The pipeline builds it in this order: the runner's own
/// network directory (its `sitecustomize`) first, then the standard library, then a
/// package environment, so no package shadows the runner's modules or the stdlib's.
pub fn add_python_path(env: &mut Vec<(String, String)>, front: &[&str], back: &[&str]) {
    let held: Vec<String> = env
        .iter()
        .filter(|(k, _)| k == "PYTHONPATH")
        .flat_map(|(_, v)| v.split(':').map(str::to_owned))
        .collect();
    env.retain(|(k, _)| k != "PYTHONPATH");
    let mut path: Vec<String> = Vec::new();
    let all = front
        .iter()
        .map(|s| (*s).to_owned())
        .chain(held)
        .chain(back.iter().map(|s| (*s).to_owned()));
    for dir in all {
        if !dir.is_empty() && !path.contains(&dir) {
            path.push(dir);
        }
    }
    env.push(("PYTHONPATH".into(), path.join(":")));
}

/// The site directory in `guest_dir`, written or repaired as needed.
///
/// # Ambient Authority
/// Opens the store at `guest_dir` (`runner_sandbox::store_root`).
pub fn ensure(guest: &str, guest_dir: &Path) -> Result<PathBuf, GuestError> {
    let rel = Path::new("site").join(site_sha256());
    let path = guest_dir.join(&rel);
    let intact = |dir: &cap_std::fs::Dir| {
        FILES
            .iter()
            .all(|(name, text)| dir.read(name).is_ok_and(|bytes| bytes == text.as_bytes()))
    };
    if let Some(store) = super::store::open_store(guest, guest_dir)?
        && store.open_dir(&rel).is_ok_and(|dir| intact(&dir))
    {
        return Ok(path);
    }
    let store = super::store::create_store(guest, guest_dir)?;
    let dir = create_dir_all(&store, &rel, 0o700).map_err(GuestError::io(
        guest,
        "create the site directory",
        &path,
    ))?;
    // Read by a worker that may have given up the runner's uid, through the directory
    // it opened before (as the guest's assets).
    store
        .set_permissions(&rel, Permissions::from_mode(0o755))
        .map_err(GuestError::io(
            guest,
            "open the site directory to the worker",
            &path,
        ))?;
    for (name, text) in FILES {
        let file = path.join(name);
        let mut staged = Staged::new(&dir, 0o600).map_err(GuestError::io(guest, "write", &file))?;
        staged
            .file()
            .write_all(text.as_bytes())
            .and_then(|()| staged.file().set_permissions(Permissions::from_mode(0o644)))
            .and_then(|()| staged.publish_replacing(name, true))
            .map_err(GuestError::io(guest, "write", &file))?;
    }
    Ok(path)
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn site_packages_follow_the_minor_version() {
        assert_eq!(
            guest_site_packages("3.12.0").as_deref(),
            Some("/usr/local/lib/python3.12/site-packages")
        );
        assert_eq!(
            guest_site_packages("3.15").as_deref(),
            Some("/usr/local/lib/python3.15/site-packages")
        );
        assert_eq!(guest_site_packages("3"), None);
        assert_eq!(
            guest_stdlib("3.12.0"),
            Some([
                "/usr/local/lib/python312.zip".to_owned(),
                "/usr/local/lib/python3.12".to_owned()
            ])
        );
        assert_eq!(guest_stdlib("3.x"), None);
        assert_eq!(guest_site_packages("3.x.1"), None);
    }

    /// An environment and the network both on the path: one `PYTHONPATH`, the runner's
    /// directory first, the stdlib ahead of the environment, whatever order they came.
    #[test]
    fn one_python_path_with_the_runner_first_and_the_stdlib_before_packages() {
        let mut env = vec![("TMPDIR".to_owned(), "/tmp".to_owned())];
        let [zip, lib] = guest_stdlib("3.12.0").unwrap();
        add_python_path(&mut env, &[], &[&zip, &lib, "/site-packages"]);
        add_python_path(&mut env, &["/usr/lib/runner-net"], &[]);
        let paths: Vec<&(String, String)> = env.iter().filter(|(k, _)| k == "PYTHONPATH").collect();
        assert_eq!(paths.len(), 1, "{env:?}");
        assert_eq!(
            paths[0].1,
            "/usr/lib/runner-net:/usr/local/lib/python312.zip:/usr/local/lib/python3.12:/site-packages"
        );
        let mut net_only = Vec::new();
        add_python_path(&mut net_only, &["/usr/lib/runner-net"], &[]);
        add_python_path(&mut net_only, &["/usr/lib/runner-net"], &[]);
        assert_eq!(
            net_only,
            [("PYTHONPATH".to_owned(), "/usr/lib/runner-net".to_owned())]
        );
    }

    #[test]
    fn the_directory_is_written_then_repaired() {
        let store = tempfile::tempdir().unwrap();
        let dir = ensure("g", store.path()).unwrap();
        assert!(dir.ends_with(site_sha256()));
        assert_eq!(
            std::fs::read_to_string(dir.join("_runner_asyncio.pth")).unwrap(),
            PTH
        );
        let mode = std::fs::metadata(dir.join("_runner_asyncio.py"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        std::fs::write(dir.join("_runner_asyncio.py"), "import os; os.system('x')").unwrap();
        assert_eq!(ensure("g", store.path()).unwrap(), dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("_runner_asyncio.py")).unwrap(),
            MODULE
        );
    }
}
