#!/usr/bin/env bash
# Builds the consumer's verifier, `template-verify` (the `verify/` crate), as a
# statically linked binary for every platform the template ships, into OUT_DIR as
# `template-verify-linux-amd64` and `template-verify-linux-arm64`. Releases carry them so that
# another repository verifies and pins a release without Rust (docs/consumers.md).
#
#   scripts/build-verifiers.sh OUT_DIR [PLATFORM...]     (default: linux/amd64 linux/arm64)
#
# Both are cross-built from one machine of either architecture: Rust's musl targets link
# statically, and the C inside the TLS stack (aws-lc) is compiled by zig's C compiler through
# cargo-zigbuild, both from PyPI at pinned versions in a virtualenv under the gitignored
# .xtask/ (no cross toolchain from the distribution needed). The `verifier` profile
# (Cargo.toml) builds unoptimised but for hashing and aws-lc: the verifier is network-bound,
# and optimising it all would nearly triple the build. Idempotent: a second run only checks
# versions and rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: scripts/build-verifiers.sh OUT_DIR [linux/amd64] [linux/arm64]}
shift
platforms=("$@")
if [ ${#platforms[@]} -eq 0 ]; then platforms=(linux/amd64 linux/arm64); fi
target_dir=${CARGO_TARGET_DIR:-target}
ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1
# XTASK_ZIG_VENV: the virtualenv elsewhere (a scratch copy of the repository shares the
# checkout's instead of installing its own).
venv=$(realpath -m "${XTASK_ZIG_VENV:-.xtask/venv-zig}")
declare -A TARGETS=(
  [linux-amd64]=x86_64-unknown-linux-musl
  [linux-arm64]=aarch64-unknown-linux-musl
)

if ! "$venv/bin/cargo-zigbuild" --version 2>/dev/null | grep -q " $CARGO_ZIGBUILD_VERSION\$" \
  || ! "$venv/bin/python" -m ziglang version 2>/dev/null | grep -qx "$ZIGLANG_VERSION"; then
  echo "build-verifiers: installing ziglang $ZIGLANG_VERSION and cargo-zigbuild $CARGO_ZIGBUILD_VERSION into $venv" >&2
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      echo "build-verifiers: python3 -m venv failed; on Debian/Ubuntu: apt-get install -y python3-venv" >&2
      exit 1
    }
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION"
fi

slugs=()
for platform in "${platforms[@]}"; do
  slug=${platform//\//-}
  if [ -z "${TARGETS[$slug]:-}" ]; then
    echo "build-verifiers: unknown platform $platform (linux/amd64 or linux/arm64)" >&2
    exit 1
  fi
  slugs+=("$slug")
done

mkdir -p "$out"
targets=()
for slug in "${slugs[@]}"; do
  targets+=("${TARGETS[$slug]}")
done
rustup target add "${targets[@]}" >&2
echo "build-verifiers: template-verify for ${targets[*]}" >&2
# One cargo run for every target: the build scripts and proc macros (host code) compile once.
PATH="$venv/bin:$PATH" cargo zigbuild --locked --profile verifier --package template-verify \
  --bin template-verify "${targets[@]/#/--target=}"
for slug in "${slugs[@]}"; do
  cp "$target_dir/${TARGETS[$slug]}/verifier/template-verify" "$out/template-verify-$slug"
done
# Each must start where it can: natively, or under qemu where binfmt is registered.
for slug in "${slugs[@]}"; do
  if "$out/template-verify-$slug" --version > /dev/null 2>&1; then
    echo "build-verifiers: $out/template-verify-$slug runs: $("$out/template-verify-$slug" --version)" >&2
  elif [ "$slug" = "linux-$(dpkg --print-architecture 2>/dev/null || echo none)" ]; then
    echo "build-verifiers: $out/template-verify-$slug does not run on this machine" >&2
    exit 1
  fi
done
