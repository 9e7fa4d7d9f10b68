//! Building the C programs under `tests/c/` (see [`prog`]), and scratch
//! directories for the tests.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::capi_lib_dir;

/// The C programs under `tests/c/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prog {
    /// `mpi_allreduce.c` (MPICH): `allreduce ok size=N sum=S`.
    MpiAllreduce,
    /// `mpi_abort.c` (MPICH): rank N-1 calls `MPI_Abort(.., 7)`.
    MpiAbort,
    /// `mpmd_appnum.c` (MPICH): `rank R size S appnum A` per rank.
    MpmdAppnum,
    /// `pmi2_slurm.c` (Slurm libpmi2): `pmi2 ok size=N`.
    Pmi2Slurm,
    /// `pmi2_fence_sleep.c` (Slurm libpmi2): one rank sleeps before the fence.
    Pmi2FenceSleep,
    /// `segment_stamp.c` (Slurm libpmi2): maps the advertised job segment
    /// and prints the stamp at offset 0.
    SegmentStamp,
    /// `pmi1_kvs.c` (fastpmi's `include/pmi.h`, linked to fastpmi's
    /// `libpmi.so`): `pmi1 ok size=N`.
    Pmi1Kvs,
    /// `pmi2_capi.c` (fastpmi's `include/pmi2.h`, linked to fastpmi's
    /// `libpmi2.so`): error codes and edge cases of the PMI-2 C ABI;
    /// `pmi2 capi ok size=N`.
    Pmi2Capi,
    /// `pmi2_slurm.c` compiled against fastpmi's `include/pmi2.h` and linked
    /// to fastpmi's `libpmi2.so` (source compatibility of the header).
    Pmi2SlurmOwnHeader,
    /// `pmi2_slurm_calls.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`):
    /// the rest of the PMI-2 C API under Slurm's slurmstepd;
    /// `pmi2 slurm calls ok size=N`.
    Pmi2SlurmCalls,
    /// `pmi2_spawn.c` (Slurm libpmi2): `PMI2_Job_Spawn`; `pmi2 spawn ok
    /// children=K` and the children's `pmi2 spawn child ok ...`.
    Pmi2Spawn,
    /// `pmi1_spawn.c` (fastpmi's `include/pmi.h`, `-lpmi`):
    /// `PMI_Spawn_multiple`; `pmi1 spawn ok children=N` and the children's
    /// lines.
    Pmi1Spawn,
    /// `fpmi_groups.c` (fastpmi's `include/fastpmi.h` and `libpmi2.so`):
    /// groups and process sets through the FPMI extension.
    FpmiGroups,
    /// `pset_slurm.c` (Slurm libpmi2): process-set job attributes.
    PsetSlurm,
    /// `pmi2_trivial.c` (Slurm libpmi2): init, put, fence, one get,
    /// finalize; `pmi2 trivial ok size=N`.
    Pmi2Trivial,
    /// `pmi2_late.c` (Slurm libpmi2): one rank late to init while the others
    /// fence; `late ok rank R size N`.
    Pmi2LateSlurm,
    /// `pmi2_late.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`).
    Pmi2LateFastpmi,
    /// `mpi_init_mark.c` (MPICH): a file per rank once `MPI_Init` returned.
    MpiInitMark,
    /// `pmi2_fence_loop.c` (Slurm libpmi2): a loop of fences, one rank
    /// possibly late to init; `fence loop ok rank R fences N`.
    Pmi2FenceLoopSlurm,
    /// `pmi2_fence_loop.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`).
    Pmi2FenceLoopFastpmi,
    /// `fpmi_kvscopy.c` (fastpmi's `include/fastpmi.h` and `libpmi2.so`):
    /// `FPMI_KVS_Getall` and `FPMI_KVS_Putall`; `fpmi kvscopy ok rank R
    /// size N` from every rank.
    FpmiKvscopy,
    /// `fpmi_oob.c` (fastpmi's `include/fastpmi.h` and `libpmi2.so`): the
    /// out-of-band channel.
    FpmiOob,
    /// `mpi_node_split.c` (MPICH): the nodes the library sees, and an
    /// allreduce across and within them; `nodes ok size=N local=L`.
    MpiNodeSplit,
    /// `pmi2_names.c` (Slurm libpmi2): rank 0 publishes, the last rank
    /// looks up and unpublishes; `names ok service=S`.
    Pmi2Names,
    /// `pmi2_ft.c` (Slurm libpmi2): ranks 1 and 2 die after a fence, the
    /// others' next fence fails and they read `PMI_dead_processes`.
    Pmi2FtSlurm,
    /// `pmi2_ft.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`).
    Pmi2FtFastpmi,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Toolchain {
    Mpich,
    SlurmPmi2,
    /// gcc with fastpmi's `include/` and `-lpmi` from [`capi_lib_dir`].
    FastpmiPmi1,
    /// gcc with fastpmi's `include/` and `-lpmi2` from [`capi_lib_dir`].
    FastpmiPmi2,
}

