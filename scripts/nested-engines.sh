#!/usr/bin/env bash
# The engines GitHub's runners have, run on this machine as containers of the host's engine:
# Debian sid's docker.io (28.5.2 when written) twice, once with the classic store (as
# ubuntu-24.04's Docker 28.0.4) and once with the containerd image store (as ubuntu-26.04's
# Docker 29 and Docker Desktop). The image tests run against each (tests/it/image.rs).
#
#   scripts/nested-engines.sh [start|stop|env|status]
#
# start   makes the rootfs (mmdebstrap, cached in .xtask/nested-engines/) and its image unless
#         present, starts both engines unless they answer, and prints `env`. Idempotent.
# stop    removes the two engine containers (keeps their data volumes and the rootfs).
# env     prints XTASK_ENGINE_CLASSIC=unix://… and XTASK_ENGINE_CONTAINERD=unix://… for the
#         tests; each is a DOCKER_HOST for the host's docker CLI and for the tool.
# status  exits 0 when both engines answer.
#
# Uses the host's engine (the caller holds the engine lock, e.g. `flock /tmp/engine.lock`).
# Why not --privileged: the host's capability bounding set lacks CAP_SYS_RESOURCE, and runc
# then fails with "unable to apply caps" (20.10 ignores --cap-drop for privileged containers);
# so every other capability, no seccomp/apparmor filter, all devices, then /sys and the
# cgroup v1 mounts remounted read-write before dockerd starts (docker-engines.md). The data
# root is a docker volume: overlay on the host's overlay does not mount.
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-start}
suite=sid
packages=docker.io,containerd,runc,iptables,ca-certificates,mount,systemd-standalone-sysusers
state=.xtask/nested-engines
label=org.sandbox0.xtask.nested-engine
# The rootfs's name depends on what goes into it; the archive moves on, so a cached rootfs is
# kept until removed by hand (rm -r .xtask/nested-engines).
key=$(printf '%s\n' "$suite" "$packages" "v1" | sha256sum | cut -c1-12)
image=xtask-nested-engine:$key
sockets=${XTASK_NESTED_SOCKETS:-/run/xtask-nested-engines}
engines=(classic containerd)

fail() { echo "nested-engines: $*" >&2; exit 1; }
say() { echo "nested-engines: $*" >&2; }

host_of() { echo "unix://$sockets/$1/docker.sock"; }
answers() { DOCKER_HOST=$(host_of "$1") timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

print_env() {
  echo "XTASK_ENGINE_CLASSIC=$(host_of classic)"
  echo "XTASK_ENGINE_CONTAINERD=$(host_of containerd)"
}

make_image() {
  if docker image inspect "$image" >/dev/null 2>&1; then return 0; fi
  mkdir -p "$state"
  local rootfs=$state/rootfs-$key.tar
  if [ ! -s "$rootfs" ]; then
    say "making the $suite rootfs with $packages (about 1.5 min)"
    # The archive snapshot lags the clock: sid's Release file reads as expired.
    mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
      --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
      --format=tar --include="$packages" "$suite" "$rootfs.partial" >"$state/mmdebstrap.log" 2>&1 \
      || fail "mmdebstrap failed; see $state/mmdebstrap.log"
    mv "$rootfs.partial" "$rootfs"
  fi
  say "importing $rootfs as $image"
  docker import --change 'CMD ["/bin/sh"]' --change "LABEL $label=rootfs" "$rootfs" "$image" >/dev/null
}

# What runs inside: the remounts, then dockerd on the bind-mounted socket directory.
inner_script() {
  cat <<'EOF'
set -e
mount -o remount,rw /sys
mount -o remount,rw /sys/fs/cgroup
# The cgroup v1 hierarchies are read-only bind mounts: a plain remount says "busy".
for m in /sys/fs/cgroup/*; do
  if mountpoint -q "$m"; then mount -o remount,bind,rw "$m"; fi
done
rm -f /run/nested/docker.sock /var/run/docker.pid
exec dockerd --host unix:///run/nested/docker.sock --data-root /var/lib/docker \
  --config-file /etc/docker/daemon.json >/run/nested/dockerd.log 2>&1
EOF
}

start_one() {
  local name=$1 container=xtask-nested-$1
  # An engine started by another version of this script (other image or start-up) is replaced.
  local config
  config=$(printf '%s\n' "$image" "$(inner_script)" | sha256sum | cut -c1-12)
  if answers "$name" && [ "$(docker inspect --format "{{index .Config.Labels \"$label.config\"}}" "$container" 2>/dev/null)" = "$config" ]; then
    return 0
  fi
  docker rm -f "$container" >/dev/null 2>&1 || true
  mkdir -p "$sockets/$name"
  local features='{}'
  [ "$name" = containerd ] && features='{"features":{"containerd-snapshotter":true}}'
  say "starting the $name engine ($container)"
  docker run -d --name "$container" --label "$label=$name" --label "$label.config=$config" \
    --cap-add ALL --cap-drop SYS_RESOURCE \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm' \
    --mount "type=volume,source=xtask-nested-$name-data,target=/var/lib/docker" \
    --mount "type=bind,source=$sockets/$name,target=/run/nested" \
    --tmpfs /run --tmpfs /tmp \
    "$image" sh -c "mkdir -p /etc/docker && echo '$features' >/etc/docker/daemon.json && $(inner_script)" >/dev/null
}

wait_for() {
  local name=$1
  for _ in $(seq 1 60); do
    answers "$name" && return 0
    sleep 1
  done
  fail "the $name engine did not answer at $(host_of "$name"); see $sockets/$name/dockerd.log and \`docker logs xtask-nested-$name\`"
}

case "$command" in
  start)
    command -v mmdebstrap >/dev/null || fail "mmdebstrap is missing: run scripts/setup-host.sh"
    make_image
    for e in "${engines[@]}"; do start_one "$e"; done
    for e in "${engines[@]}"; do wait_for "$e"; done
    for e in "${engines[@]}"; do
      say "$e: docker $(DOCKER_HOST=$(host_of "$e") docker info --format '{{.ServerVersion}} {{.Driver}} {{json .DriverStatus}}')"
    done
    print_env
    ;;
  stop)
    for e in "${engines[@]}"; do docker rm -f "xtask-nested-$e" >/dev/null 2>&1 || true; done
    ;;
  env) print_env ;;
  status) for e in "${engines[@]}"; do answers "$e" || exit 1; done ;;
  *) fail "unknown command $command (start, stop, env, status)" ;;
esac
