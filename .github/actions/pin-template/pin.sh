#!/usr/bin/env bash
# The pin-template action's second step: runs the attested verifier's `consume` with the ref
# the first step settled on (SOURCE_REF), so both steps hold every attestation to one ref.
#
# With registry credentials (a private image), they must reach `gh attestation verify
# oci://…` as well as the verifier's own registry check: gh resolves an oci:// subject through
# the docker config keychain only (no environment variables), so a docker config holding just
# that registry's entry is written under the job's temp dir and named by DOCKER_CONFIG for
# this step alone; the verifier reads it too ($DOCKER_CONFIG/config.json) besides
# XTASK_REGISTRY_USERNAME/XTASK_REGISTRY_PASSWORD.
set -euo pipefail

if [ -n "${XTASK_REGISTRY_USERNAME:-}" ]; then
  export DOCKER_CONFIG="${WORK_DIR:?}/docker-config"
  mkdir -p "$DOCKER_CONFIG"
  chmod 700 "$DOCKER_CONFIG"
  auth=$(printf '%s:%s' "$XTASK_REGISTRY_USERNAME" "${XTASK_REGISTRY_PASSWORD:?registry-password is needed with registry-username}" | base64 -w0)
  (umask 077 && jq -n --arg registry "${REGISTRY:?}" --arg auth "$auth" \
    '{auths: {($registry): {auth: $auth}}}' > "$DOCKER_CONFIG/config.json")
fi

# The input is a string; anything but the two words is refused rather than read as either.
case "${REQUIRE_VERIFIED_INPUTS:-false}" in
  true) require_verified_inputs=(--require-verified-inputs) ;;
  false) require_verified_inputs=() ;;
  *)
    echo "::error::pin-template: require-verified-inputs is '$REQUIRE_VERIFIED_INPUTS'; write true or false"
    exit 1
    ;;
esac

# Whose verdict on the attestations counts (consume --attestations). The native verifier needs
# the trusted roots: `gh attestation trusted-root` prints Sigstore's public-good root and
# GitHub's as JSON lines (gh as transport only: the verifier checks every bundle itself). Its
# bundles are the release's own `*.sigstore.json` assets, downloaded with the release, so
# GitHub's attestation API is not asked.
mode="${ATTESTATIONS:-both}"
case "$mode" in
  gh) attestations=(--attestations gh) ;;
  native | both)
    trusted_root="$WORK_DIR/trusted-root.jsonl"
    if ! gh attestation trusted-root > "$trusted_root"; then
      echo "::error::pin-template: \`gh attestation trusted-root\` failed (its error is above); with attestations: gh the step needs no trusted root"
      exit 1
    fi
    attestations=(--attestations "$mode" --trusted-root "$trusted_root" --bundles-from-release)
    ;;
  *)
    echo "::error::pin-template: attestations is '$mode'; write gh, native or both"
    exit 1
    ;;
esac
exec "${VERIFIER:?}" consume --repository "${TEMPLATE_REPOSITORY:?}" --template "${TEMPLATE_FILE:?}" \
  --work-dir "$WORK_DIR/releases" --max-releases "${MAX_RELEASES:?}" --source-ref "${SOURCE_REF:?}" \
  "${require_verified_inputs[@]}" "${attestations[@]}"
