#!/usr/bin/env bash
# A cold build of the static x86_64 verifier, as scripts/build-verifiers.sh builds it, into a
# fresh target directory: for timing the `verifier` profile (Cargo.toml) against the one
# before it. Paired with farm-bench (docs/benchmarks.md, "Its build profile"):
#
#   farm-bench -n 2 --warmup 0 --timeout 1500 \
#     --vs "scripts/verifier-profile-build.sh opt1" -- scripts/verifier-profile-build.sh committed
#
# `committed`: the profile as committed. `opt1`: opt-level 1 for every crate, the profile
# before. Needs build-verifiers.sh's virtualenv (.xtask/venv-zig: run that script once).
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:?usage: scripts/verifier-profile-build.sh committed|opt1}
case "$variant" in
  committed) extra=() ;;
  opt1)
    extra=(--config profile.verifier.opt-level=1 --config profile.verifier.package.sha2.opt-level=1
      --config profile.verifier.package.aws-lc-sys.opt-level=1)
    ;;
  *) echo "verifier-profile-build: $variant is not committed or opt1" >&2; exit 1 ;;
esac
venv=$(realpath -m "${XTASK_ZIG_VENV:-.xtask/venv-zig}")
[ -x "$venv/bin/cargo-zigbuild" ] || {
  echo "verifier-profile-build: no $venv/bin/cargo-zigbuild; run scripts/build-verifiers.sh once" >&2
  exit 1
}
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" cargo zigbuild --quiet --locked --profile verifier \
  "${extra[@]}" --package template-verify --bin template-verify --target=x86_64-unknown-linux-musl
