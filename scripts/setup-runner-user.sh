#!/usr/bin/env bash
# Creates the non-root `runner` user that GitHub-hosted runners run jobs as, so the workflow
# replay harness (tests/support/replay/) runs steps with the same identity: uid != 0, home
# /home/runner, passwordless sudo, member of `docker` when that group exists, and a working
# Rust toolchain of its own.
#
# Run as root. Idempotent (a second run changes nothing: measured 0.3 s) and safe to run
# concurrently: everything happens under an exclusive lock, and the toolchain is linked into a
# temporary directory that is renamed into place only when complete.
#
# The toolchain: root's lives in /root/.rustup and /root/.cargo, and /root is mode 700, which
# stays as it is. The runner gets a hard-linked copy (`cp -al`) of root's default toolchain:
# the same filesystem holds both, so linking ~1.4 GB of files costs only directory entries and
# no disk space (measured here: 1.2 s; seeding the registry below, 290 MB, takes 7 s; a first
# run that also installs sudo, 18 s). The linked files stay owned by root and read-only for the
# runner: chowning a hard link would chown root's original too.
# A read-only bind mount would also work but needs mount privileges at every boot and is not
# idempotent across reboots; links are plain files.
#
# The runner's CARGO_HOME (/home/runner/.cargo) is its own and writable: cargo writes the
# registry index, downloaded crates and `cargo install`ed binaries there. Its registry is
# seeded once by a real copy (not links: cargo rewrites its index cache files in place) of
# root's, so the first build does not download every crate again; crates.io stays reachable
# for what is missing.
set -euo pipefail

# It creates a user and writes /etc/sudoers.d: a non-root caller with passwordless sudo (the
# runner itself on GitHub) goes through sudo.
if [ "$(id -u)" -ne 0 ]; then
  exec sudo -n bash "$0" "$@"
fi

RUNNER=runner
RUNNER_HOME=/home/runner
SOURCE_RUSTUP=${SOURCE_RUSTUP:-/root/.rustup}
SOURCE_CARGO=${SOURCE_CARGO:-/root/.cargo}

mkdir -p /var/lock
exec 9>/var/lock/setup-runner-user.lock
flock 9

if ! command -v sudo > /dev/null 2>&1; then
  echo "setup-runner-user: installing sudo" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sudo > /dev/null
fi

if ! id -u "$RUNNER" > /dev/null 2>&1; then
  useradd --create-home --home-dir "$RUNNER_HOME" --shell /bin/bash --user-group "$RUNNER"
fi

sudoers=/etc/sudoers.d/runner
if [ "$(cat "$sudoers" 2>/dev/null)" != "$RUNNER ALL=(ALL) NOPASSWD:ALL" ]; then
  tmp=$(mktemp /etc/sudoers.d/.runner.XXXXXX)
  echo "$RUNNER ALL=(ALL) NOPASSWD:ALL" > "$tmp"
  chmod 0440 "$tmp"
  visudo -cqf "$tmp"
  mv -f "$tmp" "$sudoers"
fi

if getent group docker > /dev/null && ! id -nG "$RUNNER" | tr ' ' '\n' | grep -qx docker; then
  usermod -aG docker "$RUNNER"
fi

