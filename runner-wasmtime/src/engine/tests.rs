use super::testkit::{Sandbox, json_line, limits, shared, text};
use super::*;
use runner_sandbox::runtime::{GuestRuntime, ReadOnlyMount};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Python that tries each `(label, expression)` and prints which succeeded, as JSON:
/// `{"label": "ok: <repr>" | "err: <exception>"}`.
fn probe(attempts: &[(&str, &str)]) -> String {
    // `lst` is lstat that refuses to count a symlink reported as itself as an
    // escape: on a path with a trailing slash wasmtime reports the link, not its
    // target (bytecodealliance/wasmtime#14380), which reveals nothing outside.
    let mut code = String::from(
        "import json, os, stat\nr = {}\n\
         def lst(p):\n\
         \x20   s = os.lstat(p)\n\
         \x20   if stat.S_ISLNK(s.st_mode):\n\
         \x20       raise OSError('reported the symlink itself')\n\
         \x20   return oct(s.st_mode)\n",
    );
    for (label, expr) in attempts {
        code.push_str(&format!(
            "try:\n    r[{label:?}] = 'ok: ' + repr({expr})[:200]\nexcept BaseException as e:\n    r[{label:?}] = 'err: ' + type(e).__name__ + ': ' + str(e)\n"
        ));
    }
    code.push_str("print(json.dumps(r))\n");
    code
}

fn assert_all_failed(outcome: &Outcome) {
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    let found = json_line(outcome);
    for (label, result) in found.as_object().expect("object") {
        let result = result.as_str().unwrap_or_default();
        eprintln!("{label}: {result}");
        assert!(result.starts_with("err: "), "{label} succeeded: {result}");
        // A mistake in the probe itself would also "fail".
        for mistake in ["NameError", "AttributeError", "TypeError", "SyntaxError"] {
            assert!(
                !result.starts_with(&format!("err: {mistake}")),
                "{label}: {result}"
            );
        }
    }
}

/// Runs a fixture module from `tests/guests/` with `runtime`, on a fresh engine.
fn run_fixture(name: &str, runtime: GuestRuntime) -> Result<Outcome, BackendError> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/guests")
        .join(name);
    let engine = new_engine().unwrap();
    let module = Module::new(&engine, fs::read(&path).unwrap()).unwrap();
    let mut sandbox = Sandbox::new(&["fixture"], limits());
    let g = &mut sandbox.spec.program;
    g.wasm_path = path;
    g.runtime = runtime;
    run_guest(
        &engine,
        &module,
        sandbox.guest(),
        &sandbox.spec,
        &RunOptions::default(),
    )
}

fn reactor() -> GuestRuntime {
    GuestRuntime {
        entry: EntryPoint::Reactor,
        host_imports: HostImports::NoHost,
        ..GuestRuntime::default()
    }
}

/// How each reactor fixture ends: `_initialize` then `run`, its `host` import
/// answered by the stub ([`NO_HOST`]) or refused, a missing `run`, wasm exceptions.
#[test]
fn reactor_fixtures_end_as_their_runtime_says() {
    let refuse = GuestRuntime {
        host_imports: HostImports::Refuse,
        ..reactor()
    };
    // The fixture, its runtime, how it ends, its exit code when checked, and what the
    // detail names.
    type Case<'a> = (
        &'a str,
        GuestRuntime,
        OutcomeKind,
        Option<i32>,
        &'a [&'a str],
    );
    let cases: [Case; 4] = [
        // 10 * 7 (set by _initialize) + -1 (NO_HOST).
        (
            "reactor-init-then-run.wasm",
            reactor(),
            OutcomeKind::Completed,
            Some(69),
            &[],
        ),
        (
            "reactor-init-then-run.wasm",
            refuse,
            OutcomeKind::Trapped,
            None,
            &["host", "call"],
        ),
        (
            "reactor-without-run.wasm",
            reactor(),
            OutcomeKind::Trapped,
            None,
            &["`run`"],
        ),
        (
            "reactor-throws-and-catches.wasm",
            reactor(),
            OutcomeKind::Completed,
            Some(5),
            &[],
        ),
    ];
    for (fixture, runtime, kind, exit_code, named) in cases {
        let outcome = run_fixture(fixture, runtime).unwrap();
        testkit::assert_ended(&outcome, kind, named, fixture);
        if let Some(code) = exit_code {
            assert_eq!(outcome.exit_code, code, "{fixture}");
        }
    }
}

