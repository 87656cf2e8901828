//! What the guest sees: its preopened directories, argv, the scratch directory, the WASI
//! context and the "no host" stub for `host` imports.

use super::*;

/// The guest's preopened directories: `/in` read-only, `/out` read-write, and `/in`
/// again as `.`.
///
/// WASI has no working directory. wasi-libc keeps a `cwd` of `/` (changed only by a
/// guest's own `chdir`), makes a relative path absolute against it (`data.csv` →
/// `/data.csv`) and then picks the preopen with the longest matching name, where a
/// preopen named `.` (or `/`) has the empty name and matches any path. Without it,
/// `open('data.csv')` fails with ENOENT; with it, relative paths (and absolute paths
/// outside `/in` and `/out`) resolve inside the staged inputs, read-only, while
/// `/in/...` and `/out/...` still pick their own preopens. `os.getcwd()` stays `/`.
pub fn preopens(spec: &SandboxSpec<GuestProgram>) -> [(PathBuf, &'static str, FsPerms); 3] {
    [
        (spec.in_dir.clone(), "/in", FsPerms::ReadOnly),
        (spec.out_dir.clone(), "/out", FsPerms::ReadWrite),
        (spec.in_dir.clone(), ".", FsPerms::ReadOnly),
    ]
}

/// The guest's argv: the command's words, with `argv[0]` replaced when the guest's
/// runtime fixes it.
fn guest_argv(guest: &GuestProgram) -> Vec<String> {
    let mut argv = guest.argv.clone();
    if let (Some(argv0), Some(first)) = (&guest.runtime.argv0, argv.first_mut()) {
        first.clone_from(argv0);
    }
    argv
}

/// The run's scratch directory inside `/out` (see [`GuestRuntime::scratch`](runner_sandbox::runtime::GuestRuntime::scratch)), with the
/// `/out` it was made in, to remove it through when the guest is done.
pub struct Scratch {
    out: Dir,
    path: PathBuf,
}

impl Scratch {
    /// Creates the scratch directory (0700) in `spec.out_dir`.
    ///
    /// # Ambient Authority
    ///
    /// Opens `spec.out_dir`.
    pub(crate) fn create(spec: &SandboxSpec<GuestProgram>) -> Result<Self, BackendError> {
        let path = spec.out_dir.join(SCRATCH_IN_OUT);
        let mut builder = cap_std::fs::DirBuilder::new();
        builder.mode(0o700);
        runner_sandbox::host::open_dir(&spec.out_dir)
            .and_then(|out| out.create_dir_with(SCRATCH_IN_OUT, &builder).map(|()| out))
            .map(|out| Self {
                out,
                path: path.clone(),
            })
            .map_err(|source| GuestSetupError::Scratch { path, source }.into())
    }

    /// Its host path, for the guest's preopen.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes it: scratch is not an output. A guest may have replaced the directory
    /// with a file or a symlink; neither is followed.
    pub fn remove(self) {
        let _ = self
            .out
            .remove_dir_all(SCRATCH_IN_OUT)
            .or_else(|_| self.out.remove_file(SCRATCH_IN_OUT));
    }
}

pub(crate) fn build_wasi(
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    scratch: Option<&Path>,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> Result<(WasiP1Ctx, Option<VirtualTime>), BackendError> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .args(&guest_argv(guest))
        .envs(GUEST_ENV)
        .envs(&guest.runtime.env)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let clock = crate::wasi_determinism::apply(&mut builder, &spec.determinism);
    let mut dirs: Vec<(PathBuf, &str, FsPerms)> = preopens(spec).into();
    for mount in &guest.runtime.mounts {
        dirs.push((mount.host.clone(), &mount.guest, FsPerms::ReadOnly));
    }
    if let (Some(host), Some(name)) = (scratch, &guest.runtime.scratch) {
        dirs.push((host.to_owned(), name, FsPerms::ReadWrite));
    }
    if let Some(name) = &guest.runtime.exchange {
        dirs.push((
            spec.out_dir.join(runner_sandbox::runtime::NET_IN_OUT),
            name,
            FsPerms::ReadWrite,
        ));
    }
    for (host, name, perms) in dirs {
        builder
            .preopened_dir(&host, name, perms)
            .map_err(|source| GuestSetupError::Preopen {
                host: host.clone(),
                name: name.to_owned(),
                source,
            })?;
    }
    Ok((builder.build_p1(), clock))
}

/// Binds the module's imports from `host` to functions answering [`NO_HOST`], each
/// with the signature the module declares; an import that is not a function returning
/// one `i32` is an error naming it.
pub(crate) fn link_no_host(
    linker: &mut Linker<GuestState>,
    module: &Module,
) -> Result<(), BackendError> {
    for import in module.imports().filter(|i| i.module() == "host") {
        let name = import.name();
        let ty = match import.ty() {
            wasmtime::ExternType::Func(ty) => ty,
            other => {
                return Err(ModuleError::HostImport {
                    name: name.to_owned(),
                    shape: format!("is a {other:?}, not a function"),
                }
                .into());
            }
        };
        let results: Vec<wasmtime::ValType> = ty.results().collect();
        if !matches!(results.as_slice(), [wasmtime::ValType::I32]) {
            return Err(ModuleError::HostImport {
                name: name.to_owned(),
                shape: format!("returns {results:?}, not one i32"),
            }
            .into());
        }
        linker
            .func_new("host", name, ty, |_caller, _params, results| {
                results[0] = wasmtime::Val::I32(NO_HOST);
                Ok(())
            })
            .map_err(|source| GuestSetupError::BindHost {
                name: name.to_owned(),
                source,
            })?;
    }
    Ok(())
}

/// Runs the guest's entry point to its end: the exit code it returned, or the error
/// (an exit through `proc_exit`, a trap, a stop by a limit).
pub(crate) async fn call_entry(
    linker: &Linker<GuestState>,
    store: &mut Store<GuestState>,
    module: &Module,
    entry: EntryPoint,
) -> wasmtime::Result<i32> {
    let instance = linker.instantiate_async(&mut *store, module).await?;
    runner_sandbox::phases::mark("worker.instantiated");
    match entry {
        EntryPoint::Command => {
            let start = instance.get_typed_func::<(), ()>(&mut *store, "_start")?;
            start.call_async(&mut *store, ()).await?;
            Ok(0)
        }
        EntryPoint::Reactor => {
            if let Some(init) = instance.get_func(&mut *store, "_initialize") {
                init.typed::<(), ()>(&*store)?
                    .call_async(&mut *store, ())
                    .await?;
            }
            let run = instance
                .get_func(&mut *store, "run")
                .ok_or_else(|| wasmtime::format_err!("the reactor exports no `run` function"))?;
            if let Ok(run) = run.typed::<(), i32>(&*store) {
                run.call_async(&mut *store, ()).await
            } else {
                run.typed::<(), ()>(&*store)?
                    .call_async(&mut *store, ())
                    .await?;
                Ok(0)
            }
        }
    }
}

pub(crate) fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