impl Prog {
    pub fn name(self) -> &'static str {
        match self {
            Prog::MpiAllreduce => "mpi_allreduce",
            Prog::MpiAbort => "mpi_abort",
            Prog::MpmdAppnum => "mpmd_appnum",
            Prog::Pmi2Slurm => "pmi2_slurm",
            Prog::Pmi2FenceSleep => "pmi2_fence_sleep",
            Prog::SegmentStamp => "segment_stamp",
            Prog::Pmi1Kvs => "pmi1_kvs",
            Prog::Pmi2Capi => "pmi2_capi",
            Prog::Pmi2SlurmOwnHeader => "pmi2_slurm_fastpmi_header",
            Prog::Pmi2SlurmCalls => "pmi2_slurm_calls",
            Prog::Pmi2Spawn => "pmi2_spawn",
            Prog::Pmi1Spawn => "pmi1_spawn",
            Prog::FpmiGroups => "fpmi_groups",
            Prog::PsetSlurm => "pset_slurm",
            Prog::Pmi2Trivial => "pmi2_trivial",
            Prog::Pmi2LateSlurm => "pmi2_late_slurm",
            Prog::Pmi2LateFastpmi => "pmi2_late_fastpmi",
            Prog::MpiInitMark => "mpi_init_mark",
            Prog::Pmi2FenceLoopSlurm => "pmi2_fence_loop_slurm",
            Prog::Pmi2FenceLoopFastpmi => "pmi2_fence_loop_fastpmi",
            Prog::FpmiKvscopy => "fpmi_kvscopy",
            Prog::FpmiOob => "fpmi_oob",
            Prog::MpiNodeSplit => "mpi_node_split",
            Prog::Pmi2Names => "pmi2_names",
            Prog::Pmi2FtSlurm => "pmi2_ft_slurm",
            Prog::Pmi2FtFastpmi => "pmi2_ft_fastpmi",
        }
    }

    /// Base name of the source file in `tests/c/` (usually [`Prog::name`]).
    pub fn source(self) -> &'static str {
        match self {
            Prog::Pmi2SlurmOwnHeader => "pmi2_slurm",
            Prog::Pmi2LateSlurm | Prog::Pmi2LateFastpmi => "pmi2_late",
            Prog::Pmi2FenceLoopSlurm | Prog::Pmi2FenceLoopFastpmi => "pmi2_fence_loop",
            Prog::Pmi2FtSlurm | Prog::Pmi2FtFastpmi => "pmi2_ft",
            p => p.name(),
        }
    }

    fn toolchain(self) -> Toolchain {
        match self {
            Prog::MpiAllreduce
            | Prog::MpiAbort
            | Prog::MpmdAppnum
            | Prog::MpiInitMark
            | Prog::MpiNodeSplit => Toolchain::Mpich,
            Prog::Pmi2Slurm
            | Prog::Pmi2FenceSleep
            | Prog::SegmentStamp
            | Prog::Pmi2Spawn
            | Prog::PsetSlurm
            | Prog::Pmi2Trivial
            | Prog::Pmi2LateSlurm
            | Prog::Pmi2FenceLoopSlurm
            | Prog::Pmi2FtSlurm
            | Prog::Pmi2Names => Toolchain::SlurmPmi2,
            Prog::Pmi1Kvs | Prog::Pmi1Spawn => Toolchain::FastpmiPmi1,
            Prog::Pmi2Capi
            | Prog::Pmi2SlurmOwnHeader
            | Prog::Pmi2SlurmCalls
            | Prog::FpmiGroups
            | Prog::Pmi2LateFastpmi
            | Prog::Pmi2FenceLoopFastpmi
            | Prog::FpmiKvscopy
            | Prog::Pmi2FtFastpmi
            | Prog::FpmiOob => Toolchain::FastpmiPmi2,
        }
    }

    fn cell(self) -> &'static OnceLock<PathBuf> {
        static CELLS: [OnceLock<PathBuf>; 26] = [const { OnceLock::new() }; 26];
        &CELLS[self as usize]
    }
}