#[test]
fn reactor_host_import_not_returning_one_i32_cannot_be_stubbed() {
    let err = run_fixture("reactor-host-import-returns-i64.wasm", reactor())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("host::call") && err.contains("not one i32"),
        "{err}"
    );
}

/// The runtime hooks on the real (3.12) guest: `argv[0]` replaced, extra environment,
/// a read-only asset mount, a scratch /tmp that is bounded by and removed from /out.
#[test]
fn runtime_argv0_env_mount_and_scratch() {
    let mut sandbox = Sandbox::python(
        &(String::from(
            "import json, os, sys\n\
             open('/tmp/scratch.txt', 'w').write('x' * 1000)\n\
             r = {'orig_argv0': sys.orig_argv[0], 'tmpdir': os.environ.get('TMPDIR'),\n\
                  'asset': open('/opt/assets/data.txt').read(),\n\
                  'tmp': os.listdir('/tmp'), 'out': os.listdir('/out')}\n",
        ) + &probe(&[
            ("asset_write", "open('/opt/assets/data.txt', 'w')"),
            ("asset_create", "open('/opt/assets/new.txt', 'w')"),
            ("asset_parent", "os.listdir('/opt/assets/..')"),
        ])
        .replacen("r = {}\n", "", 1)),
        limits(),
    );
    let assets = sandbox.host("assets");
    fs::create_dir(&assets).unwrap();
    fs::write(assets.join("data.txt"), "asset bytes").unwrap();
    let g = &mut sandbox.spec.program;
    g.runtime = GuestRuntime {
        argv0: Some("/usr/local/bin/python.wasm".into()),
        env: vec![("TMPDIR".into(), "/tmp".into())],
        scratch: Some("/tmp".into()),
        mounts: vec![ReadOnlyMount {
            host: assets.clone(),
            guest: "/opt/assets".into(),
        }],
        ..GuestRuntime::default()
    };
    let outcome = sandbox.run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    let v = json_line(&outcome);
    assert_eq!(v["orig_argv0"], "/usr/local/bin/python.wasm", "{v}");
    assert_eq!(v["tmpdir"], "/tmp");
    assert_eq!(v["asset"], "asset bytes");
    assert_eq!(v["tmp"], serde_json::json!(["scratch.txt"]));
    // While the guest runs, scratch is visible (and counted) inside /out ...
    assert_eq!(v["out"], serde_json::json!([SCRATCH_IN_OUT]));
    for label in ["asset_write", "asset_create", "asset_parent"] {
        let r = v[label].as_str().unwrap_or_default();
        assert!(
            r.starts_with("err: ") && !r.contains("NameError"),
            "{label}: {r}"
        );
    }
    // ... and gone when it ends; the asset is untouched.
    assert_eq!(fs::read_dir(sandbox.host("out")).unwrap().count(), 0);
    assert_eq!(
        fs::read_to_string(assets.join("data.txt")).unwrap(),
        "asset bytes"
    );
    assert_eq!(fs::read_dir(&assets).unwrap().count(), 1);
}

#[test]
fn engine_fingerprint_is_stable_and_in_the_file_name() {
    let engine = &shared().engine;
    let fp = engine_fingerprint(engine);
    assert_eq!(fp.len(), 16);
    assert_eq!(fp, engine_fingerprint(&new_engine().unwrap()));
    let name = precompiled_path(engine, Path::new("/c"), testkit::GUEST_SHA256);
    assert!(name.to_string_lossy().contains(&fp));
    assert!(name.to_string_lossy().contains(crate::WASMTIME_VERSION));
}

#[test]
fn hello_world_prints() {
    let sandbox = Sandbox::python("print('hello from the guest')", limits());
    let outcome = testkit::hello("in-process", "hello from the guest\n", || sandbox.run());
    assert!(outcome.stderr.is_empty(), "{}", text(&outcome.stderr));
    assert!(!outcome.stdout_capped);
    assert_eq!(
        outcome.engine,
        format!("wasmtime {}", crate::WASMTIME_VERSION)
    );
}

#[test]
fn exit_code_is_kept() {
    let outcome = Sandbox::python("import sys; print('bye'); sys.exit(3)", limits()).run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(text(&outcome.stdout), "bye\n");
}

#[test]
fn uncaught_exception_is_a_completed_run_with_code_1() {
    let outcome = Sandbox::python("raise ValueError('boom')", limits()).run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(outcome.exit_code, 1);
    assert!(text(&outcome.stderr).contains("ValueError: boom"));
}

