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
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
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
