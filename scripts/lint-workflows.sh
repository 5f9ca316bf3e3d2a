#!/usr/bin/env bash
# Lints .github/workflows with zizmor (GitHub Actions static analysis), offline: no GitHub API
# is needed or contacted. zizmor comes from PyPI at a pinned version, installed once into a
# virtualenv under the gitignored .xtask/ directory (pip refuses system-wide installs on Debian
# and Ubuntu's "externally managed" Pythons). Idempotent: a second run only checks the version.
# Exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIZMOR_VERSION=1.32.0
venv=.xtask/venv
zizmor="$venv/bin/zizmor"

if ! "$zizmor" --version 2>/dev/null | grep -qx "zizmor $ZIZMOR_VERSION"; then
  echo "lint-workflows: installing zizmor $ZIZMOR_VERSION into $venv" >&2
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      echo "lint-workflows: python3 -m venv failed; on Debian/Ubuntu: apt-get install -y python3-venv" >&2
      exit 1
    }
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check "zizmor==$ZIZMOR_VERSION"
fi

# --pedantic: also report code smells, not only likely vulnerabilities; the workflows are small
# enough to keep clean at that level.
"$zizmor" --offline --pedantic --no-progress --color never .github/workflows
