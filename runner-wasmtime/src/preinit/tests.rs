use super::*;
use crate::engine::testkit::{Sandbox, limits, shared, test_cache_dir, text};
use crate::engine::{RunOptions, ensure_compiled, load_module, run_guest};
use std::sync::OnceLock;

/// The pre-initialised module, built once per test process from the test guest.
fn snapshot_module() -> &'static Module {
    static MODULE: OnceLock<Module> = OnceLock::new();
    MODULE.get_or_init(|| {
        let shared = shared();
        let wasm = std::fs::read(crate::engine::testkit::guest_path()).unwrap();
        let sandbox = Sandbox::new(&["python"], limits());
        let started = Instant::now();
        let snapshot = build(
            &shared.engine,
            &wasm,
            sandbox.guest(),
            &sandbox.spec,
            runner_core::determinism::DEFAULT_STEP_NS,
        )
        .unwrap();
        eprintln!(
            "snapshot built in {:.1} s, {} bytes",
            started.elapsed().as_secs_f64(),
            snapshot.len()
        );
        let sha = runner_core::digest::sha256_hex(&snapshot);
        let dir = test_cache_dir().join("preinit");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{sha}.wasm"));
        std::fs::write(&path, &snapshot).unwrap();
        let started = Instant::now();
        let cwasm =
            ensure_compiled(&shared.engine, &path, &sha, &test_cache_dir(), |_| {}).unwrap();
        eprintln!("compiled in {:.1} s", started.elapsed().as_secs_f64());
        load_module(&shared.engine, &cwasm).unwrap()
    })
}

fn run_both(argv: &[&str], files: &[(&str, &str)]) -> (Outcome, Outcome) {
    run_both_with(argv, files, |_| {})
}

fn run_both_with(
    argv: &[&str],
    files: &[(&str, &str)],
    adjust: impl Fn(&mut SandboxSpec<GuestProgram>),
) -> (Outcome, Outcome) {
    let run = |module: &Module| {
        let mut sandbox = Sandbox::new(argv, limits());
        adjust(&mut sandbox.spec);
        for (name, body) in files {
            std::fs::write(sandbox.host("in").join(name), body).unwrap();
        }
        run_guest(
            &shared().engine,
            module,
            sandbox.guest(),
            &sandbox.spec,
            &RunOptions::default(),
        )
        .unwrap()
    };
    (run(&shared().module), run(snapshot_module()))
}

use runner_sandbox::Outcome;

fn assert_same(argv: &[&str], files: &[(&str, &str)]) {
    let (plain, pre) = run_both(argv, files);
    eprintln!(
        "{argv:?}: plain {:.3} s, pre-initialised {:.3} s",
        plain.runtime_sec, pre.runtime_sec
    );
    assert_eq!(
        (
            text(&pre.stdout),
            text(&pre.stderr),
            pre.exit_code,
            pre.kind
        ),
        (
            text(&plain.stdout),
            text(&plain.stderr),
            plain.exit_code,
            plain.kind
        ),
        "{argv:?}: pre-initialised (left) against plain (right)"
    );
}

const STATE: &str = "import sys, __main__\nprint(sys.argv, sys.orig_argv, sys.path, sys.executable, sys.prefix, sys.flags)\nprint(sorted(sys.modules))\nprint(sorted(vars(__main__)), __name__, __main__.__dict__.get('__file__'), __main__.__dict__.get('__cached__'), type(__main__.__loader__).__name__, __main__.__spec__)\nprint(sys.meta_path, [getattr(h, '__qualname__', h) for h in sys.path_hooks], sorted(sys.path_importer_cache))\nimport os; print(sorted(os.environ.items()), os.getcwd())\n";