#[test]
fn guest_sees_only_its_argv_and_environment() {
    let sandbox = Sandbox::new(
        &[
            "python",
            "-c",
            "import json, os, sys; print(json.dumps([sys.argv, dict(os.environ), os.getcwd()]))",
            "a b",
            "--x",
        ],
        limits(),
    );
    let outcome = sandbox.run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    let v = json_line(&outcome);
    assert_eq!(v[0], serde_json::json!(["-c", "a b", "--x"]));
    let env = v[1].as_object().unwrap();
    let expected: std::collections::BTreeMap<_, _> = GUEST_ENV
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
        .collect();
    let actual: std::collections::BTreeMap<_, _> =
        env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(actual, expected);
    assert_eq!(v[2], "/");
}

#[test]
fn reads_in_by_absolute_and_relative_path() {
    let sandbox = Sandbox::python(
        "import json, os\n\
         a = open('/in/data.csv').read()\n\
         b = open('data.csv').read()\n\
         c = open('./sub/n.txt').read()\n\
         print(json.dumps([a, b, c, sorted(os.listdir('/in')), sorted(os.listdir('.'))]))",
        limits(),
    );
    fs::write(sandbox.host("in/data.csv"), "x,y\n1,2\n").unwrap();
    fs::create_dir(sandbox.host("in/sub")).unwrap();
    fs::write(sandbox.host("in/sub/n.txt"), "nested").unwrap();
    let v = json_line(&sandbox.run());
    assert_eq!(
        v,
        serde_json::json!([
            "x,y\n1,2\n",
            "x,y\n1,2\n",
            "nested",
            ["data.csv", "sub"],
            ["data.csv", "sub"]
        ])
    );
}

#[test]
fn script_file_in_in_runs_with_relative_path() {
    let sandbox = Sandbox::new(&["python", "main.py", "arg"], limits());
    fs::write(sandbox.host("in/helper.py"), "VALUE = 42\n").unwrap();
    fs::write(
        sandbox.host("in/main.py"),
        "import sys, helper\nprint(helper.VALUE, sys.argv[1:])\n",
    )
    .unwrap();
    let outcome = sandbox.run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(
        text(&outcome.stdout),
        "42 ['arg']\n",
        "{}",
        text(&outcome.stderr)
    );
}

#[test]
fn writes_out() {
    let sandbox = Sandbox::python(
        "import os\n\
         os.makedirs('/out/d/e')\n\
         open('/out/result.txt', 'w').write('result')\n\
         open('/out/d/e/f.bin', 'wb').write(bytes(range(256)))\n\
         print(sorted(os.listdir('/out')))",
        limits(),
    );
    let outcome = sandbox.run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(text(&outcome.stdout), "['d', 'result.txt']\n");
    assert_eq!(
        fs::read_to_string(sandbox.host("out/result.txt")).unwrap(),
        "result"
    );
    assert_eq!(fs::read(sandbox.host("out/d/e/f.bin")).unwrap().len(), 256);
}

/// Also the regression test for GHSA-2r75-cxrj-cmph: O_TRUNC alone must not get
/// write access to a read-only preopen.
#[test]
fn in_is_read_only() {
    let sandbox = Sandbox::python(
        &probe(&[
            ("write_existing", "open('/in/data.csv', 'w')"),
            ("append_existing", "open('/in/data.csv', 'a')"),
            ("create_new", "open('/in/new.txt', 'w')"),
            ("create_relative", "open('new.txt', 'x')"),
            (
                "trunc_only",
                "os.open('/in/data.csv', os.O_RDONLY | os.O_TRUNC)",
            ),
            (
                "trunc_relative",
                "os.open('data.csv', os.O_RDONLY | os.O_TRUNC)",
            ),
            (
                "trunc_creat",
                "os.open('/in/data.csv', os.O_RDONLY | os.O_TRUNC | os.O_CREAT)",
            ),
            ("remove", "os.remove('/in/data.csv')"),
            ("rename", "os.rename('/in/data.csv', '/in/moved.csv')"),
            (
                "rename_to_out",
                "os.rename('/in/data.csv', '/out/moved.csv')",
            ),
            ("mkdir", "os.mkdir('/in/d')"),
            ("symlink", "os.symlink('data.csv', '/in/l')"),
            ("link_into_in", "os.link('/out/w.txt', '/in/w.txt')"),
            ("utime", "os.utime('/in/data.csv', (0, 0))"),
        ]),
        limits(),
    );
    fs::write(sandbox.host("in/data.csv"), "keep me").unwrap();
    fs::write(sandbox.host("out/w.txt"), "w").unwrap();
    let outcome = sandbox.run();
    assert_all_failed(&outcome);
    assert_eq!(
        fs::read_to_string(sandbox.host("in/data.csv")).unwrap(),
        "keep me"
    );
    assert_eq!(fs::read_dir(sandbox.host("in")).unwrap().count(), 1);
    assert!(!sandbox.host("out/moved.csv").exists());
}

