//! The binary interface of fastpmi's C libraries: exported symbols and
//! SONAMEs against Slurm's `libpmi2.so.0`, the headers against Slurm's
//! prototypes (a conflicting redeclaration does not compile), and
//! `make install` (file layout, symlinks, pkg-config, a program built from
//! the installed files).

mod common;

use common::{capi_lib_dir, launch, scratch_dir};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Every function of the PMI-1 API that `libpmi.so.0` implements.
const PMI1_FUNCTIONS: &[&str] = &[
    "PMI_Abort",
    "PMI_Args_to_keyval",
    "PMI_Barrier",
    "PMI_Finalize",
    "PMI_Free_keyvals",
    "PMI_Get_appnum",
    "PMI_Get_clique_ranks",
    "PMI_Get_clique_size",
    "PMI_Get_id",
    "PMI_Get_id_length_max",
    "PMI_Get_kvs_domain_id",
    "PMI_Get_options",
    "PMI_Get_rank",
    "PMI_Get_size",
    "PMI_Get_universe_size",
    "PMI_Init",
    "PMI_Initialized",
    "PMI_KVS_Commit",
    "PMI_KVS_Create",
    "PMI_KVS_Destroy",
    "PMI_KVS_Get",
    "PMI_KVS_Get_key_length_max",
    "PMI_KVS_Get_my_name",
    "PMI_KVS_Get_name_length_max",
    "PMI_KVS_Get_value_length_max",
    "PMI_KVS_Iter_first",
    "PMI_KVS_Iter_next",
    "PMI_KVS_Put",
    "PMI_Lookup_name",
    "PMI_Parse_option",
    "PMI_Publish_name",
    "PMI_Spawn_multiple",
    "PMI_Unpublish_name",
];

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({})\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Defined dynamic symbols of a shared object (`nm -D --defined-only`).
fn exports(so: &Path) -> BTreeSet<String> {
    run(Command::new("nm").arg("-D").arg("--defined-only").arg(so))
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

fn soname(so: &Path) -> String {
    let d = run(Command::new("readelf").arg("-d").arg(so));
    d.lines()
        .find(|l| l.contains("(SONAME)"))
        .and_then(|l| Some(l[l.find('[')? + 1..l.find(']')?].to_string()))
        .unwrap_or_else(|| panic!("{} has no SONAME:\n{d}", so.display()))
}

/// Slurm's `libpmi2.so.0`, found the way the linker finds it.
fn slurm_libpmi2() -> PathBuf {
    let p = run(Command::new("gcc").arg("-print-file-name=libpmi2.so.0"));
    let p = PathBuf::from(p.trim());
    assert!(
        p.is_absolute() && p.is_file(),
        "Slurm's libpmi2.so.0 not found (gcc -print-file-name gave {}): install the Debian \
         package `libpmi2-0-dev`",
        p.display()
    );
    p
}

/// fastpmi's extension (`include/fastpmi.h`), exported by `libpmi2.so.0`
/// besides Slurm's functions.
const FPMI_FUNCTIONS: &[&str] = &[
    "FPMI_Dead_ranks",
    "FPMI_Group_construct",
    "FPMI_Group_destruct",
    "FPMI_Group_fence",
    "FPMI_Group_invite",
    "FPMI_Group_join",
    "FPMI_Group_leave",
    "FPMI_KVS_Getall",
    "FPMI_KVS_Putall",
    "FPMI_Oob_close",
    "FPMI_Oob_open",
    "FPMI_Oob_poll",
    "FPMI_Pset_members",
    "FPMI_Pset_mine",
    "FPMI_Pset_names",
    "FPMI_Wait_death",
];

#[test]
fn libpmi2_exports_every_function_of_slurms_and_the_fpmi_extension_and_nothing_else() {
    let slurm: BTreeSet<String> = exports(&slurm_libpmi2())
        .into_iter()
        .filter(|s| s.starts_with("PMI"))
        .collect();
    assert_eq!(slurm.len(), 22, "Slurm's libpmi2 exports: {slurm:?}");
    let ours = exports(&capi_lib_dir().join("libpmi2.so.0"));
    let missing: Vec<_> = slurm.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "missing from fastpmi's libpmi2: {missing:?}"
    );
    let fpmi: BTreeSet<String> = FPMI_FUNCTIONS.iter().map(|s| s.to_string()).collect();
    let missing: Vec<_> = fpmi.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "FPMI extension missing from fastpmi's libpmi2: {missing:?}"
    );
    let extra: Vec<_> = ours
        .iter()
        .filter(|s| !slurm.contains(*s) && !fpmi.contains(*s))
        .collect();
    assert!(
        extra.is_empty(),
        "fastpmi's libpmi2 exports more than Slurm's and FPMI_*: {extra:?}"
    );
}

