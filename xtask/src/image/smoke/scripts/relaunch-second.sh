# shellcheck shell=bash
# The second host, on the same profile: the launcher clears the stale lock of the first host and the browser comes up there again.
set -eu
profile=/home/@BROWSER_USER@/.config/shared-browser
stale="$(readlink "$profile/SingletonLock")" || { echo "the first start left no profile lock"; exit 1; }
echo "this host is $(uname -n); the profile lock names $stale"
cdp="$(@LAUNCHER@ start 2>launcher.log)" || { cat launcher.log; exit 1; }
cat launcher.log
echo "relaunched: CDP endpoint $cdp"
lock="$(readlink "$profile/SingletonLock")"
case "$lock" in
    "$(uname -n)"-*) echo "the profile of the first start is in use (its lock now names $lock)" ;;
    *) echo "the profile lock names $lock, not this host"; exit 1 ;;
esac
@LAUNCHER@ stop
