# shellcheck shell=bash
# A page served by node inside the container, opened and read back through playwright-cli; page-server.js is inlined as the node -e program.
set -eu
cd "$(mktemp -d)"
node -e '
@PAGE_SERVER_JS@' > port &
for _ in $(seq 1 100); do [ -s port ] && break; sleep 0.2; done
url="http://127.0.0.1:$(cat port)/"
export PLAYWRIGHT_MCP_HEADLESS=true
playwright-cli open "$url"
playwright-cli snapshot
playwright-cli close
