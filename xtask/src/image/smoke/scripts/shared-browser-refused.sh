# shellcheck shell=bash
# The negative control: the same launcher start in a container with Docker's default seccomp profile must fail, and fail in Chromium's sandbox (not the desktop), so nobody "fixes" the shared browser with --no-sandbox.
set -u
if SHARED_BROWSER_TIMEOUT=30 @LAUNCHER@ start >endpoint 2>launcher.log; then
    echo "chromium started under the default profile: $(cat endpoint)"
    exit 1
fi
cat launcher.log
[ -S /tmp/.X11-unix/X1 ] && echo "desktop started; chromium did not"
grep -m1 -E "Failed to move to new namespace|zygote" /tmp/shared-browser/chromium.log | sed "s/^/refused by the sandbox: /"
