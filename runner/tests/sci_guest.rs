//! The scientific guest (`cpython-3.15-scientific`, CPython 3.15 with pandas) end to end:
//! `runner exec examples/pandas-groupby/…` through the built binary, and a request for it
//! on a machine where it is not fetched.
//!
//! Running the example needs the fetched guest (a 98 MB download, then a 1.5–3 minute
//! compile needing about 2.2 GB of memory, once), so that test is `#[ignore]`d and fails,
//! rather than passing, without `RUNNER_TEST_SCI_GUEST`:
//!
//! ```sh
//! target/release/runner guest fetch cpython-3.15-scientific
//! RUNNER_TEST_SCI_GUEST=$(target/release/runner guest path cpython-3.15-scientific) \
//!     cargo test --release --ignore-rust-version -p runner --test sci_guest -- --ignored
//! ```
//! (`just test-sci` does both.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const REQUEST: &str = "TR-20261121-120000Z-pandas-groupby.md";

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pandas-groupby")
}

/// A copy of the example in a temporary directory (its results go there too).
fn copy_example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("inputs")).unwrap();
    std::fs::copy(example_dir().join(REQUEST), dir.path().join(REQUEST)).unwrap();
    for name in ["groupby.py", "orders.csv"] {
        std::fs::copy(
            example_dir().join("inputs").join(name),
            dir.path().join("inputs").join(name),
        )
        .unwrap();
    }
    dir
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
    let guest = std::env::var_os("RUNNER_TEST_SCI_GUEST")
        .map(PathBuf::from)
        .expect(
            "RUNNER_TEST_SCI_GUEST must name the fetched guest: \
             RUNNER_TEST_SCI_GUEST=$(runner guest path cpython-3.15-scientific)",
        );
    assert!(guest.is_file(), "{} is not a file", guest.display());
    let guest_dir = guest.parent().unwrap();
    let work = copy_example();

    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .env("RUNNER_GUEST_DIR", guest_dir)
        .arg("exec")
        .arg(work.path().join(REQUEST))
        .arg("--json")
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "runner exec (pandas groupby): {:.2} s\n{stderr}",
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

    let result = PathBuf::from(summary["result_path"].as_str().unwrap());
    let run_dir = result.with_extension("");
    let guest_stdout = std::fs::read_to_string(run_dir.join("stdout")).unwrap();
    assert!(
        guest_stdout.starts_with("pandas 3.") && guest_stdout.contains("10000 orders, 30 groups"),
        "{guest_stdout}"
    );

    // The artifact is the only file under /out: the scratch /tmp is gone.
    let out_dir = run_dir.join("out");
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["revenue_by_region_product.csv"], "{names:?}");

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
