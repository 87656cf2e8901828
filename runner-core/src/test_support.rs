//! Helpers shared by this crate's unit tests.

/// Asserts that each `(input, code)` case yields `code` among `codes(input)`, naming the
/// input, the wanted code and what it got when one does not.
pub(crate) fn assert_each_yields<C: AsRef<str>>(
    cases: &[(&str, &str)],
    codes: impl Fn(&str) -> Vec<C>,
) {
    for (input, code) in cases {
        let got: Vec<String> = codes(input).iter().map(|c| c.as_ref().to_owned()).collect();
        assert!(
            got.iter().any(|c| c == code),
            "{input:?}: wanted {code}, got {got:?}"
        );
    }
}
