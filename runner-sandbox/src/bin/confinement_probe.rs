//! `runner-confinement-probe [POLICY.toml]`: applies the worker's confinement to itself,
//! under the policy's `[confinement]` table (the built-in policy when none is named), and
//! prints what the kernel reports (see `runner_sandbox::confine::probe_main`). The tests
//! use it to prove each layer is in force; it is built beside `runner` and its workers
//! but is no part of them, and runs no guest.

fn main() {
    let policy = match std::env::args_os().nth(1) {
        None => runner_core::policy::Policy::builtin(),
        Some(path) => {
            let path = std::path::Path::new(&path);
            let parsed = runner_sandbox::read::read_to_string(path)
                .map_err(|e| format!("policy {}: {e}", path.display()))
                .and_then(|text| {
                    runner_core::policy::Policy::parse(&text, &path.display().to_string())
                        .map_err(|e| e.to_string())
                });
            match parsed {
                Ok(policy) => policy,
                Err(e) => {
                    eprintln!("runner-confinement-probe: {e}");
                    std::process::exit(2);
                }
            }
        }
    };
    std::process::exit(runner_sandbox::confine::probe_main(&policy.confinement));
}