#[test]
fn the_host_hands_the_boot_only_what_it_reproduces() {
    let dir = tempfile::tempdir().unwrap();
    let files: &[(&str, &[u8])] = &[
        ("s.py", b"print(1)\n"),
        ("c.pyc", b"print(1)\n"),
        ("magic.py", b"\xcb\x0d\r\nxxxx"),
        ("zipped.py", b"print(1)\nPK\x05\x06rest"),
    ];
    for (name, body) in files {
        std::fs::write(dir.path().join(name), body).unwrap();
    }
    std::fs::create_dir(dir.path().join("pkg")).unwrap();
    let in_file = |p: &str| Some(dir.path().join(p));
    let handles = |argv: &[&str]| {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        boot_handles(&argv, in_file)
    };
    assert!(handles(&["python", "-c", "pass"]));
    assert!(handles(&["python", "-u", "-c", "pass", "-I"]));
    assert!(handles(&["python", "s.py", "-m", "x"]));
    assert!(handles(&["python3", "-c", "pass"]));
    assert!(handles(&["python3.12", "s.py"]));
    for argv in [
        &["python3.11", "-c", "pass"][..],
        &["/usr/bin/python3", "-c", "pass"],
        &["python", "-c"],
        &["python"],
        &["python", "-m", "json.tool"],
        &["python", "-I", "-c", "pass"],
        &["python", "-", "s.py"],
        &["python", "c.pyc"],
        &["python", "magic.py"],
        &["python", "zipped.py"],
        &["python", "missing.py"],
        &["python", "pkg"],
    ] {
        assert!(!handles(argv), "{argv:?}");
    }
    assert!(!boot_handles(&["python".into(), "s.py".into()], |_| None));
}

#[test]
fn virtual_clock_and_seeded_entropy_are_the_same() {
    use runner_core::determinism::Determinism;
    use runner_core::determinism::VirtualClock;
    let code = "import time, random, os\nprint(time.time(), time.monotonic_ns(), time.perf_counter_ns(), time.process_time_ns(), time.localtime())\nprint(random.random(), os.urandom(8).hex())\nimport tempfile, uuid; print(uuid.uuid4(), tempfile.mkstemp())\n";
    let (plain, pre) = run_both_with(&["python", "-c", code], &[], |spec| {
        spec.determinism = Determinism {
            clock: Some(VirtualClock {
                start_unix_us: 1_700_000_000_000_000,
                step_ns: runner_core::determinism::DEFAULT_STEP_NS,
                sleeps_advance: true,
            }),
            seed: Some("ab".repeat(32)),
        };
    });
    assert_eq!(
        (text(&pre.stdout), text(&pre.stderr)),
        (text(&plain.stdout), text(&plain.stderr))
    );
}

#[test]
fn hello_is_the_same() {
    assert_same(&["python", "-c", "print('hello')"], &[]);
}

#[test]
fn state_seen_by_c_is_the_same() {
    assert_same(&["python", "-c", STATE, "a", "b c"], &[]);
}

#[test]
fn state_seen_by_a_script_is_the_same() {
    assert_same(&["python", "s.py", "x"], &[("s.py", STATE)]);
    assert_same(&["python", "/in/s.py"], &[("s.py", STATE)]);
    assert_same(&["python", "-u", "s.py", "-u"], &[("s.py", STATE)]);
    assert_same(&["python", "-u", "-c", STATE, "-u"], &[]);
}

#[test]
fn exits_and_errors_are_the_same() {
    assert_same(&["python", "-c", "import sys; sys.exit(3)"], &[]);
    assert_same(&["python", "-c", "import sys; sys.exit('bye')"], &[]);
    assert_same(&["python", "-c", "def f():\n  1/0\nf()"], &[]);
    assert_same(&["python", "-c", "x = ("], &[]);
    assert_same(
        &["python", "s.py"],
        &[("s.py", "def f():\n  raise KeyError('k')\n\nf()\n")],
    );
    assert_same(&["python", "s.py"], &[("s.py", "print(1)\nx = (\n")]);
    assert_same(&["python", "missing.py"], &[]);
}
