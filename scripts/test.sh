#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs and starts what the tests need (Docker engine,
# mmdebstrap, qemu binfmt, Debian's docker-registry, zizmor, actionlint), then runs every test for real,
# Docker ones included. The fast unit tests alone: `cargo test -p xtask --lib`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-host.sh
# The workflow replay tests run steps as the non-root runner user, as GitHub does.
bash scripts/setup-runner-user.sh
cargo fmt --all --check
bash scripts/lint-workflows.sh
# Two threads: the unit tests, then the end-to-end tests (one binary, tests/it/); in that binary,
# tests/it/main.rs says which tests run side by side (heavy Docker tests run alone).
cargo test --workspace --locked --no-fail-fast -- --test-threads=2
