//! The `fastpmi` binary's process entry point: the C `main` that the C
//! runtime calls (`fastpmi_entry::main!` in a `#![no_main]` binary), in
//! place of the one std generates.
//!
//! Why: before a Rust `main` runs, std asks glibc where the main thread's
//! stack is, to report a stack overflow by name. For the main thread glibc
//! answers by reading and parsing `/proc/self/maps` (`pthread_getattr_np`),
//! and std then maps a signal stack for its handler. On the VMs this
//! project runs on that was about 0.1 ms of every launch (docs/launch.md).
//! `std::env::args` still works: glibc hands argc and argv to the
//! initialisers std registers, whatever `main` is (musl does not: hence the
//! check below).
//!
//! What of std's start-up the launcher relies on is done here instead:
//! * descriptors 0, 1 and 2 are opened on `/dev/null` where they are
//!   closed, so that no socket or file of the launcher takes one of those
//!   numbers and receives what is meant for stdout;
//! * `SIGPIPE` is ignored: writing to a closed pipe or socket is an error
//!   (`EPIPE`), not the launcher's death;
//! * a panic out of the program is caught and the exit status is 101;
//! * stdout is flushed at the end.
//!
//! Given up: std's "has overflowed its stack" message. A stack overflow
//! still stops at the kernel's guard gap (and at each thread's guard page),
//! and the launcher then dies of `SIGSEGV` as a C program does; its ranks
//! die with it (`PR_SET_PDEATHSIG`). Panic messages of the main thread name
//! it `<unnamed>` instead of `main`.
//!
//! Only the binary depends on this crate, and only through the macro: the
//! `main` symbol exists in no library.

use std::ffi::c_int;
use std::io::Write;

#[cfg(all(target_os = "linux", not(target_env = "gnu")))]
compile_error!("fastpmi-entry needs glibc: std reads argv through glibc's initialisers");

/// Define the C `main` of a `#![no_main]` binary: it runs `$program`
/// (a `fn() -> u8` returning the exit status) through [`run`].
#[macro_export]
macro_rules! main {
    ($program:path) => {
        /// The process entry point the C runtime calls (see the
        /// `fastpmi-entry` crate).
        // SAFETY (of the unmangled symbol): the binary is `#![no_main]`, so
        // this is the program's only `main`, with the prototype the C
        // runtime calls it with.
        #[unsafe(no_mangle)]
        pub extern "C" fn main(
            _argc: ::std::ffi::c_int,
            _argv: *const *const ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $crate::run($program)
        }
    };
}

/// Prepare the process as std's start-up would for the launcher, run
/// `program`, and return its exit status (101 if it panicked).
pub fn run(program: fn() -> u8) -> c_int {
    open_stdio();
    ignore_sigpipe();
    let status = std::panic::catch_unwind(program).unwrap_or(101);
    let _ = std::io::stdout().flush();
    c_int::from(status)
}

/// Open `/dev/null` on each of 0, 1 and 2 that is closed. `open` returns
/// the lowest free number: the closed one, as those below it are open by
/// then.
fn open_stdio() {
    for fd in 0..3 {
        // SAFETY: F_GETFD reads a descriptor's flags; any number is valid
        // to ask about (a closed one is EBADF).
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
        if closed {
            // SAFETY: a NUL-terminated path; the descriptor is left open
            // on purpose, as the process's stdin, stdout or stderr.
            let got = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if got != fd {
                // Nothing can stand in for it: as std does, give up.
                std::process::abort();
            }
        }
    }
}

fn ignore_sigpipe() {
    // SAFETY: sets a disposition (SIG_IGN), installs no handler; nothing
    // else of the process runs yet.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}
