use super::*;

#[test]
fn cpu_seconds() {
    assert_eq!(parse_cpu_seconds("30"), Some(30.0));
    assert_eq!(parse_cpu_seconds("2.5s"), Some(2.5));
    assert_eq!(parse_cpu_seconds(" 10 seconds "), Some(10.0));
    assert_eq!(parse_cpu_seconds("1 core"), None);
    assert_eq!(parse_cpu_seconds("-1"), None);
    assert_eq!(parse_cpu_seconds("1e9"), None);
    assert_eq!(parse_cpu_seconds(""), None);
}

#[test]
fn input_paths() {
    let cases: &[(&str, Option<&str>)] = &[
        ("/in/a.csv", None),
        ("/in/d/a.csv", None),
        ("/etc/passwd", Some("inputs.path_outside_in")),
        ("/in/../etc", Some("inputs.path_traversal")),
        ("/in/", Some("inputs.path_invalid")),
        ("/in//a", Some("inputs.path_invalid")),
        ("/in/./a", Some("inputs.path_invalid")),
        ("in/a", Some("inputs.path_outside_in")),
    ];
    for (path, code) in cases {
        assert_eq!(input_path_problem(path).map(|p| p.0), *code, "{path}");
    }
}
