//! End-to-end tests of `cargo xtask resolve` against a fixture npm registry.
