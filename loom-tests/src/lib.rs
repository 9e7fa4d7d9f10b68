//! Loom models of the shm-layout algorithms; run with RUSTFLAGS="--cfg loom".
