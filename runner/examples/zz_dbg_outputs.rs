fn main() {
    let p = runner::policy::Policy::builtin();
    let b = std::fs::read("/work/main/tests/requests/accept-era-csv-stats-copy.md").unwrap();
    let a = runner::request::validate(&b, &p).unwrap();
    println!("{:?}", a.outputs());
}
