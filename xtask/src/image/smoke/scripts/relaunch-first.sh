# shellcheck shell=bash
# The first host: the launcher starts the browser on the persistent profile, then the processes end without a clean stop, as when a sandbox is paused and resumed elsewhere; Chromium's profile lock stays, naming this host.
set -eu
@LAUNCHER@ start
profile=/home/@BROWSER_USER@/.config/shared-browser
kill -KILL "$(cat /tmp/shared-browser/chromium.pid)"
echo "first start on $(uname -n); the profile lock names $(readlink "$profile/SingletonLock")"
