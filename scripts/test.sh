#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs and starts what the tests need (Docker engine,
# mmdebstrap, qemu binfmt, Debian's docker-registry, zizmor, actionlint), then runs every test for real,
# Docker ones included. The fast unit tests alone: `cargo test --workspace --lib`.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp() { printf '%(%H:%M:%S)T test.sh: %s\n' -1 "$*"; }
stamp "setting up the host"

bash scripts/setup-host.sh
# The workflow replay tests run steps as the non-root runner user, as GitHub does.
bash scripts/setup-runner-user.sh
# Docker 28 twice, as nested engines (classic store and containerd image store): the image
# tests run on them too (tests/it/image.rs).
bash scripts/nested-engines.sh start >/dev/null
stamp "checks and tests"
cargo fmt --all --check
# The tests' build first, on its own: the first run shows what it compiles and cargo's
# progress (and how long it took), a later one with nothing to compile prints nothing, and
# the test run below compiles nothing.
bash scripts/compile.sh "the workspace's tests, every feature" \
  cargo test --workspace --all-features --locked --no-run
bash scripts/lint-workflows.sh
# Two threads: the unit tests, then the end-to-end tests (one binary, tests/it/); in that binary,
# tests/it/main.rs says which tests run side by side (heavy Docker tests run alone).
# Every line stamped with the time it was printed: libtest prints a test's name when it ends, so
# the stamps tell what each test cost (heavy ones run one at a time) when a run is too slow.
# The output goes through a file (scripts/stamped.sh says why a pipe loses failures), kept in
# .xtask/test-logs/ with the last few runs'.
# Every test runs, the ones that need the engine and the host set up here included; without an
# engine those fail instead of passing unrun (tests/support/docker.rs, XTASK_ENGINE_TESTS).
export XTASK_ENGINE_TESTS=1
logs=.xtask/test-logs
mkdir -p "$logs"
# (Through a glob that may match nothing: on a fresh clone `ls` of an empty glob exits 2, which
# pipefail and set -e would make this script's exit status.)
shopt -s nullglob
earlier_logs=("$logs"/cargo-test-*.log)
shopt -u nullglob
if [ "${#earlier_logs[@]}" -gt 0 ]; then
  ls -1t "${earlier_logs[@]}" | tail -n +10 | xargs -r rm -f
fi
log="$logs/cargo-test-$(date -u +%Y%m%dT%H%M%SZ).log"
stamp "cargo test (the whole output, unstamped, is also in $log)"
started=$SECONDS
status=0
bash scripts/stamped.sh "$log" \
  cargo test --workspace --all-features --locked --no-fail-fast -- --test-threads=2 || status=$?
echo "test.sh: cargo test took $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
if [ "$status" -ne 0 ]; then
  # libtest ends each failing test binary's output with a list of its failed tests, right after a
  # line `failures:`; each one's captured output is printed in full above that list.
  echo "test.sh: FAILED (cargo test exited $status). The failed tests (each one's output is above, and in $log):"
  awk '/^failures:$/ { listing = 1; next } listing && /^    [^ ]+$/ { print; next } { listing = 0 }' "$log"
fi
exit "$status"
