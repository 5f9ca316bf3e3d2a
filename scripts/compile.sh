#!/usr/bin/env bash
# Runs a cargo command that compiles (`cargo build`, `cargo test --no-run`) so that the first
# minutes are not silent: when there is something to compile, one line saying what, then
# cargo's own progress (its progress bar on a terminal, a line per crate in a log) and the time
# it took; when everything is up to date, nothing at all. The scripts run it before a command
# that would compile the same thing quietly (`cargo xtask` is `cargo run --quiet`), which then
# finds nothing left to do. Usage:
#   scripts/compile.sh WHAT CARGO-COMMAND...
#   scripts/compile.sh "the release tool (xtask)" cargo build --locked --package xtask
# Cargo's first line tells which case it is: `Finished` when there is nothing to do; a status
# (`Compiling`, `Downloading`, `Blocking`) or an error otherwise. Cached warnings of a fresh
# build come before `Finished` and are shown too.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/compile.sh WHAT CARGO-COMMAND..." >&2
  exit 2
fi
what=$1
shift
if [ -t 2 ]; then
  # The output goes through a pipe, which is no terminal: ask cargo for the progress bar and
  # the colours it draws on one (a bar needs a width when cargo cannot ask the terminal).
  export CARGO_TERM_COLOR=always CARGO_TERM_PROGRESS_WHEN=always
  CARGO_TERM_PROGRESS_WIDTH=$(tput cols 2>/dev/null || echo 80)
  export CARGO_TERM_PROGRESS_WIDTH
fi
started=$SECONDS
set +e
"$@" 2>&1 | {
  if ! IFS= read -r first; then
    exit 0
  fi
  case $first in
  *Finished*)
    cat > /dev/null
    exit 0
    ;;
  esac
  echo "compile.sh: compiling $what (a first build takes minutes); cargo's progress follows"
  printf '%s\n' "$first"
  cat
  # Shown: the caller says how long it took, once cargo succeeded.
  exit 3
} >&2
status=("${PIPESTATUS[@]}")
set -e
if [ "${status[0]}" -ne 0 ]; then
  exit "${status[0]}"
fi
if [ "${status[1]}" -eq 3 ]; then
  echo "compile.sh: compiled $what in $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s" >&2
fi
