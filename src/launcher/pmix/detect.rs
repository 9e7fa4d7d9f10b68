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
        // The string table's bytes, searched with core's own memchr:
        // object's lookup goes through the memchr crate, whose first use
        // probes the CPU's features (a dozen CPUIDs, 40 µs of a launch on
        // a VM).
        let Some(strings) = sections
            .section(link)
            .ok()
            .and_then(|s| s.data(endian, data).ok())
        else {
            continue;
        };
        for d in dyns {
            if d.tag32(endian) == Some(object::elf::DT_NEEDED) {
                let at = d.d_val(endian);
                if let Some(name) = c_string_at(strings, at) {
                    out.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
    }
    out
}

/// The NUL-terminated string at `at` in a string table.
fn c_string_at(table: &[u8], at: u64) -> Option<&[u8]> {
    let rest = table.get(usize::try_from(at).ok()?..)?;
    std::ffi::CStr::from_bytes_until_nul(rest)
        .ok()
        .map(std::ffi::CStr::to_bytes)
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
    fn strings_are_read_to_their_nul_and_never_past_the_table() {
        let t = b"\0libc.so.6\0libm";
        assert_eq!(c_string_at(t, 1), Some(&b"libc.so.6"[..]));
        assert_eq!(c_string_at(t, 0), Some(&b""[..]));
        assert_eq!(c_string_at(t, 11), None, "no NUL before the end");
        assert_eq!(c_string_at(t, 99), None);
    }

    #[test]
    fn a_programs_needed_libraries_are_read() {
        let me = std::env::current_exe().unwrap();
        assert!(needed(&me).iter().any(|n| n.starts_with("libc.so")));
        assert!(needed(Path::new("/nonexistent")).is_empty());
        assert!(needed(Path::new("/etc/passwd")).is_empty());
    }
}