#[test]
fn libpmi_exports_the_pmi1_api_and_nothing_else() {
    let ours = exports(&capi_lib_dir().join("libpmi.so.0"));
    let want: BTreeSet<String> = PMI1_FUNCTIONS.iter().map(|s| s.to_string()).collect();
    assert_eq!(ours, want);
}

#[test]
fn sonames_are_slurms() {
    assert_eq!(soname(&capi_lib_dir().join("libpmi2.so.0")), "libpmi2.so.0");
    assert_eq!(soname(&capi_lib_dir().join("libpmi.so.0")), "libpmi.so.0");
    assert_eq!(soname(&slurm_libpmi2()), "libpmi2.so.0");
}

/// Both libraries export exactly the symbols recorded in `capi/symbols/`
/// (one name a line, sorted): moving code between the crates behind them
/// must neither add nor drop one.
#[test]
fn exports_are_exactly_the_recorded_lists() {
    for lib in ["libpmi2.so.0", "libpmi.so.0"] {
        let list = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("capi/symbols")
            .join(format!("{lib}.txt"));
        let want: BTreeSet<String> = fs::read_to_string(&list)
            .unwrap_or_else(|e| panic!("{}: {e}", list.display()))
            .lines()
            .map(str::to_string)
            .collect();
        assert!(want.len() > 30, "{}: {want:?}", list.display());
        let ours = exports(&capi_lib_dir().join(lib));
        let added: Vec<_> = ours.difference(&want).collect();
        let dropped: Vec<_> = want.difference(&ours).collect();
        assert!(
            added.is_empty() && dropped.is_empty(),
            "{lib}: exports {added:?} beyond {}, lacks {dropped:?}",
            list.display()
        );
    }
}

/// The libraries as `make install` builds them by default (profile
/// `capi`: LTO, one codegen unit, stripped) stay under 1 MiB each: they
/// are loaded by every rank.
#[test]
fn installed_libraries_stay_under_1_mib() {
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let scratch = scratch_dir("capi-size");
    let prefix = scratch.path().join("prefix");
    run(Command::new("make")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("CARGO={}", env!("CARGO")))
        .arg(format!("CARGO_TARGET_DIR={}", target_dir.display())));
    for name in ["pmi2", "pmi"] {
        let real = prefix.join(format!("lib/lib{name}.so.0.0.0"));
        let size = fs::metadata(&real)
            .unwrap_or_else(|e| panic!("{}: {e}", real.display()))
            .len();
        assert!(size < 1 << 20, "lib{name}.so.0.0.0 is {size} bytes");
    }
}

