#!/usr/bin/env bash
# The pin-template action's first step: the verifier binary for this runner from the newest
# release of TEMPLATE_REPOSITORY that carries one, accepted only with a GitHub artifact
# attestation by that repository's release workflow (so whatever it later says about a
# receipt comes from code that workflow built). Prints `path=<binary>` to $GITHUB_OUTPUT.
set -euo pipefail

case "${RUNNER_ARCHITECTURE:?}" in
  X64) asset=template-verify-linux-amd64 ;;
  ARM64) asset=template-verify-linux-arm64 ;;
  *)
    echo "::error::pin-template runs on Linux X64 or ARM64 runners, not ${RUNNER_ARCHITECTURE}"
    exit 1
    ;;
esac
signer="${TEMPLATE_REPOSITORY:?}/.github/workflows/update-template.yml"

tags=$(gh release list --repo "$TEMPLATE_REPOSITORY" --exclude-drafts --limit "${MAX_RELEASES:?}" \
  --json tagName,isPrerelease | jq -r '.[] | select(.isPrerelease | not) | .tagName')
for tag in $tags; do
  if ! gh release view "$tag" --repo "$TEMPLATE_REPOSITORY" --json assets \
    | jq -e --arg asset "$asset" 'any(.assets[]; .name == $asset)' > /dev/null; then
    continue
  fi
  dir="${WORK_DIR:?}/verifier/$tag"
  gh release download "$tag" --repo "$TEMPLATE_REPOSITORY" --pattern "$asset" --dir "$dir" --clobber
  if ! gh attestation verify "$dir/$asset" --repo "$TEMPLATE_REPOSITORY" --signer-workflow "$signer"; then
    echo "::error::$asset of release $tag is not attested by $signer: refusing to run it"
    exit 1
  fi
  chmod +x "$dir/$asset"
  echo "Verifier: $asset of release $tag, attested by $signer"
  echo "path=$dir/$asset" >> "$GITHUB_OUTPUT"
  exit 0
done
echo "::error::none of the newest releases of $TEMPLATE_REPOSITORY carries $asset"
exit 1
