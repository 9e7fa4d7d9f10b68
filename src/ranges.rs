//! Lists of numbers as ranges, `0-3,8`: rank lists in the tools' reports,
//! CPU lists of rank bindings (the codec's, which also writes
//! `PMI_dead_processes`).

pub use fastpmi_codec::ranks::ranges;
