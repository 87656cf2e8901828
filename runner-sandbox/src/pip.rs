//! `pip download`: the one process the guest and environment stores start. The program
//! is the operator's Python (`$RUNNER_PYTHON`, default `python3`), the argument shape
//! is fixed here (pinned requirements only: `--no-deps --require-hashes
//! --only-binary=:all:`), and what pip downloads lands in a private temporary directory
//! this module creates and removes. The index is whatever the user's pip is configured
//! to use; no URL lives in this code.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many bytes of pip's stderr are kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How many lines of that tail an error message shows.
const STDERR_TAIL_LINES: usize = 20;

/// One `pip download`.
pub struct Download<'a> {
    /// The Python that runs pip.
    pub python: &'a OsStr,
    /// The requirements file's text: one `NAME==VERSION --hash=sha256:HEX` line each.
    pub requirements: &'a str,
    /// The guest's `major.minor`: wheels for it, whatever the host's Python is.
    pub python_version: &'a str,
    /// Only pure-Python wheels (`--implementation py --abi none --platform any`).
    pub pure_python: bool,
    /// pip's output goes to this process's stderr as it runs (else it is kept quiet).
    pub echo: bool,
}

/// What pip left: its `.whl` files (regular files, sorted), alive as long as this is.
pub struct Downloaded {
    dir: tempfile::TempDir,
    pub wheels: Vec<PathBuf>,
}

impl Downloaded {
    /// The directory pip downloaded into (for messages).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().join("download")
    }
}

/// Why a download did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PipError {
    /// Preparing or reading the temporary directory failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The Python could not be started.
    #[error("cannot run `{} -m pip`: {source}", python.display())]
    Spawn {
        python: PathBuf,
        #[source]
        source: io::Error,
    },
    /// pip ran and failed.
    #[error("pip failed ({status}):\n{stderr_tail}")]
    Failed { status: String, stderr_tail: String },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> PipError {
    let path = path.to_owned();
    move |source| PipError::Io {
        action,
        path,
        source,
    }
}

/// Runs `python -m pip download` with the fixed argument shape on `d.requirements` into
/// a new private temporary directory, and lists the wheels it left.
///
/// # Ambient authority
/// Starts a host program (which uses the network), writes under the system temporary
/// directory.
pub fn download(d: &Download<'_>) -> Result<Downloaded, PipError> {
    let work = tempfile::Builder::new()
        .prefix("runner-pip-")
        .tempdir()
        .map_err(io_err(
            "create a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    let req_path = work.path().join("requirements.txt");
    std::fs::write(&req_path, d.requirements).map_err(io_err("write", &req_path))?;
    let dest = work.path().join("download");
    std::fs::create_dir(&dest).map_err(io_err("create", &dest))?;
    let mut command = Command::new(d.python);
    command
        .args(["-m", "pip", "download", "--no-deps", "--require-hashes"])
        .args([
            "--only-binary=:all:",
            "--no-input",
            "--disable-pip-version-check",
        ]);
    if d.pure_python {
        command.args([
            "--implementation",
            "py",
            "--abi",
            "none",
            "--platform",
            "any",
        ]);
    }
    let mut child = command
        .arg("--python-version")
        .arg(d.python_version)
        .arg("--dest")
        .arg(&dest)
        .arg("-r")
        .arg(&req_path)
        .stdin(Stdio::null())
        .stdout(if d.echo { our_stderr() } else { Stdio::null() })
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PipError::Spawn {
            python: PathBuf::from(d.python),
            source,
        })?;
    let pipe = child.stderr.take();
    let echo = d.echo;
    let teeing = std::thread::spawn(move || pipe.map(|p| keep_tail(p, echo)).unwrap_or_default());
    let status = child.wait();
    // A panicked tee thread only loses the tail; the exit status still decides.
    let stderr_tail = teeing.join().unwrap_or_default();
    let status = status.map_err(io_err("wait for", Path::new(d.python)))?;
    if !status.success() {
        return Err(PipError::Failed {
            status: status.to_string(),
            stderr_tail,
        });
    }
    let mut wheels = Vec::new();
    for item in std::fs::read_dir(&dest).map_err(io_err("list", &dest))? {
        let item = item.map_err(io_err("list", &dest))?;
        let path = item.path();
        if path.extension() == Some(OsStr::new("whl"))
            && item.file_type().is_ok_and(|t| t.is_file())
        {
            wheels.push(path);
        }
    }
    wheels.sort();
    Ok(Downloaded { dir: work, wheels })
}

/// A handle on our own stderr for the child's stdout, so pip's progress reaches the
/// terminal without mixing into our stdout (which may carry machine-readable output).
fn our_stderr() -> Stdio {
    io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

/// Drains pip's stderr (copying it to ours as it arrives when `echo`) and returns its
/// last lines.
fn keep_tail(mut pipe: impl Read, echo: bool) -> String {
    let mut tail: Vec<u8> = Vec::with_capacity(2 * STDERR_TAIL_BYTES);
    let mut buf = [0u8; 4096];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if echo {
            // Best effort: a closed stderr must not stop us from draining the pipe.
            let _ = io::stderr().write_all(&buf[..n]);
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_TAIL_BYTES {
            tail.drain(..tail.len() - STDERR_TAIL_BYTES);
        }
    }
    let text = String::from_utf8_lossy(&tail);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n")
}