#[test]
fn host_paths_are_unreachable() {
    fs::write("/tmp/runner-test-host-secret", "secret").ok();
    let sandbox = Sandbox::python(
        &probe(&[
            ("etc_passwd", "open('/etc/passwd').read()"),
            ("tmp_secret", "open('/tmp/runner-test-host-secret').read()"),
            ("in_dotdot", "open('/in/../secret').read()"),
            (
                "in_dotdot_deep",
                "open('/in/../../../../etc/passwd').read()",
            ),
            ("out_dotdot", "open('/out/../secret').read()"),
            ("relative_dotdot", "open('../secret').read()"),
            ("list_in_parent", "os.listdir('/in/..')"),
            ("list_out_parent", "os.listdir('/out/..')"),
            ("stat_in_parent", "os.stat('/in/..')"),
            ("proc", "open('/proc/self/environ').read()"),
            ("dev", "open('/dev/null', 'w')"),
            ("socket", "__import__('socket').socket()"),
            ("subprocess", "__import__('subprocess').run(['ls'])"),
            ("chdir_up", "os.chdir('/in/..')"),
        ]),
        limits(),
    );
    fs::write(sandbox.host("secret"), "secret").unwrap();
    assert_all_failed(&sandbox.run());
}

/// Symlinks planted in the staged inputs (absolute, relative, to files and
/// directories) lead nowhere outside. With a trailing slash too: the read-only
/// side of GHSA-vqjp-4c8c-hfgg.
#[test]
fn symlinks_in_in_cannot_be_followed_out() {
    let sandbox = Sandbox::python(
        &probe(&[
            ("abs_file", "open('/in/abs_file').read()"),
            ("rel_file", "open('/in/rel_file').read()"),
            ("rel_file_relative", "open('rel_file').read()"),
            ("abs_dir_list", "os.listdir('/in/abs_dir')"),
            ("abs_dir_list_slash", "os.listdir('/in/abs_dir/')"),
            ("rel_dir_list_slash", "os.listdir('/in/rel_dir/')"),
            ("rel_dir_file", "open('/in/rel_dir/secret.txt').read()"),
            (
                "nofollow_dir_slash",
                "os.listdir(os.open('/in/rel_dir/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
            ),
            (
                "nofollow_abs_slash",
                "os.listdir(os.open('/in/abs_dir/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
            ),
            ("lstat_slash", "lst('/in/rel_dir/')"),
            ("lstat_abs_slash", "lst('/in/abs_dir/')"),
            ("stat_slash", "os.stat('/in/rel_dir/').st_ino"),
            ("chained", "open('/in/chain/secret.txt').read()"),
            ("dotdot_link", "os.listdir('/in/up/')"),
        ]),
        limits(),
    );
    let host_dir = sandbox.host("host_dir");
    fs::create_dir(&host_dir).unwrap();
    fs::write(host_dir.join("secret.txt"), "secret").unwrap();
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, sandbox.host(&format!("in/{name}"))).unwrap();
    };
    link("/etc/passwd", "abs_file");
    link("../host_dir/secret.txt", "rel_file");
    link(host_dir.to_str().unwrap(), "abs_dir");
    link("../host_dir", "rel_dir");
    link("rel_dir", "chain");
    link("..", "up");
    assert_all_failed(&sandbox.run());
}

