# shellcheck shell=bash
# A build the Dockerfile links in place of a package's default (manifest `linked_builds`): below the install directory's node_modules, LINK is the same file as TARGET and ABSENT is gone.
set -eu
cd @INSTALL_DIR@/node_modules
[ @LINK@ -ef @TARGET@ ] || { echo "@LINK@ is not the linked build @TARGET@"; exit 1; }
[ ! -e @ABSENT@ ] || { echo "@ABSENT@ is still installed"; exit 1; }
echo "@TARGET@ linked; @ABSENT@ absent"
