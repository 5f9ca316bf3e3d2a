#!/usr/bin/env bash
# Checks SBOMs with independent tools, offline. SPDX 2.3 JSON (any file not named *.cdx.json):
#   1. pyspdxtools (spdx-tools, SPDX's own Python validator): the document is valid SPDX 2.3;
#   2. the official SPDX 2.3 JSON schema (spdx/spdx-spec v2.3, schemas/spdx-schema.json, kept
#      beside this script as spdx-2.3.schema.json), through python-jsonschema, as schema-based
#      validators (SPDX's Java tools) check it;
#   3. ntia-conformance-checker: the NTIA minimum elements (name, version, identifier,
#      supplier of every component, relationships, author, timestamp).
# CycloneDX JSON (*.cdx.json): cyclonedx-python-lib's JsonStrictValidator (the CycloneDX
# project's Python library) against the official CycloneDX 1.5 JSON schema it ships (with the
# SPDX license id and JSF schemas it references), the schema's `format`s checked too.
# All of them come from PyPI at pinned versions, installed once into the virtualenv under the
# gitignored .xtask/ directory (as scripts/lint-workflows.sh does). Idempotent: a second run only
# checks the versions. Exits non-zero when any tool rejects any file.
#
# No vulnerability scanner that reads SPDX (trivy, grype) can be installed from the registries
# this project's machines reach (PyPI, npm, crates.io, Debian); the SBOM's scanner-facing fields
# are tested against trivy's reader in the unit tests of xtask/src/image/sbom/.
#
# Usage: scripts/check-sbom.sh FILE.spdx.json|FILE.cdx.json...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."

SPDX_TOOLS_VERSION=0.8.5
NTIA_CHECKER_VERSION=6.0.0
JSONSCHEMA_VERSION=4.26.0
CYCLONEDX_LIB_VERSION=11.12.0
venv=.xtask/venv
python="$venv/bin/python"

[ $# -gt 0 ] || { echo "usage: scripts/check-sbom.sh FILE.spdx.json|FILE.cdx.json..." >&2; exit 2; }

ensure_venv() {
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      echo "check-sbom: python3 -m venv failed; on Debian/Ubuntu: apt-get install -y python3-venv" >&2
      exit 1
    }
  fi
}

installed() { # name version
  "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null
}

# One install at a time: tests run this script from several threads at once, and two
# `python3 -m venv` into one directory fail with EEXIST ("File exists: .xtask/venv").
mkdir -p "$(dirname "$venv")"
exec 9> "$venv.lock"
flock 9
want=()
installed spdx-tools "$SPDX_TOOLS_VERSION" || want+=("spdx-tools==$SPDX_TOOLS_VERSION")
installed ntia-conformance-checker "$NTIA_CHECKER_VERSION" || want+=("ntia-conformance-checker==$NTIA_CHECKER_VERSION")
installed jsonschema "$JSONSCHEMA_VERSION" || want+=("jsonschema==$JSONSCHEMA_VERSION")
# The json-validation extra brings the schema validator's own dependencies (jsonschema with
# its format checkers, referencing); jsonschema stays at the pin above.
installed cyclonedx-python-lib "$CYCLONEDX_LIB_VERSION" \
  || want+=("cyclonedx-python-lib[json-validation]==$CYCLONEDX_LIB_VERSION")
if [ ${#want[@]} -gt 0 ]; then
  echo "check-sbom: installing ${want[*]} into $venv" >&2
  ensure_venv
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${want[@]}"
fi
flock -u 9

status=0
# check VALID INVALID COMMAND...: runs one tool (its stdin is the caller's), prints VALID or
# INVALID with the start of the tool's output, and marks the run failed on INVALID.
check() {
  local valid=$1 invalid=$2
  shift 2
  if "$@" >/tmp/check-sbom.$$ 2>&1; then
    echo "  $valid" >&2
  else
    echo "  $invalid" >&2
    sed 's/^/    /' /tmp/check-sbom.$$ | head -n 40 >&2
    status=1
  fi
}

for file in "$@"; do
  echo "check-sbom: $file" >&2
  if [[ "$file" == *.cdx.json ]]; then
    check "cyclonedx-python-lib $CYCLONEDX_LIB_VERSION: valid CycloneDX 1.5 (strict JSON schema)" \
      "cyclonedx-python-lib $CYCLONEDX_LIB_VERSION: INVALID CycloneDX 1.5" \
      "$python" - "$file" <<'PY'
import json, sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
text = open(sys.argv[1]).read()
version = json.loads(text).get("specVersion")
if version != "1.5":
    print(f"specVersion is {version!r}, not '1.5'")
    sys.exit(1)
errors = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text, all_errors=True)
for e in list(errors or [])[:20]:
    data = getattr(e, "data", None)
    where = "/".join(str(p) for p in getattr(data, "absolute_path", []))
    print(where, getattr(data, "message", e))
sys.exit(1 if errors else 0)
PY
    continue
  fi
  check "pyspdxtools $SPDX_TOOLS_VERSION: valid SPDX" "pyspdxtools $SPDX_TOOLS_VERSION: INVALID" \
    "$venv/bin/pyspdxtools" --infile "$file"
  check "SPDX 2.3 JSON schema: valid" "SPDX 2.3 JSON schema: INVALID" \
    "$python" - "$here/spdx-2.3.schema.json" "$file" <<'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
for e in errors[:20]:
    print("/".join(str(p) for p in e.path), e.message)
sys.exit(1 if errors else 0)
PY
  check "ntia-conformance-checker $NTIA_CHECKER_VERSION: NTIA minimum elements met" \
    "ntia-conformance-checker $NTIA_CHECKER_VERSION: NTIA minimum elements NOT met" \
    "$venv/bin/ntia-checker" --comply ntia --skip-validation "$file"
done
rm -f /tmp/check-sbom.$$
exit "$status"
