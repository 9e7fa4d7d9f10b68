//! Shared core of fastpmi's C client libraries.
//!
//! `capi/pmi2` (`libpmi2.so.0`, the C ABI of Slurm's `pmi2.h`) and
//! `capi/pmi1` (`libpmi.so.0`, the C ABI of MPICH's / Slurm's `pmi.h`) are
//! thin `extern "C"` layers over this crate, which holds what both need:
//!
//! * [`session`]: the process-wide PMI session (one [`fastpmi_client::Pmi`]
//!   between init and finalize), its cached local ranks and the ring
//!   exchange;
//! * [`cbuf`]: reading and writing C strings and buffers (every raw pointer
//!   from C goes through here or through the `extern "C"` functions);
//! * [`codes`]: the PMI error codes and the single mapping from client
//!   errors to them;
//! * [`mapping`]: the `PMI_process_mapping` parser (local ranks when the
//!   server has no `localRanks` node attribute, as under Hydra);
//! * [`guard`]: runs each entry point so that no panic crosses the C ABI;
//! * [`logging`]: `FASTPMI_LOG` for the libraries (stderr).
//!
//! All functions speak PMI-2 codes; the PMI-1 layer converts with
//! [`codes::to_pmi1`].

pub mod cbuf;
pub mod codes;
pub mod mapping;
pub mod session;
pub mod spawn;

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use codes::Rc;

/// Run the body of a C entry point: its `Ok` value, its error code, or
/// `on_panic` if it panicked (the panic is reported on stderr by the panic
/// hook and named here; it never unwinds into C).
pub fn guard<T>(what: &str, on_panic: T, f: impl FnOnce() -> Result<T, T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) | Ok(Err(v)) => v,
        Err(_) => {
            tracing::error!("{what}: internal error (panic); returning an error code");
            on_panic
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_the_fallback() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let rc = guard("test", -1, || -> Result<i32, i32> { panic!("boom") });
        std::panic::set_hook(prev);
        assert_eq!(rc, -1);
        assert_eq!(guard("test", -1, || Ok(0)), 0);
        assert_eq!(guard("test", -1, || Err(5)), 5);
    }
}
