//! The scientific guest (`cpython-3.15-scientific`, CPython 3.15 with pandas) end to end:
//! `runner exec examples/pandas-groupby/…` and `examples/matplotlib-plot/…` through the
//! built binary, and a request for it on a machine where it is not fetched.
//!
//! Running the example needs the fetched guest (a 98 MB download, then a 1.5–3 minute
//! compile needing about 2.2 GB of memory, once), so that test is `#[ignore]`d and fails,
//! rather than passing, without `RUNNER_TEST_SCI_GUEST`:
//!
//! ```sh
//! target/release/runner guest fetch cpython-3.15-scientific
//! RUNNER_TEST_SCI_GUEST=$(target/release/runner guest path cpython-3.15-scientific) \
//!     cargo test --release --ignore-rust-version -p runner --test it -- --ignored sci_guest::
//! ```
//! (`just test-sci` does both.)

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const REQUEST: &str = "TR-20261121-120000Z-pandas-groupby.md";
const PLOT_REQUEST: &str = "TR-20261125-110000Z-matplotlib-plot.md";

fn example_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// A copy of the example `name` (its request and its `inputs/`) in a temporary
/// directory (its results go there too).
fn copy_example_named(name: &str, request: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("inputs")).unwrap();
    std::fs::copy(example_dir(name).join(request), dir.path().join(request)).unwrap();
    for input in std::fs::read_dir(example_dir(name).join("inputs")).unwrap() {
        let input = input.unwrap();
        std::fs::copy(
            input.path(),
            dir.path().join("inputs").join(input.file_name()),
        )
        .unwrap();
    }
    dir
}

fn copy_example() -> tempfile::TempDir {
    copy_example_named("pandas-groupby", REQUEST)
}

/// The store holding the fetched guest named by `RUNNER_TEST_SCI_GUEST`.
fn sci_guest_dir() -> PathBuf {
    let guest = std::env::var_os("RUNNER_TEST_SCI_GUEST")
        .map(PathBuf::from)
        .expect(
            "RUNNER_TEST_SCI_GUEST must name the fetched guest: \
             RUNNER_TEST_SCI_GUEST=$(runner guest path cpython-3.15-scientific)",
        );
    assert!(guest.is_file(), "{} is not a file", guest.display());
    guest.parent().unwrap().to_owned()
}

/// `runner exec --json` of `request` in `work` on the scientific guest: it must
/// complete with exit code 0. Returns the run's directory beside the result.
fn exec_completed(work: &Path, request: &str, what: &str) -> PathBuf {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .env("RUNNER_GUEST_DIR", sci_guest_dir())
        .arg("exec")
        .arg(work.join(request))
        .arg("--json")
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "runner exec ({what}): {:.2} s\n{stderr}",
        elapsed.as_secs_f64()
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["outcome"], "completed", "{summary}");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    eprintln!("guest runtime: {} s", summary["runtime_sec"]);
    PathBuf::from(summary["result_path"].as_str().unwrap()).with_extension("")
}

/// The names under a directory, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Per region: (orders, units, revenue in cents) summed straight from the input CSV.
fn expected_totals(orders_csv: &str) -> BTreeMap<String, (u64, u64, i64)> {
    let mut totals: BTreeMap<String, (u64, u64, i64)> = BTreeMap::new();
    for line in orders_csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let units: u64 = f[4].parse().unwrap();
        let cents: i64 = f[5].replace('.', "").parse().unwrap();
        let t = totals.entry(f[2].to_owned()).or_default();
        t.0 += 1;
        t.1 += units;
        t.2 += units as i64 * cents;
    }
    totals
}

#[test]
#[ignore = "needs the fetched scientific guest: RUNNER_TEST_SCI_GUEST=$(runner guest path cpython-3.15-scientific)"]
fn pandas_groupby_example_runs_on_the_scientific_guest() {
    let work = copy_example();
    let run_dir = exec_completed(work.path(), REQUEST, "pandas groupby");
    let guest_stdout = std::fs::read_to_string(run_dir.join("stdout")).unwrap();
    assert!(
        guest_stdout.starts_with("pandas 3.") && guest_stdout.contains("10000 orders, 30 groups"),
        "{guest_stdout}"
    );

    // The artifact is the only file under /out: the scratch /tmp is gone.
    let out_dir = run_dir.join("out");
    assert_eq!(names_in(&out_dir), ["revenue_by_region_product.csv"]);

    // Every group, and totals per region that match the input computed here.
    let csv = std::fs::read_to_string(out_dir.join("revenue_by_region_product.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("region,product,orders,units,revenue,mean_unit_price")
    );
    let mut got: BTreeMap<String, (u64, u64, i64)> = BTreeMap::new();
    let mut rows = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let t = got.entry(f[0].to_owned()).or_default();
        t.0 += f[2].parse::<u64>().unwrap();
        t.1 += f[3].parse::<u64>().unwrap();
        t.2 += (f[4].parse::<f64>().unwrap() * 100.0).round() as i64;
        rows += 1;
    }
    assert_eq!(rows, 30, "{csv}");
    let orders = std::fs::read_to_string(work.path().join("inputs/orders.csv")).unwrap();
    assert_eq!(got, expected_totals(&orders));
}

