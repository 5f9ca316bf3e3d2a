#!/usr/bin/env bash
# Where the bytes of a command go: samples `du` of the engine's data root, `.xtask/` and the temp
# dir (and any --dir NAME=PATH) while COMMAND runs, then prints, per directory, its size at the
# start, its peak and the growth (peak - start), and the peak of all of them together (at one
# sample). Read-only: it changes nothing but runs COMMAND as given.
#
#   scripts/disk-peak.sh [--json] [--interval SECONDS] [--dir NAME=PATH]... -- COMMAND [ARGS...]
#
# E.g. on a fresh machine: scripts/disk-peak.sh --json -- cargo xtask release build --platform
# linux/amd64 --plan out/plan.json --out out. On a shared machine only the growth means anything
# (other runs write to the same engine). `du -x` stays on each directory's filesystem, so the
# overlay mounts of running containers are not counted twice; a directory's hard links are
# counted once. The engine's root is skipped when the engine is not on this host (DOCKER_HOST
# tcp:// or ssh://, or `docker info`'s Name is another host: a nested engine), as
# `xtask/src/disk.rs` skips it.
set -euo pipefail

json=false
interval=2
declare -a names=() paths=()
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json=true; shift ;;
    --interval) interval="${2:?}"; shift 2 ;;
    --dir) names+=("${2%%=*}"); paths+=("${2#*=}"); shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "disk-peak: unknown argument $1" >&2; usage ;;
  esac
done
[[ $# -gt 0 ]] || usage

root="$(cd "$(dirname "$0")/.." && pwd)"
host="${DOCKER_HOST:-}"
if [[ -z "$host" || "$host" == unix://* ]]; then
  read -r engine_name engine_root < <(docker info -f '{{.Name}} {{.DockerRootDir}}' 2>/dev/null || echo "? ?")
  if [[ "$engine_name" == "$(cat /proc/sys/kernel/hostname)" && -d "$engine_root" ]]; then
    names=(engine "${names[@]}"); paths=("$engine_root" "${paths[@]}")
  else
    echo "disk-peak: not sampling the engine's data root: the engine runs on host $engine_name, not this one" >&2
  fi
else
  echo "disk-peak: not sampling the engine's data root: the engine is at $host" >&2
fi
names+=(xtask temp); paths+=("$root/.xtask" "${TMPDIR:-/tmp}")

size_of() { # bytes under $1, 0 when it does not exist (files vanishing under du are fine)
  local bytes=""
  [[ -e "$1" ]] && { bytes=$(du -sxb "$1" 2>/dev/null | cut -f1 | head -n1) || true; }
  echo "${bytes:-0}"
}

n=${#names[@]}
declare -a start=() peak=()
for ((i = 0; i < n; i++)); do start[i]=$(size_of "${paths[i]}"); peak[i]=${start[i]}; done
total_start=0; for ((i = 0; i < n; i++)); do total_start=$((total_start + start[i])); done
total_peak=$total_start

samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
(
  while :; do
    line=""
    for ((i = 0; i < n; i++)); do line+="$(size_of "${paths[i]}") "; done
    echo "$line" >>"$samples"
    sleep "$interval"
  done
) &
sampler=$!

began=$(date +%s)
set +e
if $json; then "$@" >&2; else "$@"; fi
status=$?
set -e
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
ended=$(date +%s)
# One last sample after the command: what it left.
line=""; for ((i = 0; i < n; i++)); do line+="$(size_of "${paths[i]}") "; done
echo "$line" >>"$samples"

count=0
declare -a last=()
while read -r -a row; do
  [[ ${#row[@]} -eq $n ]] || continue
  count=$((count + 1)); sum=0
  for ((i = 0; i < n; i++)); do
    ((row[i] > peak[i])) && peak[i]=${row[i]}
    sum=$((sum + row[i])); last[i]=${row[i]}
  done
  ((sum > total_peak)) && total_peak=$sum
done <"$samples"

if $json; then
  printf '{"command":'
  printf '%s' "$*" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()), end="")'
  printf ',"exit_status":%d,"seconds":%d,"samples":%d,"interval_seconds":%s,"directories":[' \
    "$status" $((ended - began)) "$count" "$interval"
  for ((i = 0; i < n; i++)); do
    ((i > 0)) && printf ','
    printf '{"name":"%s","path":' "${names[i]}"
    printf '%s' "${paths[i]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()), end="")'
    printf ',"start_bytes":%d,"peak_bytes":%d,"end_bytes":%d,"growth_bytes":%d}' \
      "${start[i]}" "${peak[i]}" "${last[i]}" $((peak[i] - start[i]))
  done
  printf '],"total":{"start_bytes":%d,"peak_bytes":%d,"growth_bytes":%d}}\n' \
    "$total_start" "$total_peak" $((total_peak - total_start))
else
  gb() { awk -v b="$1" 'BEGIN { printf "%.2f GB", b / 1e9 }'; }
  echo "disk-peak: $count samples every ${interval}s over $((ended - began))s; exit status $status" >&2
  printf '%-8s %-40s %12s %12s %12s\n' dir path start peak growth >&2
  for ((i = 0; i < n; i++)); do
    printf '%-8s %-40s %12s %12s %12s\n' "${names[i]}" "${paths[i]}" "$(gb "${start[i]}")" \
      "$(gb "${peak[i]}")" "$(gb $((peak[i] - start[i])))" >&2
  done
  printf '%-8s %-40s %12s %12s %12s\n' total "(at one sample)" "$(gb "$total_start")" \
    "$(gb "$total_peak")" "$(gb $((total_peak - total_start)))" >&2
fi
exit "$status"
