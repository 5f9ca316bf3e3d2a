#!/usr/bin/env bash
# The main job on one machine, on its embedded defaults: the local Docker engine, a local OCI
# registry on 127.0.0.1:5000, the public npm registry, no accounts. Installs and starts what it
# needs first (idempotent), then runs `cargo xtask release` with any arguments given, e.g.
#   scripts/release.sh --force                 # a manual run, whatever the cadence says
#   scripts/release.sh --dry-run               # print the plan, change nothing
#   scripts/release.sh --platform linux/amd64 --no-publish  # only the native platform, no push
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-host.sh
# `cargo xtask` is `cargo run --quiet`: on a first run it would compile for minutes in silence.
# Compiled here first, visibly when there is something to compile and silently when not.
bash scripts/compile.sh "the release tool (cargo xtask)" cargo build --locked --package xtask
exec cargo xtask release "$@"
