//! fastpmi: a PMI-1/PMI-2 launcher and runtime for many ranks on one node.

pub mod bench;
pub mod cli;
pub mod client;
pub mod demo;
pub mod launcher;
pub mod server;
pub mod shm;
pub mod store;
pub mod wire;
