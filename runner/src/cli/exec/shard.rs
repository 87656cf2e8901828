//! `runner exec DIR --shard K/N`: the requests of a batch whose shard is K out of N.
//!
//! A request's shard is its sha256 read as a number, modulo N: the sha256 of its
//! normalized text (the `request.sha256` its lock records) when it is UTF-8, of its raw
//! bytes otherwise; a file that cannot be read is placed by the sha256 of its path as
//! given, so it is still reported by exactly one shard. So N processes given the same
//! directory and `--shard 0/N` … `--shard N-1/N` (a Kubernetes Indexed Job's
//! `$JOB_COMPLETION_INDEX`, a CI matrix, a Slurm array's `$SLURM_ARRAY_TASK_ID`) run
//! every request exactly once between them, with nothing coordinating them.

use std::path::{Path, PathBuf};

/// The hexadecimal number `hex` (all 256 bits of a sha256) modulo `n` (at least 1),
/// digit by digit: what the documentation says, not a prefix of it.
pub fn modulo(hex: &str, n: u64) -> u64 {
    let n = u128::from(n.max(1));
    let rest = hex
        .chars()
        .filter_map(|c| c.to_digit(16))
        .fold(0u128, |rest, digit| (rest * 16 + u128::from(digit)) % n);
    // Less than n, which fits in a u64.
    u64::try_from(rest).unwrap_or(0)
}

/// `K/N`: this process runs shard K (0-based) of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

/// Parses `K/N` with `0 <= K < N`.
pub fn parse(text: &str) -> Result<Shard, String> {
    let (k, n) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}`: give K/N, for example 0/3 (shard K of N, K from 0)"))?;
    let number = |s: &str, what: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{text}`: {what} `{s}` is not a whole number: {e}"))
    };
    let (index, count) = (number(k, "K")?, number(n, "N")?);
    if count == 0 {
        return Err(format!("`{text}`: N must be at least 1"));
    }
    if index >= count {
        return Err(format!(
            "`{text}`: K must be less than N (shards are numbered 0 to {})",
            count - 1
        ));
    }
    Ok(Shard { index, count })
}

impl Shard {
    /// The shard `request` belongs to, out of `self.count`.
    ///
    /// # Ambient authority
    /// Reads `request`, a document named on the command line (or found in a directory
    /// named there), as [`runner_sandbox::read::read_document`] reads one: a regular
    /// file only, never blocking on a FIFO.
    pub fn of(&self, request: &Path) -> u64 {
        // Uncapped (the cap is the largest one `read_document` can add one to): the
        // shard is the hash of every byte there is.
        let sha = match runner_sandbox::read::read_document(request, u64::MAX - 1) {
            Ok(runner_sandbox::read::Read2::Bytes(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => runner_core::lock::text_sha256_tagged(&text),
                Err(e) => runner_core::lock::sha256_tagged(e.as_bytes()),
            },
            Ok(runner_sandbox::read::Read2::TooLarge(_)) | Err(_) => {
                runner_core::lock::sha256_tagged(request.as_os_str().as_encoded_bytes())
            }
        };
        modulo(sha.trim_start_matches("sha256:"), self.count)
    }

    /// The requests of this shard, in the order given.
    pub fn select(&self, requests: Vec<PathBuf>) -> Vec<PathBuf> {
        requests
            .into_iter()
            .filter(|r| self.of(r) == self.index)
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_hash_is_reduced_not_a_prefix() {
        // 2^64 = 18446744073709551616 ≡ 1 (mod 3), 2^64 ≡ 6 (mod 10).
        assert_eq!(modulo("10000000000000000", 3), 1);
        assert_eq!(modulo("10000000000000000", 10), 6);
        assert_eq!(modulo("ff", 7), 255 % 7);
        // The first 64 bits alone give another shard for this hash.
        let hex = "0000000000000000000000000000000000000000000000000000000000000005";
        assert_eq!(modulo(hex, 3), 2);
        assert_eq!(modulo(&"f".repeat(64), 1), 0);
        // 2^256 - 1 = 3 · 5 · 17 · 257 · … is divisible by 3 and 5.
        assert_eq!(modulo(&"f".repeat(64), 3), 0);
        assert_eq!(modulo(&"f".repeat(64), 5), 0);
    }

    #[test]
    fn parses_k_of_n_and_names_what_is_wrong() {
        assert_eq!(parse("1/3").unwrap(), Shard { index: 1, count: 3 });
        assert_eq!(parse("0/1").unwrap(), Shard { index: 0, count: 1 });
        for (bad, says) in [
            ("3/3", "K must be less than N"),
            ("0/0", "N must be at least 1"),
            ("1", "give K/N"),
            ("a/3", "K `a`"),
            ("-1/3", "K `-1`"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn shards_are_a_disjoint_cover() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..60)
            .map(|i| {
                let p = dir.path().join(format!("TR-{i}.md"));
                std::fs::write(&p, format!("request {i}\n")).unwrap();
                p
            })
            .collect();
        for n in 1..=4 {
            let mut seen = Vec::new();
            for k in 0..n {
                let shard = Shard { index: k, count: n };
                let picked = shard.select(files.clone());
                // Deterministic: the same selection twice.
                assert_eq!(picked, shard.select(files.clone()));
                seen.extend(picked);
            }
            seen.sort();
            let mut all = files.clone();
            all.sort();
            assert_eq!(seen, all, "the {n} shards are not a disjoint cover");
        }
    }
}
