//! What a program's ELF headers say, read from the mapped file, nothing
//! run: the libraries it names (`DT_NEEDED`) and its loader (`PT_INTERP`).

use std::path::{Path, PathBuf};

use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::Endianness;

/// The libraries `program` names in its `DT_NEEDED` entries (empty for a
/// file that is not a 64-bit ELF object).
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

/// The dynamic loader `file` asks for (`PT_INTERP`), if it is a 64-bit ELF
/// program that names one (shared libraries do not).
pub fn interpreter(file: &Path) -> Option<PathBuf> {
    let map = crate::launcher::os::map_readonly(file)?;
    let elf = ElfFile64::<Endianness>::parse(&*map).ok()?;
    let (hdr, data, endian) = (elf.elf_header(), elf.data(), elf.endian());
    for ph in hdr.program_headers(endian, data).ok()? {
        if let Ok(Some(name)) = ph.interpreter(endian, data) {
            let name = std::str::from_utf8(name).ok()?;
            return Some(PathBuf::from(name));
        }
    }
    None
}

/// The NUL-terminated string at `at` in a string table.
fn c_string_at(table: &[u8], at: u64) -> Option<&[u8]> {
    let rest = table.get(usize::try_from(at).ok()?..)?;
    std::ffi::CStr::from_bytes_until_nul(rest)
        .ok()
        .map(std::ffi::CStr::to_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_read_to_their_nul_and_never_past_the_table() {
        let t = b"\0libc.so.6\0libm";
        assert_eq!(c_string_at(t, 1), Some(&b"libc.so.6"[..]));
        assert_eq!(c_string_at(t, 0), Some(&b""[..]));
        assert_eq!(c_string_at(t, 11), None, "no NUL before the end");
        assert_eq!(c_string_at(t, 99), None);
    }

    #[test]
    fn a_programs_needed_libraries_and_loader_are_read() {
        let me = std::env::current_exe().unwrap();
        assert!(needed(&me).iter().any(|n| n.starts_with("libc.so")));
        assert!(needed(Path::new("/nonexistent")).is_empty());
        assert!(needed(Path::new("/etc/passwd")).is_empty());
        let ld = interpreter(&me).expect("a dynamic program names its loader");
        assert!(ld.is_absolute() && ld.exists(), "{}", ld.display());
        assert_eq!(interpreter(Path::new("/etc/passwd")), None);
    }
}
