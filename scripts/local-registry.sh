#!/usr/bin/env bash
# A local OCI registry for `cargo xtask publish` and the tests: Debian's docker-registry
# (distribution 2.8), anonymous, listening on loopback only, storage in a state directory.
#
#   scripts/local-registry.sh [start|stop|status]
#
# start   starts it unless it already answers; prints the address (e.g. 127.0.0.1:5000).
#         Idempotent and safe to run concurrently (a lock serialises starters).
# stop    stops the registry this script started (by its recorded pid), keeps the storage.
# status  prints the address and exits 0 when it answers anonymously, else exits 1.
#
# XTASK_LOCAL_REGISTRY_PORT  port on 127.0.0.1 (default 5000)
# XTASK_LOCAL_REGISTRY_DIR   state directory: config, storage, log, pid
#                            (default ${XDG_STATE_HOME:-~/.local/state}/xtask/local-registry-PORT)
#
# Needs /usr/bin/docker-registry: run scripts/setup-host.sh first.
set -euo pipefail

command=${1:-start}
port=${XTASK_LOCAL_REGISTRY_PORT:-5000}
state=${XTASK_LOCAL_REGISTRY_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/xtask/local-registry-$port}
addr=127.0.0.1:$port

# The HTTP status of GET /v2/: 200 anonymous registry, 401 one that wants credentials,
# 000 nothing listening.
probe() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$addr/v2/" || true; }

fail() { echo "local-registry: $*" >&2; exit 1; }

check_answer() {
  case "$1" in
    200) return 0 ;;
    401) fail "$addr wants credentials: it is not this script's registry (Debian's packaged service? scripts/setup-host.sh stops it), or pick another XTASK_LOCAL_REGISTRY_PORT" ;;
    000) return 1 ;;
    *) fail "$addr answered HTTP $1 to /v2/: something else listens there; pick another XTASK_LOCAL_REGISTRY_PORT" ;;
  esac
}

start() {
  if check_answer "$(probe)"; then echo "$addr"; return 0; fi
  [ -x /usr/bin/docker-registry ] || fail "/usr/bin/docker-registry is missing: run scripts/setup-host.sh"
  mkdir -p "$state/storage"
  exec 9>"$state/lock"
  flock 9
  # Another starter may have won the lock first.
  if check_answer "$(probe)"; then echo "$addr"; return 0; fi
  cat >"$state/config.yml" <<EOF
# Written by scripts/local-registry.sh: anonymous, loopback only.
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $state/storage
  delete:
    enabled: false
http:
  addr: $addr
EOF
  # The daemon outlives this script, so it must not keep open any descriptor its caller holds
  # (a test harness's pipes, a flock(1) lock): the caller would wait on it forever.
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid nohup /usr/bin/docker-registry serve "$state/config.yml" >>"$state/registry.log" 2>&1 </dev/null
  ) &
  echo $! >"$state/pid"
  for _ in $(seq 1 100); do
    if check_answer "$(probe)"; then echo "$addr"; return 0; fi
    kill -0 "$(cat "$state/pid")" 2>/dev/null || break
    sleep 0.2
  done
  fail "the registry did not come up on $addr; see $state/registry.log"
}

stop() {
  [ -f "$state/pid" ] || { echo "local-registry: not started by this script ($state/pid missing)" >&2; return 0; }
  pid=$(cat "$state/pid")
  if kill -0 "$pid" 2>/dev/null && grep -q docker-registry "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid"
  fi
  rm -f "$state/pid"
}

case "$command" in
  start) start ;;
  stop) stop ;;
  status) check_answer "$(probe)" && echo "$addr" || { echo "local-registry: nothing answers on $addr" >&2; exit 1; } ;;
  *) fail "unknown command \`$command\`: use start, stop or status" ;;
esac
