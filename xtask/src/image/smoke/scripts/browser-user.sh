# shellcheck shell=bash
# The browser user exists, is not root, and owns its home.
set -eu
id @BROWSER_USER@
uid="$(id -u @BROWSER_USER@)"
[ "$uid" != 0 ] || { echo "@BROWSER_USER@ is root"; exit 1; }
home="$(getent passwd @BROWSER_USER@ | cut -d: -f6)"
owner="$(stat -c %U "$home")"
echo "home $home owned by $owner"
