#!/usr/bin/env bash
# Installs and starts what the toolchain needs on a fresh Debian/Ubuntu machine:
# a Docker engine, mmdebstrap (base images from Debian packages), qemu binfmt (arm64 under
# emulation) and Debian's docker-registry (a local OCI registry). Idempotent: a second run
# only checks.
set -euo pipefail

# Installing packages and starting dockerd need root: a non-root user with passwordless sudo
# (GitHub's runners, a maintainer's laptop) gets the same setup through sudo.
if [ "$(id -u)" -ne 0 ]; then
  exec sudo -n bash "$0" "$@"
fi

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
# On Ubuntu mmdebstrap does not pull in Debian's keyring; `cargo xtask base` passes it explicitly.
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
# mmdebstrap refuses foreign architectures (arm64 under qemu) without arch-test.
command -v arch-test >/dev/null || need+=(arch-test)
[ -e /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
command -v update-binfmts >/dev/null || need+=(binfmt-support)
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v zstd >/dev/null || need+=(zstd)
command -v curl >/dev/null || need+=(curl)
command -v git >/dev/null || need+=(git)
command -v node >/dev/null || need+=(nodejs npm)
# The replays' gh stand-in verifies Sigstore bundles with openssl's command line tool.
command -v openssl >/dev/null || need+=(openssl)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup-host: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Debian's docker-registry package starts a service with htpasswd auth; it is not ours.
if [ -f /etc/docker/registry/config.yml ] && pgrep -f '/usr/bin/docker-registry serve /etc/docker/registry/config.yml' >/dev/null; then
  pkill -f '/usr/bin/docker-registry serve /etc/docker/registry/config.yml' || true
fi

# arm64 binaries run under qemu once binfmt has the F flag registered.
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || true
  update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || update-binfmts --import qemu-aarch64 || true
fi
if ! grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null; then
  echo "setup-host: warning: qemu-aarch64 binfmt is not registered with the F flag; arm64 builds will fail" >&2
fi

if ! docker info >/dev/null 2>&1; then
  echo "setup-host: starting dockerd" >&2
  mkdir -p /var/log
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "setup-host: dockerd did not come up; see /var/log/dockerd.log" >&2; exit 1; }
fi
echo "setup-host: docker $(docker version --format '{{.Server.Version}}'), mmdebstrap, qemu-aarch64 ready" >&2
