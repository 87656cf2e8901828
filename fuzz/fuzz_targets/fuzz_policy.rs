//! The policy loader: never panics; a policy it accepts pins the hash of its own text,
//! keeps the request rules equal to the request kind's rules, and loads again the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::policy::{Policy, RuleTarget};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(policy) = Policy::parse(text, "fuzz") else {
        return;
    };
    assert_eq!(policy.sha256, runner::digest::sha256_hex(data));
    assert_eq!(policy.text, text);
    assert!(policy.request.max_bytes > 0 && policy.output.excerpt_lines > 0);
    let codes = |rules: &[runner::policy::ForbiddenRule]| -> Vec<String> {
        rules.iter().map(|r| r.code.clone()).collect()
    };
    assert_eq!(
        codes(&policy.forbidden),
        codes(policy.rules_for(RuleTarget::Request))
    );
    for target in RuleTarget::ALL {
        for rule in policy.rules_for(target) {
            assert!(rule.code.starts_with("forbidden.") && rule.applies_to.contains(&target));
        }
    }
    let again = Policy::parse(&policy.text, "fuzz").expect("an accepted policy loads again");
    assert_eq!(again.sha256, policy.sha256);
    assert_eq!(codes(&again.forbidden), codes(&policy.forbidden));
    assert_eq!(again.approval.trusted.len(), policy.approval.trusted.len());
});