/// The CRC-32 of PNG chunks (ISO 3309, the zip and PNG one), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The chunks of a PNG after its signature, as (type, data), each chunk's CRC checked;
/// a truncated file or a bad CRC fails the test.
fn png_chunks(png: &[u8]) -> Vec<([u8; 4], &[u8])> {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the PNG signature");
    let mut chunks = Vec::new();
    let mut at = 8;
    // At most one chunk per 12 bytes: the loop ends.
    while at < png.len() {
        assert!(at + 12 <= png.len(), "a truncated chunk at byte {at}");
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let end = at + 8 + len;
        assert!(end + 4 <= png.len(), "chunk at byte {at} runs past the end");
        let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
        let crc = u32::from_be_bytes(png[end..end + 4].try_into().unwrap());
        assert_eq!(
            crc32(&png[at + 4..end]),
            crc,
            "the CRC of chunk {}",
            String::from_utf8_lossy(&kind)
        );
        chunks.push((kind, &png[at + 8..end]));
        at = end + 4;
    }
    chunks
}

#[test]
fn png_chunks_catch_a_broken_file() {
    // The smallest valid PNG: 1x1, grey, one IDAT (zlib of a filter byte and a pixel).
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [
        (*b"IHDR", &b"\0\0\0\x01\0\0\0\x01\x08\0\0\0\0"[..]),
        (*b"IDAT", &b"\x78\x9c\x63\x60\x00\x00\x00\x02\x00\x01"[..]),
        (*b"IEND", &b""[..]),
    ] {
        png.extend((data.len() as u32).to_be_bytes());
        png.extend(kind);
        png.extend(data);
        let mut crc_input = kind.to_vec();
        crc_input.extend(data);
        png.extend(crc32(&crc_input).to_be_bytes());
    }
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the standard check value");
    assert_eq!(png_chunks(&png).len(), 3);
    let mut flipped = png.clone();
    flipped[20] ^= 1; // inside IHDR's data
    assert!(std::panic::catch_unwind(|| png_chunks(&flipped)).is_err());
    assert!(std::panic::catch_unwind(|| png_chunks(&png[..png.len() - 3])).is_err());
    assert!(std::panic::catch_unwind(|| png_chunks(b"GIF89a..........")).is_err());
}

#[test]
#[ignore = "needs the fetched scientific guest: RUNNER_TEST_SCI_GUEST=$(runner guest path cpython-3.15-scientific)"]
fn matplotlib_example_saves_a_real_png() {
    let work = copy_example_named("matplotlib-plot", PLOT_REQUEST);
    let run_dir = exec_completed(work.path(), PLOT_REQUEST, "matplotlib plot");
    let guest_stdout = std::fs::read_to_string(run_dir.join("stdout")).unwrap();
    assert!(
        guest_stdout.starts_with("matplotlib 3.")
            && guest_stdout.contains("backend Agg")
            && guest_stdout.contains("oslo: min -4.3, max 16.4")
            && guest_stdout.contains("/out/temperatures.png: 800x500 px"),
        "{guest_stdout}"
    );
    // matplotlib found its data and a writable config directory: no warning at all.
    let guest_stderr = std::fs::read_to_string(run_dir.join("stderr")).unwrap();
    assert_eq!(guest_stderr, "", "the guest's stderr");

    // The PNG is the only file under /out (the scratch /tmp with matplotlib's font
    // cache is gone), and it is a real one: signature, IHDR first with the figure's
    // size, RGBA 8-bit, every CRC right, image data, IEND last.
    let out_dir = run_dir.join("out");
    assert_eq!(names_in(&out_dir), ["temperatures.png"]);
    let png = std::fs::read(out_dir.join("temperatures.png")).unwrap();
    assert!(
        png.len() > 20_000,
        "{} bytes: too small for an 800x500 chart with text and four lines",
        png.len()
    );
    let chunks = png_chunks(&png);
    let (first, ihdr) = chunks[0];
    assert_eq!(&first, b"IHDR");
    assert_eq!(ihdr.len(), 13);
    let width = u32::from_be_bytes(ihdr[0..4].try_into().unwrap());
    let height = u32::from_be_bytes(ihdr[4..8].try_into().unwrap());
    assert_eq!((width, height), (800, 500));
    assert_eq!((ihdr[8], ihdr[9]), (8, 6), "8-bit RGBA");
    let idat: usize = chunks
        .iter()
        .filter(|(k, _)| k == b"IDAT")
        .map(|(_, d)| d.len())
        .sum();
    assert!(idat > 10_000, "{idat} bytes of image data");
    assert_eq!(&chunks.last().unwrap().0, b"IEND");
}

#[test]
fn a_request_for_the_unfetched_guest_names_the_fetch_command() {
    let empty_store = tempfile::tempdir().unwrap();
    let work = copy_example();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .env("RUNNER_GUEST_DIR", empty_store.path())
        .arg("exec")
        .arg(work.path().join(REQUEST))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("guest.unavailable")
            && stderr.contains("`runner guest fetch cpython-3.15-scientific`"),
        "{stderr}"
    );
    // Nothing was downloaded, nothing ran, no result was written.
    assert_eq!(std::fs::read_dir(empty_store.path()).unwrap().count(), 0);
    assert!(!work.path().join("results").exists());
}
