//! The end-to-end tests, one module per area, in one binary: `cargo test -p xtask --test it`;
//! one area alone: `cargo test -p xtask --test it -- resolve::`.
//!
//! Every test runs the real binary through one runner ([`support::xtask::xtask`]), which keeps
//! the caller's `XTASK_*` and `GITHUB_*` variables from it.
//!
//! # What runs side by side
//!
//! scripts/test.sh runs this binary with two threads, so tests of different areas run at the
//! same time on a two-core machine. Tests that use the Docker engine take a guard first thing
//! (`support/docker.rs` explains it):
//!
//! | area | guard | why |
//! | --- | --- | --- |
//! | `image` | `heavy_docker` (alone) | builds and smoke runs keep both cores busy |
//! | `image` (dead runs' containers) | `light_docker` | a tiny image, a smoke run that stops at its missing image |
//! | `release_run` (the release) | `heavy_docker` | builds, smokes and pushes both platforms |
//! | `replay` | `heavy_docker` | whole workflow runs: the engine, the registry, the shared /home/runner (jobs side by side get homes of their own) |
//! | `release`, `receipt_adversarial`, `registry_auth` | `light_docker` (shared) | tiny images |
//! | `kill_points` | `light_docker` (shared) | tiny images and the local registry; lock and plan on the npm fixture |
//! | `release_notes` | `light_docker` (shared) | two fixture releases: plan on the npm fixture, tiny images, the local registry |
//! | `registry_auth` (peak memory, ignored) | `heavy_docker` | a multi-GB push, measured |
//! | `replayed_consumer` | `light_docker` (shared) | tiny images; replays of a consumer's workflow; its verifier comes from the lane of cold builds (`support/cold_builds.rs`) |
//! | `replayed_consumer` (the documented workflow) | none | reads docs/consumers.md |
//! | `resolve`, `lock`, `inputs`, `workflows`, `scripts`, a release's dry run | none | no engine |
//! | `checkout`, `test_log` | none | the checkout rule (no read of what a release rewrote), the suite's log |
//! | `install_plan` | none | the Dockerfile's install plan run with the host's Node |
//!
//! Each guard is `Option`al: a test returns at once when the engine tier is skipped (a plain
//! `cargo test` outside CI, or `XTASK_ENGINE_TESTS=0`), and fails when it is required and no
//! engine answers (`support/docker.rs`, "Which tests run at all").
//!
//! Beside them runs one lane of the suite's own (`support/cold_builds.rs`, started by the first
//! image test): the release workflow's two cold Rust builds, the tool's then the verifier's,
//! replayed as the runner at a lower priority on a runner home of its own. What waits for it is
//! named to come late: after `release_run`, the scenarios that need only the tool
//! (`replay::a_*`), while the verifier still builds; then those that need the verifier too, the
//! due day (`replay::the_due_day_*`) and the consumer's tests (`replayed_consumer`).
//!
//! libtest starts tests in name order, so the heavy areas (`image`, `release_run`, `replay`)
//! run one test at a time as they did in their own binaries, with a cheap test beside them when
//! the other thread has one; checks of engine state are scoped to the run under test (the
//! containers a smoke run left, by its process id), so they hold whatever else runs.

#[path = "../support/mod.rs"]
mod support;

mod checkout;
mod image;
mod inputs;
mod install_plan;
mod kill_points;
mod lock;
mod receipt_adversarial;
mod registry_auth;
mod release;
mod release_notes;
mod release_run;
mod replay;
mod replayed_consumer;
mod resolve;
mod scripts;
mod test_log;
mod workflows;
