//! Reading a document named on the command line, safely: never a FIFO or device (a
//! FIFO would block), never more than the cap plus one byte.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What reading a document gave.
pub enum Read2 {
    Bytes(Vec<u8>),
    /// The file is larger than `cap`; its size.
    TooLarge(u64),
}

/// Reads `path` (a regular file) up to `cap` bytes.
///
/// # Ambient authority
/// Opens `path` on the host filesystem; it is a path the operator named.
pub fn read_document(path: &Path, cap: u64) -> std::io::Result<Read2> {
    let file = crate::durable::open_file(path, true)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > cap {
        return Ok(Read2::TooLarge(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Ok(Read2::TooLarge(bytes.len() as u64));
    }
    Ok(Read2::Bytes(bytes))
}

/// Reads `path` as a regular file that is not a symlink (refused with `ELOOP`), up to
/// `cap` bytes: more is an error. For files found beside a document (a lock, a
/// statement, an envelope), which whoever wrote the directory may have replaced.
///
/// # Ambient authority
/// Opens `path` on the host filesystem.
pub fn read_regular_nofollow(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let file = crate::durable::open_file(path, false).map_err(|e| {
        if e.raw_os_error() == Some(nix::libc::ELOOP) {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a symlink, never followed",
            )
        } else {
            e
        }
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(cap) as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// Reads the whole text file at `path`: a policy or a key file the operator named.
///
/// # Ambient authority
/// Opens `path` on the host filesystem.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Fills `buf` from the kernel's random source (a run's seed, a new signing key).
///
/// # Ambient authority
/// Opens `/dev/urandom`.
pub fn urandom(buf: &mut [u8]) -> std::io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Creates the new file `path` with `mode`, writes `bytes` and syncs it; an existing
/// file is an error (`AlreadyExists`), never replaced.
///
/// # Ambient authority
/// Creates `path` on the host filesystem.
pub fn write_new(path: &Path, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}