/// GHSA-vqjp-4c8c-hfgg (and GHSA-m9f7-9w4p-gv38 for renames): a guest with write
/// access plants symlinks pointing outside and uses them with trailing slashes,
/// where `O_NOFOLLOW` used to stop applying. Targets are sacrificial directories
/// in the test's own temporary root, never the host's real files.
#[test]
fn symlinks_made_in_out_cannot_escape_with_trailing_slashes() {
    let mut sandbox = Sandbox::python("", limits());
    let host_dir = sandbox.host("host_dir");
    fs::create_dir(&host_dir).unwrap();
    fs::write(host_dir.join("secret.txt"), "secret").unwrap();
    fs::create_dir(sandbox.host("victim")).unwrap();
    fs::write(sandbox.host("out/mine.txt"), "mine").unwrap();
    // Creating the symlinks may itself be refused (absolute targets); either way
    // none of them may lead anywhere.
    let setup = format!(
        "import os\n\
         for t, n in [('../host_dir', '/out/rel'), ({host:?}, '/out/abs'), ('..', '/out/up'),\n\
                      ('../victim', '/out/victim'), ('../created', '/out/new')]:\n\
         \x20   try:\n\
         \x20       os.symlink(t, n)\n\
         \x20   except OSError as e:\n\
         \x20       print('symlink', n, e)\n",
        host = host_dir.to_str().unwrap()
    );
    let code = setup
        + &probe(&[
            ("list_rel_slash", "os.listdir('/out/rel/')"),
            ("list_abs_slash", "os.listdir('/out/abs/')"),
            ("read_rel", "open('/out/rel/secret.txt').read()"),
            (
                "nofollow_rel_slash",
                "os.listdir(os.open('/out/rel/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
            ),
            (
                "nofollow_abs_slash",
                "os.listdir(os.open('/out/abs/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
            ),
            (
                "nofollow_up_slash",
                "os.listdir(os.open('/out/up/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
            ),
            ("lstat_rel_slash", "lst('/out/rel/')"),
            ("lstat_up_slash", "lst('/out/up/')"),
            ("mkdir_through", "os.mkdir('/out/rel/made')"),
            ("mkdir_through_slash", "os.mkdir('/out/new/')"),
            ("create_through", "open('/out/rel/planted.txt', 'w')"),
            (
                "rename_victim_slash",
                "os.rename('/out/victim/', '/out/stolen')",
            ),
            (
                "rename_into_victim",
                "os.rename('/out/mine.txt', '/out/victim/mine.txt')",
            ),
            ("unlink_through_slash", "os.remove('/out/rel/secret.txt')"),
            ("rmdir_victim_slash", "os.rmdir('/out/victim/')"),
            ("utime_through", "os.utime('/out/rel/', (0, 0))"),
        ]);
    let g = &mut sandbox.spec.program;
    g.argv[2] = code;
    assert_all_failed(&sandbox.run());
    // The host side is untouched.
    assert_eq!(
        fs::read_to_string(host_dir.join("secret.txt")).unwrap(),
        "secret"
    );
    assert_eq!(fs::read_dir(&host_dir).unwrap().count(), 1);
    assert!(sandbox.host("victim").is_dir());
    assert_eq!(fs::read_dir(sandbox.host("victim")).unwrap().count(), 0);
    assert!(!sandbox.host("created").exists());
    assert!(!sandbox.host("out/stolen").exists());
}

#[test]
fn infinite_loop_times_out() {
    let mut l = limits();
    l.wall = Duration::from_secs(2);
    let outcome = Sandbox::python("print('start', flush=True)\nwhile True: pass", l).run();
    testkit::assert_timed_out(&outcome, 1.9..3.0);
    // Output written before the stop is kept.
    assert_eq!(text(&outcome.stdout), "start\n");
}

#[test]
fn sleep_times_out_near_the_limit() {
    let mut l = limits();
    l.wall = Duration::from_secs(2);
    let outcome = Sandbox::python("import time; time.sleep(30)", l).run();
    testkit::assert_timed_out(&outcome, 1.9..2.6);
}

#[test]
fn memory_balloon_is_memory_exceeded() {
    let mut l = limits();
    l.memory_bytes = 64 << 20;
    let outcome = Sandbox::python("b = bytearray(500 * 1024 * 1024)\nprint(len(b))", l).run();
    assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
    assert_eq!(outcome.exit_code, 137);
    assert!(
        text(&outcome.stderr).contains("MemoryError"),
        "{}",
        text(&outcome.stderr)
    );
    let detail = outcome.detail.unwrap_or_default();
    assert!(
        detail.contains("denied") && detail.contains("own exit code was 1"),
        "{detail}"
    );
}

#[test]
fn memory_under_the_limit_is_fine() {
    let mut l = limits();
    l.memory_bytes = 128 << 20;
    let outcome = Sandbox::python("b = bytearray(64 * 1024 * 1024)\nprint(len(b))", l).run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(text(&outcome.stdout), format!("{}\n", 64 << 20));
}

