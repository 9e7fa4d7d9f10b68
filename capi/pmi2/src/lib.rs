//! `libpmi2.so.0`: fastpmi's drop-in for Slurm's PMI-2 client library.
//!
//! Every function Slurm's `libpmi2.so.0` exports, with the prototypes and
//! constants of `slurm/pmi2.h` (fastpmi's own header is `include/pmi2.h`),
//! built on the Rust client: under the fastpmi launcher, put/get/fence and
//! node attributes go through the shared-memory job segment; under any other
//! PMI-2 server (Hydra, slurmstepd) or with a segment this library does not
//! know, over the wire; with no PMI environment, as a singleton.
//!
//! Conventions of every entry point:
//! * a call before `PMI2_Init` (or after `PMI2_Finalize`) returns
//!   `PMI2_ERR_INIT`; a NULL pointer argument `PMI2_ERR_INVALID_ARG`; a
//!   key longer than `PMI2_MAX_KEYLEN` `PMI2_ERR_INVALID_KEY_LENGTH`, an
//!   empty key or one with `=`, `;` or a blank `PMI2_ERR_INVALID_KEY`; a
//!   value longer than `PMI2_MAX_VALLEN` `PMI2_ERR_INVALID_VAL_LENGTH`; a
//!   buffer length `<= 0` `PMI2_ERR_INVALID_LENGTH`;
//! * a string result is copied NUL-terminated; when it does not fit it is
//!   truncated and the call returns `PMI2_ERR_NOMEM` (except
//!   `PMI2_KVS_Get`, which follows the negative-`vallen` rule);
//! * anything else that fails (connection, server refusal, aborted job) is
//!   `PMI2_ERR_OTHER`, with the reason in the debug log (`FASTPMI_LOG=debug`);
//! * no panic crosses into C ([`fastpmi_capi::guard`]).
//!
//! Every `unsafe` block dereferences pointers handed in by the C caller,
//! under the contract of the function's `# Safety` section (the one the C
//! API documents).
#![allow(non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]

/// fastpmi's extension: `FPMI_Group_*` and `FPMI_Pset_*` (`include/fastpmi.h`).
mod deaths;
pub mod groups;

mod info;
mod job;
mod kvs;
mod kvscopy;
mod nameserv;
mod oob;
mod spawn;

pub use deaths::*;
pub use info::*;
pub use job::*;
pub use kvs::*;
pub use kvscopy::*;
pub use nameserv::*;
pub use spawn::*;

use std::ffi::c_int;

/// `PMI2_ID_NULL`: no source rank hint.
const ID_NULL: c_int = -1;
/// Longest job id accepted as an argument.
const MAX_JOBID: usize = 4096;
/// Longest abort message passed on.
const MAX_MSG: usize = 4096;
