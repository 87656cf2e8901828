//! The guest manifest loader: never panics, an error names a line the text has, and
//! every entry it accepts satisfies the rules the fetcher relies on without checking
//! again (a name, package and version that cannot smuggle options, plain relative zip
//! paths, lowercase sha256s, a bounded size, unique names).
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::digest::is_sha256_hex;
use runner::guest::GuestError;
use runner::guest::manifest::{GuestManifest, MAX_GUEST_SIZE};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match GuestManifest::parse(text, "fuzz") {
        Ok(manifest) => {
            assert!(!manifest.guests.is_empty());
            for (i, g) in manifest.guests.iter().enumerate() {
                assert!(manifest.guests[..i].iter().all(|o| o.name != g.name));
                assert!(!g.name.is_empty() && g.name.len() <= 64);
                assert!(
                    g.name.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b"._-".contains(&b))
                );
                assert!(g.name.as_bytes()[0].is_ascii_alphanumeric());
                for v in [&g.package, &g.version] {
                    assert!(!v.is_empty() && !v.starts_with('-'), "{v:?}");
                    assert!(
                        v.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-+!".contains(&b)),
                        "{v:?}"
                    );
                }
                assert!(is_sha256_hex(&g.wheel_sha256) && is_sha256_hex(&g.file_sha256));
                assert!((1..=MAX_GUEST_SIZE).contains(&g.size));
                assert!(!g.file.starts_with('/') && !g.file.contains('\\'));
                assert!(!g.file.chars().any(char::is_control));
                assert!(
                    g.file.split('/').all(|c| !matches!(c, "" | "." | "..")),
                    "{:?}",
                    g.file
                );
                assert!(!g.description.trim().is_empty());
            }
            assert_eq!(
                GuestManifest::parse(text, "fuzz").ok().as_ref(),
                Some(&manifest)
            );
        }
        Err(GuestError::ManifestField { line, .. }) => {
            let lines = text.matches('\n').count() + 1;
            assert!((1..=lines).contains(&line), "line {line} of {lines}");
        }
        Err(_) => {}
    }
});