#[test]
fn stdout_flood_is_output_limit() {
    let mut l = limits();
    l.stdout_bytes = 64 << 10;
    let outcome = Sandbox::python("while True: print('x' * 1000)", l).run();
    assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
    assert!(outcome.stdout_capped);
    assert_eq!(outcome.stdout.len(), 64 << 10);
    assert_eq!(outcome.exit_code, 141);
}

#[test]
fn stderr_flood_is_output_limit() {
    let mut l = limits();
    l.stderr_bytes = 16 << 10;
    let outcome = Sandbox::python("import sys\nwhile True: sys.stderr.write('e' * 100)", l).run();
    assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
    assert!(outcome.stderr_capped && !outcome.stdout_capped);
    assert_eq!(outcome.stderr.len(), 16 << 10);
}

#[test]
fn cpu_budget_stops_a_busy_guest() {
    let mut l = limits();
    l.wall = Duration::from_secs(20);
    let options = RunOptions {
        cpu: Some(CpuBudget {
            clock: CpuClock::Thread,
            limit: Duration::from_secs(1),
        }),
        ..Default::default()
    };
    let outcome = Sandbox::python("while True: pass", l).run_with(&options);
    assert_eq!(outcome.kind, OutcomeKind::CpuExhausted, "{outcome:?}");
    assert_eq!(outcome.exit_code, 152);
    assert!(outcome.runtime_sec < 5.0, "{}", outcome.runtime_sec);
}

#[test]
fn trap_is_trapped_with_the_message() {
    // wasi-libc's abort() executes `unreachable`.
    let outcome = Sandbox::python(
        "import os\nprint('before', flush=True)\nos.abort()",
        limits(),
    )
    .run();
    assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
    assert_eq!(outcome.exit_code, 134);
    let detail = outcome.detail.unwrap_or_default();
    assert!(
        detail.contains("wasm trap") && detail.contains("unreachable"),
        "{detail}"
    );
    assert_eq!(text(&outcome.stdout), "before\n");
}

#[test]
fn runaway_recursion_ends_as_an_outcome() {
    let mut l = limits();
    l.memory_bytes = 64 << 20;
    let outcome = Sandbox::python(
        "import sys\nsys.setrecursionlimit(10**9)\ndef f(n): return f(n + 1) + 1\nf(0)",
        l,
    )
    .run();
    // Python frames live in linear memory: the limiter, not the host, stops it.
    assert!(
        matches!(
            outcome.kind,
            OutcomeKind::MemoryExceeded | OutcomeKind::Trapped
        ),
        "{outcome:?}"
    );
}

#[test]
fn stdin_is_closed() {
    let outcome = Sandbox::python("import sys; print(repr(sys.stdin.read()))", limits()).run();
    assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
    assert_eq!(text(&outcome.stdout), "''\n", "{}", text(&outcome.stderr));
}

#[test]
fn memory_limit_below_the_guest_minimum_fails_instantiation() {
    let mut l = limits();
    l.memory_bytes = 1 << 20;
    let outcome = Sandbox::python("print(1)", l).run();
    assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
}

/// A cache seeded with the shared precompiled module and its sidecar (instead of
/// compiling again).
struct Seeded {
    /// Holds the cache directory.
    _root: tempfile::TempDir,
    dir: PathBuf,
    cache: ModuleCache,
    name: String,
    cwasm: PathBuf,
    bytes: Vec<u8>,
    sum: String,
}

