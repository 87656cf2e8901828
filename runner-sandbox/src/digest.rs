//! sha256 helpers: lowercase hex digests of byte slices, readers and files.

use sha2::{Digest, Sha256};
use std::io::{self, Read};

// The pure helpers are the core's (`runner-core`, no I/O); the reader and file ones
// are here.
use runner_core::digest::hex;

/// Lowercase hex sha256 of everything `reader` yields.
pub fn sha256_reader(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// One version of a file, as the kernel tells it: device, inode, size, modification and
/// change time. Any write, truncation, `chmod` or replacement changes the change time,
/// which no unprivileged process can set back (`utimensat` sets only the other two).
/// Recorded after a full hash, it lets a later check skip re-hashing the same version
/// (the precompiled module's `.verified`, the guest store's `verified/`).
pub fn file_stamp(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let times = [
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    ];
    stamp_of([meta.dev(), meta.ino(), meta.size()], times)
}

/// [`file_stamp`] of metadata read through a `cap_std` directory (the same text).
pub fn cap_file_stamp(meta: &cap_std::fs::Metadata) -> String {
    use cap_std::fs::MetadataExt;
    let times = [
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    ];
    stamp_of([meta.dev(), meta.ino(), meta.size()], times)
}

fn stamp_of([dev, ino, size]: [u64; 3], [mtime, ctime]: [(i64, i64); 2]) -> String {
    format!(
        "dev={dev} ino={ino} size={size} mtime={}.{:09} ctime={}.{:09}",
        mtime.0, mtime.1, ctime.0, ctime.1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_core::digest::{is_sha256_hex, sha256_hex};

    #[test]
    fn known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_reader(&b"abc"[..]).unwrap(), sha256_hex(b"abc"));
    }

    #[test]
    fn hex_shape() {
        assert!(is_sha256_hex(&sha256_hex(b"x")));
        assert!(!is_sha256_hex(&sha256_hex(b"x").to_uppercase()));
        assert!(!is_sha256_hex("abc"));
    }
}
