# shellcheck shell=bash
# Under emulation: Chromium and playwright-cli start (qemu-user cannot run Chromium's renderer).
set -eu
chromium --version
playwright-cli --version
echo "emulated platform: page driving is left to a native run (qemu-user cannot run Chromium's renderer)"