impl Seeded {
    fn new(shared: &testkit::Shared) -> Self {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache");
        let cache = ModuleCache::create(&dir).unwrap();
        let name = precompiled_name(&shared.engine, testkit::GUEST_SHA256);
        let bytes = fs::read(&shared.cwasm).unwrap();
        let started = Instant::now();
        let sum = runner_core::digest::sha256_hex(&bytes);
        eprintln!(
            "sidecar sha256 of {} bytes of precompiled module: {:.1} ms",
            bytes.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        cache
            .write_atomically(&suffixed(&name, SIDECAR), format!("{sum}\n").as_bytes())
            .unwrap();
        cache.write_atomically(&name, &bytes).unwrap();
        Self {
            cwasm: dir.join(&name),
            _root: root,
            dir,
            cache,
            name,
            bytes,
            sum,
        }
    }

    fn load(&self) -> Result<Module, BackendError> {
        load_module(&shared().engine, &self.cwasm)
    }

    fn beside(&self, suffix: &str) -> PathBuf {
        self.dir.join(suffixed(&self.name, suffix))
    }
}

#[test]
fn cache_rejects_tampering() {
    let shared = shared();
    let seeded = Seeded::new(shared);
    let mode = fs::metadata(&seeded.dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let started = Instant::now();
    drop(seeded.load().unwrap());
    eprintln!(
        "load precompiled module (verify + map): {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let chmod = |path: &Path, mode| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    };
    // What was done to a good cache, how, and what the refusal says.
    type Tamper<'a> = (&'a str, &'a dyn Fn(&Seeded), &'a str);
    let cases: [Tamper; 5] = [
        (
            "a flipped byte",
            &|s| {
                let mut bad = s.bytes.clone();
                bad[s.bytes.len() / 2] ^= 1;
                s.cache.write_atomically(&s.name, &bad).unwrap();
            },
            "differs from the sidecar",
        ),
        ("group-writable", &|s| chmod(&s.cwasm, 0o620), "writable"),
        (
            "a symlink to a good file",
            &|s| {
                let elsewhere = s.dir.with_file_name("elsewhere.cwasm");
                fs::write(&elsewhere, &s.bytes).unwrap();
                fs::remove_file(&s.cwasm).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &s.cwasm).unwrap();
            },
            "symbolic links",
        ),
        (
            "no sidecar",
            &|s| fs::remove_file(s.beside(SIDECAR)).unwrap(),
            "sidecar hash",
        ),
        (
            "a world-writable cache dir",
            &|s| chmod(&s.dir, 0o777),
            "its directory has mode 777",
        ),
    ];
    for (what, tamper, wanted) in cases {
        let seeded = Seeded::new(shared);
        tamper(&seeded);
        let err = seeded.load().unwrap_err().to_string();
        assert!(err.contains(wanted), "{what}: {err}");
    }

    // A world-writable cache dir is refused outright, also to compile into.
    chmod(&seeded.dir, 0o777);
    let guest = Path::new("/nonexistent");
    let err = ensure_compiled(
        &shared.engine,
        guest,
        testkit::GUEST_SHA256,
        &seeded.dir,
        |_| {},
    );
    let err = err.unwrap_err().to_string();
    assert!(err.contains("writable"), "{err}");
}

#[test]
fn verified_stamp_skips_the_rehash_but_not_an_in_place_edit() {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    use std::io::{Seek, SeekFrom};
    let Seeded {
        cache,
        name,
        cwasm,
        bytes,
        sum,
        ..
    } = &Seeded::new(shared());
    let load = || load_module(&shared().engine, cwasm);
    let stamp = cwasm.with_file_name(suffixed(name, VERIFIED));
    assert!(!stamp.exists());

    // The first load hashes and records what it verified.
    let started = Instant::now();
    drop(load().unwrap());
    let hashed = started.elapsed();
    let record = fs::read_to_string(&stamp).unwrap();
    assert!(record.starts_with(&format!("{sum} dev=")), "{record}");
    let started = Instant::now();
    drop(load().unwrap());
    eprintln!(
        "load with a full hash {:.1} ms, with the stamp {:.1} ms",
        hashed.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(fs::read_to_string(&stamp).unwrap(), record);

    // A byte changed in place, its modification time put back: the change time
    // moved, so the stamp no longer matches, the file is hashed and refused.
    let before = fs::metadata(cwasm).unwrap();
    let mut file = OpenOptions::new().write(true).open(cwasm).unwrap();
    file.seek(SeekFrom::Start(bytes.len() as u64 / 2)).unwrap();
    file.write_all(&[bytes[bytes.len() / 2] ^ 1]).unwrap();
    drop(file);
    let mtime = TimeSpec::new(before.mtime(), before.mtime_nsec());
    utimensat(
        nix::fcntl::AT_FDCWD,
        cwasm,
        &mtime,
        &mtime,
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    assert_eq!(fs::metadata(cwasm).unwrap().mtime(), before.mtime());
    let err = load().unwrap_err().to_string();
    assert!(err.contains("differs from the sidecar"), "{err}");

    // A stamp record naming another hash than the sidecar is not trusted either.
    cache.write_atomically(name, bytes).unwrap();
    drop(load().unwrap());
    let record = fs::read_to_string(&stamp).unwrap();
    let forged = record.replacen(sum.as_str(), &"0".repeat(64), 1);
    cache
        .write_atomically(&suffixed(name, VERIFIED), forged.as_bytes())
        .unwrap();
    let mut bad = bytes.clone();
    bad[7] ^= 1;
    let mut file = OpenOptions::new().write(true).open(cwasm).unwrap();
    file.write_all(&bad[..8]).unwrap();
    drop(file);
    assert!(load().is_err());
}

#[test]
fn ensure_compiled_checks_the_guest_hash_before_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("g.wasm");
    fs::write(&wasm, b"\0asm\x01\0\0\0").unwrap();
    let cache = ModuleCache::create(&dir.path().join("c")).unwrap();
    for (sha256, wanted) in [(&*"0".repeat(64), "expected"), ("../../etc", "hex")] {
        let err = cache.ensure_compiled(&shared().engine, &wasm, sha256, |_| {});
        let err = err.unwrap_err().to_string();
        assert!(err.contains(wanted), "{sha256}: {err}");
    }
}

#[test]
fn ensure_compiled_hits_the_cache() {
    let shared = shared();
    let mut messages = Vec::new();
    let started = Instant::now();
    let path = ensure_compiled(
        &shared.engine,
        &testkit::guest_path(),
        testkit::GUEST_SHA256,
        &testkit::test_cache_dir(),
        |m| messages.push(m.to_owned()),
    )
    .unwrap();
    eprintln!(
        "ensure_compiled cache hit: {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(path, shared.cwasm);
    assert!(messages.is_empty(), "{messages:?}");
}

/// Engine variants (about 30 s, three compiles): run with `--ignored --nocapture`
/// to see what copy-on-write initialisation and the pooling allocator buy for a
/// worker that instantiates the guest once.
#[test]
#[ignore = "slow: compiles the guest three times"]
fn measure_engine_variants() {
    let pooling = || {
        let mut pool = wasmtime::PoolingAllocationConfig::new();
        pool.total_memories(1)
            .total_tables(1)
            .total_core_instances(1)
            .total_stacks(1)
            .max_memory_size(1 << 30);
        wasmtime::InstanceAllocationStrategy::Pooling(pool)
    };
    let variants: Vec<(&str, Config)> = vec![
        ("default (cow on, on-demand)", engine_config()),
        ("cow off", {
            let mut c = engine_config();
            c.memory_init_cow(false);
            c
        }),
        ("pooling allocator", {
            let mut c = engine_config();
            c.allocation_strategy(pooling());
            c
        }),
    ];
    // Twice over, interleaved, so that neither variant always runs on a colder machine.
    for (name, config) in variants.iter().chain(variants.iter()) {
        let dir = tempfile::tempdir().unwrap();
        let engine = match Engine::new(config) {
            Ok(engine) => engine,
            Err(e) => {
                eprintln!("{name}: not possible with this configuration: {e:#}");
                continue;
            }
        };
        let cwasm = ensure_compiled(
            &engine,
            &testkit::guest_path(),
            testkit::GUEST_SHA256,
            dir.path(),
            |_| {},
        )
        .unwrap();
        let mut times = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let engine = Engine::new(config).unwrap();
            let module = load_module(&engine, &cwasm).unwrap();
            let loaded = started.elapsed();
            let sandbox = Sandbox::python("print('hi')", limits());
            let outcome = run_guest(
                &engine,
                &module,
                sandbox.guest(),
                &sandbox.spec,
                &RunOptions::default(),
            )
            .unwrap();
            assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
            times.push((
                loaded.as_secs_f64() * 1e3,
                started.elapsed().as_secs_f64() * 1e3,
            ));
        }
        eprintln!("{name}: fresh engine + load + hello (ms): {times:.1?}");
    }
}

/// Compiling from scratch (about 10 s): run with `--ignored` to measure.
#[test]
#[ignore = "slow: compiles the guest from scratch"]
fn measure_compile() {
    let dir = tempfile::tempdir().unwrap();
    let engine = new_engine().unwrap();
    let started = Instant::now();
    let path = ensure_compiled(
        &engine,
        &testkit::guest_path(),
        testkit::GUEST_SHA256,
        dir.path(),
        |m| eprintln!("{m}"),
    )
    .unwrap();
    eprintln!("compile + write: {:.2} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    load_module(&engine, &path).unwrap();
    eprintln!(
        "first load: {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
}
