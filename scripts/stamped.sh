#!/usr/bin/env bash
# Runs COMMAND with its output (stdout and stderr) written to LOG, a regular file, and prints
# every line of LOG as it is written, prefixed with the time: the suite's log (scripts/test.sh).
#
#   scripts/stamped.sh LOG COMMAND [ARG...]     exits with COMMAND's status
#
# Why a file and not `COMMAND | while read`: the tests start programs that share the test
# binary's stdout, and Node.js sets O_NONBLOCK on a stdout pipe (libuv's uv_pipe_open) and leaves
# it set when it is killed. O_NONBLOCK belongs to the pipe's open file description, so from then
# on the test binary's own writes fail with EAGAIN whenever the reader is behind, and libtest
# stops printing mid-line: the failures' captured output, the part a reader needs, is lost.
# Writes to a regular file never return EAGAIN; the reader below follows the file instead.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 LOG COMMAND [ARG...]" >&2
  exit 2
fi
log=$1
shift
mkdir -p "$(dirname "$log")"
: >"$log"

# The reader follows LOG until the sleeper, killed once COMMAND has ended, is gone (GNU tail
# reads what is left after --pid's process dies, then exits). A final line without a newline
# is printed too.
sleep 2147483647 &
sleeper=$!
trap 'kill "$sleeper" 2>/dev/null' EXIT
tail -n +1 -s 0.5 --pid="$sleeper" -f "$log" |
  while IFS= read -r line || [ -n "$line" ]; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done &
reader=$!

"$@" >"$log" 2>&1 </dev/null
status=$?
kill "$sleeper" 2>/dev/null
wait "$reader"
exit "$status"
