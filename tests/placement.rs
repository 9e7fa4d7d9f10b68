//! Placement (issue 13): Intel MPI under fastpmi in every PMI mode, each
//! rank reporting the CPUs it runs on. Binding, `PMI_hwloc_xmlfile`, bad
//! placement options and Intel MPI's launcher hints are in
//! `tests/placement_binding.rs`.
//!
//! Real processes only: Intel MPI from the `impi-rt`/`impi-devel` wheels
//! (venvs from scripts/install-mpi-stacks; a missing one fails the test with
//! the command that installs it).

mod common;

use common::placement::{impi_allreduce, impi_hello, Mode};

#[test]
fn impi_hello_4_pmi1() {
    impi_hello(Mode::Pmi1, 4);
}
#[test]
fn impi_hello_4_pmi2_library() {
    impi_hello(Mode::Pmi2Lib, 4);
}
#[test]
fn impi_hello_4_pmi_port() {
    impi_hello(Mode::Port, 4);
}
#[test]
fn impi_hello_4_sysv() {
    impi_hello(Mode::Sysv, 4);
}
#[test]
fn impi_hello_4_no_pool() {
    impi_hello(Mode::NoPool, 4);
}
#[test]
fn impi_allreduce_4_pmi1() {
    impi_allreduce(Mode::Pmi1, 4);
}
#[test]
fn impi_allreduce_4_pmi2_library() {
    impi_allreduce(Mode::Pmi2Lib, 4);
}
#[test]
fn impi_allreduce_4_pmi_port() {
    impi_allreduce(Mode::Port, 4);
}
#[test]
fn impi_allreduce_4_sysv() {
    impi_allreduce(Mode::Sysv, 4);
}
#[test]
fn impi_allreduce_4_no_pool() {
    impi_allreduce(Mode::NoPool, 4);
}

// 64 ranks: each mode once, both programs in the default mode (CI time).
#[test]
fn impi_hello_64_pmi1() {
    impi_hello(Mode::Pmi1, 64);
}
#[test]
fn impi_allreduce_64_pmi1() {
    impi_allreduce(Mode::Pmi1, 64);
}
#[test]
fn impi_allreduce_64_pmi2_library() {
    impi_allreduce(Mode::Pmi2Lib, 64);
}
#[test]
fn impi_hello_64_pmi_port() {
    impi_hello(Mode::Port, 64);
}
#[test]
fn impi_allreduce_64_sysv() {
    impi_allreduce(Mode::Sysv, 64);
}
#[test]
fn impi_hello_64_no_pool() {
    impi_hello(Mode::NoPool, 64);
}
