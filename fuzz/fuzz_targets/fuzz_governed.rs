//! The governed-packet validator, with and without a catalog: never panics and judges
//! the same bytes the same way twice. Also the catalog reader.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::gate::Catalog;
use runner::gate::governed::validate;
use runner::policy::Policy;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);
/// The catalog the governed fixtures are judged with.
static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    Catalog::parse(include_str!("../../tests/governed/catalog.json")).expect("the catalog parses")
});

fuzz_target!(|data: &[u8]| {
    let policy = &*POLICY;
    let alone = validate(data, policy, None);
    assert_eq!(
        alone,
        validate(data, policy, None),
        "judged differently twice"
    );
    let with = validate(data, policy, Some(&CATALOG));
    assert_eq!(
        with,
        validate(data, policy, Some(&CATALOG)),
        "judged differently twice"
    );
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Catalog::parse(text);
    }
});