/// The libraries need only libc (and the dynamic loader, for TLS): no
/// libgcc_s.so.1, whose loading and CPUID-probing constructor cost every
/// rank about 0.1 ms at start (the unwinder is linked in statically,
/// capi/static_unwinder.rs); and none of their unwinder symbols is exported.
#[test]
fn libraries_need_only_libc() {
    for lib in ["libpmi2.so.0", "libpmi.so.0"] {
        let so = capi_lib_dir().join(lib);
        let d = run(Command::new("readelf").arg("-d").arg(&so));
        let needed: BTreeSet<&str> = d
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| Some(&l[l.find('[')? + 1..l.find(']')?]))
            .collect();
        let allowed: BTreeSet<&str> = ["libc.so.6", "ld-linux-x86-64.so.2"].into();
        assert!(
            needed.is_subset(&allowed) && needed.contains("libc.so.6"),
            "{lib} needs {needed:?}, want only {allowed:?}"
        );
        let syms = run(Command::new("nm").arg("-D").arg("--defined-only").arg(&so));
        assert!(
            !syms.contains("_Unwind_"),
            "{lib} exports unwinder symbols:\n{syms}"
        );
    }
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// C with every comment removed (enough for a header).
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find("*/") {
            Some(j) => rest = &rest[i + 2 + j + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The function prototypes of Slurm's `slurm/pmi2.h`, redeclared after
/// fastpmi's `pmi2.h`: gcc rejects any that conflicts with ours (return
/// type, parameter types, arity).
#[test]
fn pmi2_header_prototypes_match_slurms() {
    let slurm_h = Path::new("/usr/include/slurm/pmi2.h");
    let text = fs::read_to_string(slurm_h).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; install the Debian package `libpmi2-0-dev`",
            slurm_h.display()
        )
    });
    let code = strip_comments(&text);
    let mut protos = Vec::new();
    for stmt in code.split(';') {
        let start = ["int PMI2_", "int PMIX_"]
            .iter()
            .filter_map(|p| stmt.find(p))
            .min();
        if let Some(i) = start {
            let p = &stmt[i..];
            if p.contains('(') && !p.contains('#') && !p.contains('{') {
                protos.push(p.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    assert_eq!(
        protos.len(),
        22,
        "prototypes found in {}: {protos:#?}",
        slurm_h.display()
    );
    let dir = scratch_dir("capi-header");
    let src = dir.path().join("redeclare.c");
    let mut c = String::from("#include <pmi2.h>\n/* Slurm's prototypes: */\n");
    for p in &protos {
        c.push_str(p);
        c.push_str(";\n");
    }
    fs::write(&src, c).unwrap();
    run(Command::new("gcc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(include_dir())
        .arg(&src));
}

/// Both headers in one C and one C++ translation unit, strict warnings.
#[test]
fn headers_compile_together_in_c_and_cpp() {
    let dir = scratch_dir("capi-headers");
    let src = dir.path().join("both.c");
    fs::write(
        &src,
        "#include <pmi.h>\n#include <pmi2.h>\n#include <pmi.h>\n#include <pmi2.h>\n\
         int main(void) { PMI_keyval_t kv = {0, 0}; PMI2_Connect_comm_t c; (void)kv; (void)c;\n\
         return PMI_SUCCESS + PMI2_SUCCESS + (PMI2_ERR_OTHER == 14 ? 0 : 1); }\n",
    )
    .unwrap();
    for (compiler, std) in [("gcc", "-std=c99"), ("g++", "-std=c++11")] {
        let mut cmd = Command::new(compiler);
        cmd.args([
            std,
            "-Wall",
            "-Wextra",
            "-pedantic",
            "-Werror",
            "-fsyntax-only",
        ]);
        if compiler == "g++" {
            cmd.args(["-x", "c++"]);
        }
        run(cmd.arg("-I").arg(include_dir()).arg(&src));
    }
}

/// A C++ program that throws and catches its own exceptions around PMI
/// calls, on fastpmi's libpmi2 under the launcher (4 ranks, shared memory):
/// the library's private copy of GCC's unwinder (static_unwinder.rs) does not
/// disturb the host's, which comes from libgcc_s.so.1.
#[test]
fn cpp_host_exceptions_work_beside_the_library() {
    let dir = scratch_dir("capi-cpp-exceptions");
    let src = dir.path().join("exc.cpp");
    fs::write(
        &src,
        r#"#include <pmi2.h>
#include <cstdio>
#include <stdexcept>
static void thrower(int x) { if (x) throw std::runtime_error("boom"); }
int main() {
    int spawned, size, rank, appnum;
    int rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    try { thrower(1); } catch (const std::exception &e) {
        std::printf("rank %d init rc %d caught %s\n", rank, rc, e.what());
    }
    rc = PMI2_KVS_Fence();
    try { thrower(2); } catch (...) { std::printf("rank %d fence rc %d caught\n", rank, rc); }
    return PMI2_Finalize();
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("exc");
    run(Command::new("g++")
        .args(["-O2", "-Wall", "-I"])
        .arg(include_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(capi_lib_dir())
        .arg("-lpmi2"));
    let out = launch(["-n", "4", exe.to_str().unwrap()])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let mut lines = out.stdout_lines();
    lines.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|r| {
            [
                format!("rank {r} init rc 0 caught boom"),
                format!("rank {r} fence rc 0 caught"),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(lines, want, "{}", out.report());
}

/// `make install PREFIX=...` (same cargo profile as this test binary):
/// versioned files, SONAME symlinks, headers, pkg-config; programs built
/// with the pkg-config flags run from the installed libraries; `make
/// uninstall` removes everything.
#[test]
fn make_install_layout_and_pkg_config() {
    let lib_dir = capi_lib_dir(); // builds the libraries once
    let profile_dir = fs::read_link(lib_dir.join("libpmi2.so"))
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let profile = match profile_dir.file_name().unwrap().to_str().unwrap() {
        "debug" => "dev".to_string(),
        other => other.to_string(),
    };
    if profile_dir.parent() != Some(target_dir) {
        panic!(
            "cross-target build ({}): the Makefile installs host builds only",
            profile_dir.display()
        );
    }
    let scratch = scratch_dir("capi-install");
    let prefix = scratch.path().join("prefix");
    let repo = env!("CARGO_MANIFEST_DIR");
    let make = |target: &str| {
        run(Command::new("make")
            .arg("-C")
            .arg(repo)
            .arg(target)
            .arg(format!("PREFIX={}", prefix.display()))
            .arg(format!("PROFILE={profile}"))
            .arg(format!("CARGO={}", env!("CARGO")))
            .arg(format!("CARGO_TARGET_DIR={}", target_dir.display())))
    };
    make("install");

    let lib = prefix.join("lib");
    for name in ["pmi2", "pmi"] {
        let real = lib.join(format!("lib{name}.so.0.0.0"));
        assert!(real.is_file(), "{} missing", real.display());
        // Installed stripped, debug info beside it (found through the link).
        let size = fs::metadata(&real).unwrap().len();
        assert!(size < 2 << 20, "{} is {size} bytes", real.display());
        let debug = lib.join(format!(".debug/lib{name}.so.0.0.0.debug"));
        assert!(debug.is_file(), "{} missing", debug.display());
        let sections = run(Command::new("objdump").arg("-h").arg(&real));
        assert!(
            sections.contains(".gnu_debuglink"),
            "no debuglink in {}",
            real.display()
        );
        assert_eq!(soname(&real), format!("lib{name}.so.0"));
        assert_eq!(
            fs::read_link(lib.join(format!("lib{name}.so.0"))).unwrap(),
            Path::new(&format!("lib{name}.so.0.0.0"))
        );
        assert_eq!(
            fs::read_link(lib.join(format!("lib{name}.so"))).unwrap(),
            Path::new(&format!("lib{name}.so.0"))
        );
    }
    for h in ["pmi2.h", "pmi.h", "fastpmi.h"] {
        assert_eq!(
            fs::read(prefix.join("include").join(h)).unwrap(),
            fs::read(include_dir().join(h)).unwrap()
        );
    }
    let pc_path = lib.join("pkgconfig");
    let pkg = |args: &[&str]| -> Vec<String> {
        run(Command::new("pkg-config")
            .args(args)
            .arg("fastpmi")
            .env("PKG_CONFIG_PATH", &pc_path))
        .split_whitespace()
        .map(str::to_string)
        .collect()
    };
    let cflags = pkg(&["--cflags"]);
    let libs2 = pkg(&["--libs"]);
    let libs1 = pkg(&["--variable=pmi1_libs"]);
    assert_eq!(
        cflags,
        vec![format!("-I{}", prefix.join("include").display())]
    );
    assert!(libs2.contains(&"-lpmi2".to_string()), "{libs2:?}");
    assert!(libs1.contains(&"-lpmi".to_string()), "{libs1:?}");

    // Programs built from the installed files, run as singletons.
    let c_dir = Path::new(repo).join("tests/c");
    for (src, libs, want) in [
        ("pmi1_kvs", &libs1, "pmi1 ok size=1"),
        ("pmi2_capi", &libs2, "pmi2 capi ok size=1"),
        // fastpmi.h from the installed files; a singleton has no server,
        // so every FPMI call is FPMI_ERR_NOT_SUPPORTED.
        ("fpmi_groups", &libs2, "fpmi unsupported ok"),
    ] {
        let exe = scratch.path().join(src);
        run(Command::new("gcc")
            .args(["-O2", "-Wall"])
            .args(&cflags)
            .arg("-o")
            .arg(&exe)
            .arg(c_dir.join(format!("{src}.c")))
            .args(libs));
        let out = launch(["1", "singleton"])
            .program(&exe)
            .env("LD_LIBRARY_PATH", &lib)
            .env_remove("PMI_FD")
            .env_remove("PMI_PORT")
            .timeout(Duration::from_secs(30))
            .run();
        out.assert_success();
        assert_eq!(out.stdout_lines(), vec![want], "{}", out.report());
    }

    make("uninstall");
    let left: Vec<_> = walk(&prefix);
    assert!(left.is_empty(), "left after make uninstall: {left:?}");
}

/// Files (not directories) under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
