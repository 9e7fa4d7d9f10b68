//! Hands the MPIR symbols of the `fastpmi` binary (defined, with all their
//! raw-pointer code, in the `fastpmi-mpir` crate, `mpir/`) to
//! `fastpmi::launcher::mpir`. Only the binary links that crate, so only the
//! launcher exports the symbols, not the C client libraries.

use fastpmi::launcher::mpir::{self, ProcEntry};

struct Exported;

impl mpir::Symbols for Exported {
    fn append_proctable(&self, entries: &[ProcEntry]) {
        fastpmi_mpir::append_proctable(entries.iter().map(|e| fastpmi_mpir::Proc {
            host: &e.host,
            executable: &e.executable,
            pid: e.pid as i32,
        }));
    }
    fn set_debug_state(&self, state: i32) {
        fastpmi_mpir::set_debug_state(state);
    }
    fn set_abort_string(&self, why: &str) {
        fastpmi_mpir::set_abort_string(why);
    }
    fn being_debugged(&self) -> bool {
        fastpmi_mpir::being_debugged()
    }
    fn breakpoint(&self) {
        fastpmi_mpir::breakpoint();
    }
}

/// Hand the symbols to the launcher.
pub fn install() {
    mpir::install(&Exported);
}
