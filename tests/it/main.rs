//! The end-to-end tests, one module per area, in one binary: `cargo test -p xtask --test it`
//! (a module alone: `cargo test -p xtask --test it -- resolve::`).

#[path = "../support/mod.rs"]
mod support;

mod image;
mod lock;
mod receipt_adversarial;
mod registry_auth;
mod release;
mod release_run;
mod replay;
mod replay_engine;
mod resolve;
mod workflows;
