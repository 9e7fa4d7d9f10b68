//! Which personality a program gets under `--pmi auto` (docs/pmix.md): PMIx
//! when the libraries it links include `libpmix` or Open MPI's `libmpi.so.40`
//! (both Open MPI 4.1, which loads PMIx through a plugin, and Open MPI 5);
//! PMI otherwise (MPICH and Intel MPI link `libmpi.so.12`). Read from the
//! ELF dynamic section (`DT_NEEDED`), mapped, not executed: microseconds, where
//! `ld.so --list` takes about 12 ms. Interpreters and scripts are PMI: the
//! user names the personality for them.

use std::path::Path;

use object::read::elf::{Dyn, ElfFile64, FileHeader, SectionHeader};
use object::Endianness;

/// The libraries `program` names in its `DT_NEEDED` entries (empty for a
/// file that is not a 64-bit ELF program).
pub fn needed(program: &Path) -> Vec<String> {
    // Mapped: only the pages of the headers and the dynamic section are
    // read, however large the program.
    let Some(map) = crate::launcher::os::map_readonly(program) else {
        return Vec::new();
    };
    let Ok(elf) = ElfFile64::<Endianness>::parse(&*map) else {
        return Vec::new();
    };
    let (hdr, data, endian) = (elf.elf_header(), elf.data(), elf.endian());
    let Ok(sections) = hdr.sections(endian, data) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in sections.iter() {
        let Ok(Some((dyns, link))) = s.dynamic(endian, data) else {
            continue;
        };
        let Ok(strings) = sections.strings(endian, data, link) else {
            continue;
        };
        for d in dyns {
            if d.tag32(endian) == Some(object::elf::DT_NEEDED) {
                if let Ok(name) = d.string(endian, strings) {
                    out.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
    }
    out
}

/// Whether a program linking `needed` speaks PMIx.
pub fn speaks_pmix(needed: &[String]) -> bool {
    needed
        .iter()
        .any(|n| n.starts_with("libpmix.so") || n == "libmpi.so.40")
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
    fn a_programs_needed_libraries_are_read() {
        let me = std::env::current_exe().unwrap();
        assert!(needed(&me).iter().any(|n| n.starts_with("libc.so")));
        assert!(needed(Path::new("/nonexistent")).is_empty());
        assert!(needed(Path::new("/etc/passwd")).is_empty());
    }
}
