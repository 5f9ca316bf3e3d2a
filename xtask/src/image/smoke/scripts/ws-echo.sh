# shellcheck shell=bash
# A real WebSocket round trip through the template's ws; ws-echo.js is inlined as the node -e program.
set -eu
node -e '
@WS_ECHO_JS@'