const SLURM_PMI2_HEADER: &str = "/usr/include/slurm/pmi2.h";

/// Path of the compiled program, compiling it on first use in this test
/// binary. Panics (never skips) when the toolchain is missing.
pub fn prog(p: Prog) -> &'static Path {
    p.cell().get_or_init(|| compile(p))
}

pub(super) fn build_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-c");
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create build dir {}: {e}", dir.display()));
    dir
}

fn compile(p: Prog) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{}.c", p.source()));
    assert!(src.is_file(), "test source {} is missing", src.display());
    let dir = build_dir();
    let out = dir.join(p.name());
    // Compile to a private name, then rename: another test binary may be
    // running the previous build of the same program.
    let tmp = dir.join(format!(".{}.{}.tmp", p.name(), std::process::id()));

    let (compiler, packages, mut cmd) = match p.toolchain() {
        Toolchain::Mpich => {
            let mut c = Command::new("mpicc.mpich");
            c.arg("-O2").arg("-Wall").arg("-o").arg(&tmp).arg(&src);
            ("mpicc.mpich", "mpich libmpich-dev", c)
        }
        Toolchain::SlurmPmi2 => {
            if !Path::new(SLURM_PMI2_HEADER).is_file() {
                panic!(
                    "{SLURM_PMI2_HEADER} not found: Slurm's PMI-2 client library is needed to \
                     build tests/c/{}.c; install the Debian package `libpmi2-0-dev` \
                     (apt-get install libpmi2-0-dev)",
                    p.name()
                );
            }
            let mut c = Command::new("gcc");
            c.arg("-O2")
                .arg("-Wall")
                .arg("-I/usr/include/slurm")
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .arg("-lpmi2");
            ("gcc", "gcc libpmi2-0-dev", c)
        }
        Toolchain::FastpmiPmi1 | Toolchain::FastpmiPmi2 => {
            let lib = if p.toolchain() == Toolchain::FastpmiPmi1 {
                "-lpmi"
            } else {
                "-lpmi2"
            };
            let mut c = Command::new("gcc");
            c.arg("-O2")
                .arg("-Wall")
                .arg("-Wextra")
                .arg("-Werror")
                .arg("-I")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .arg("-L")
                .arg(capi_lib_dir())
                .arg(lib);
            ("gcc", "gcc", c)
        }
    };
    let output = match cmd.stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
            "`{compiler}` not found in PATH, needed to build tests/c/{}.c: install the Debian \
             package(s) `{packages}` (apt-get install {packages})",
            p.name()
        ),
        Err(e) => panic!("cannot run `{compiler}`: {e}"),
    };
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        panic!(
            "compiling tests/c/{}.c with `{compiler}` failed ({}); are the Debian packages \
             `{packages}` installed?\ncommand: {:?}\n{}{}",
            p.name(),
            output.status,
            cmd,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("cannot move {} to {}: {e}", tmp.display(), out.display()));
    out
}

/// A scratch directory under `$CARGO_TARGET_TMPDIR`, removed on drop.
pub fn scratch_dir(tag: &str) -> tempfile::TempDir {
    let base = build_dir().join("scratch");
    fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new()
        .prefix(&format!("{tag}-"))
        .tempdir_in(&base)
        .unwrap_or_else(|e| panic!("cannot create scratch dir in {}: {e}", base.display()))
}

/// Copy `src` into `dir` under a name unique to this test
/// (`<name>-<tag>`), executable, so that leftover processes of exactly this
/// job can be found by their executable path.
pub fn unique_copy(src: &Path, dir: &Path, tag: &str) -> PathBuf {
    let name = format!(
        "{}-{tag}",
        src.file_name()
            .unwrap()
            .to_str()
            .expect("utf-8 program name")
    );
    let dst = dir.join(name);
    fs::copy(src, &dst)
        .unwrap_or_else(|e| panic!("copy {} -> {}: {e}", src.display(), dst.display()));
    dst
}