# --- Rust toolchain -------------------------------------------------------------------------
runner_cargo() {
  runuser -u "$RUNNER" -- env -i HOME="$RUNNER_HOME" PATH="$RUNNER_HOME/.cargo/bin:/usr/bin:/bin" cargo --version
}
cargo_home="$RUNNER_HOME/.cargo"
link_root_toolchain() {
  toolchain=$(sed -n 's/^default_toolchain = "\(.*\)"$/\1/p' "$SOURCE_RUSTUP/settings.toml")
  if [ -z "$toolchain" ] || [ ! -d "$SOURCE_RUSTUP/toolchains/$toolchain" ]; then
    echo "setup-runner-user: no default toolchain in $SOURCE_RUSTUP/settings.toml" >&2
    exit 1
  fi
  src="$SOURCE_RUSTUP/toolchains/$toolchain"
  rustup_home="$RUNNER_HOME/.rustup"
  dst="$rustup_home/toolchains/$toolchain"
  install -d -o "$RUNNER" -g "$RUNNER" "$rustup_home" "$rustup_home/toolchains"
  # Linked once: afterwards the toolchain is the runner's, as on GitHub, where a workflow's
  # `rustup toolchain install stable` updates it when a newer stable exists. So its directories
  # (new inodes, not links) belong to the runner, and rustup can replace files in them; the
  # files themselves stay root's hard links, which rustup unlinks and replaces but never writes
  # into, so root's toolchain is never changed. (With root-owned directories, such an update
  # fails and rustup retries its renames for minutes.)
  # rustup records a toolchain's components by rewriting the files directly in lib/rustlib
  # (components, multirust-config.toml) in place. Linked, they would be root's too: a later
  # `rustup target add` by root (scripts/build-verifiers.sh in a test) would claim, in the
  # runner's toolchain, targets whose files it lacks, and the runner's own `rustup target
  # add` would answer "up to date" and leave it broken. So those files are the runner's own
  # copies; a toolchain linked before this rule is linked again.
  if [ -d "$dst" ] && [ -n "$(find "$dst/lib/rustlib" -maxdepth 1 -type f -links +1 -print -quit)" ]; then
    rm -rf "$dst"
  fi
  if [ ! -d "$dst" ]; then
    staging=$(mktemp -d "$rustup_home/toolchains/.staging.XXXXXX")
    cp -al "$src" "$staging/$toolchain"
    find "$staging/$toolchain/lib/rustlib" -maxdepth 1 -type f -exec sh -c \
      'for f; do cp -p "$f" "$f.own" && mv -f "$f.own" "$f"; done' sh {} +
    find "$staging/$toolchain/lib/rustlib" -maxdepth 1 -type f -exec chown "$RUNNER:$RUNNER" {} +
    find "$staging/$toolchain" -type d -exec chown "$RUNNER:$RUNNER" {} +
    mv "$staging/$toolchain" "$dst"
    rmdir "$staging"
  fi
  # Other toolchain names that are symbolic links to the default one (e.g. `1.95.0 -> stable`):
  # recreated relative, because root's point into /root, which the runner cannot enter.
  for link in "$SOURCE_RUSTUP"/toolchains/*; do
    if [ -L "$link" ] && [ "$(readlink -f "$link")" = "$(readlink -f "$src")" ]; then
      ln -sfn "$toolchain" "$rustup_home/toolchains/$(basename "$link")"
    fi
  done
  printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\nauto_self_update = "disable"\n' \
    "$toolchain" > "$rustup_home/settings.toml"
  chown "$RUNNER:$RUNNER" "$rustup_home/settings.toml"

  # rustup's proxies (cargo, rustc, rustup, ...) are hard links of one binary that dispatches on
  # its name: linking them is enough. The bin directory itself belongs to the runner so that
  # `cargo install` can add to it.
  install -d -o "$RUNNER" -g "$RUNNER" "$cargo_home" "$cargo_home/bin"
  for proxy in "$SOURCE_CARGO"/bin/*; do
    name=$(basename "$proxy")
    if [ ! "$proxy" -ef "$cargo_home/bin/$name" ]; then
      ln -f "$proxy" "$cargo_home/bin/$name"
    fi
  done
}
# A runner that already has a working cargo keeps it: a GitHub-hosted runner (where CI runs this
# script too) has its own toolchain and no /root/.rustup to link from.
# A toolchain this script linked before its metadata became the runner's own copies is
# linked again (see link_root_toolchain).
shares_root_metadata() {
  [ -d "$RUNNER_HOME/.rustup/toolchains" ] \
    && [ -n "$(find "$RUNNER_HOME/.rustup/toolchains" -mindepth 4 -maxdepth 4 -path '*/lib/rustlib/*' -type f -links +1 -print -quit)" ]
}
if ! runner_cargo > /dev/null 2>&1 || shares_root_metadata; then
  link_root_toolchain
fi
if [ ! -d "$cargo_home/registry" ] && [ -d "$SOURCE_CARGO/registry" ]; then
  staging=$(mktemp -d "$cargo_home/.registry.XXXXXX")
  cp -a "$SOURCE_CARGO/registry/." "$staging/"
  chown -R "$RUNNER:$RUNNER" "$staging"
  chmod 755 "$staging"
  mv "$staging" "$cargo_home/registry"
fi

# A login shell of the runner finds cargo like a GitHub runner's does.
profile="$RUNNER_HOME/.profile"
if ! grep -qs 'HOME/.cargo/bin' "$profile"; then
  echo 'export PATH="$HOME/.cargo/bin:$PATH"' >> "$profile"
  chown "$RUNNER:$RUNNER" "$profile"
fi

runner_cargo > /dev/null
