#!/usr/bin/env bash
# The pin-template action's first step: the verifier binary for this runner from the newest
# release of TEMPLATE_REPOSITORY that carries one, accepted only with a GitHub artifact
# attestation by that repository's release workflow, made by a run of the default branch on a
# GitHub-hosted runner (so whatever it later says about a receipt comes from code that
# workflow built from the branch the release environment protects). Prints `path=<binary>` and
# `source-ref=<ref>` to $GITHUB_OUTPUT.
#
# SOURCE_REF (optional) pins the ref; by default it is `refs/heads/<default branch>` as
# GitHub's API records it for the repository (`gh api repos/R`): only the repository's
# administrators can change that, while whoever can push a branch can dispatch a copy of the
# workflow and have it sign with the same workflow path at another ref. `--signer-workflow`
# alone accepts any ref (cli/cli pkg/cmd/attestation/verify/policy.go,
# signerWorkflowSANPattern), hence `--source-ref` and `--deny-self-hosted-runners`.
set -euo pipefail

case "${RUNNER_OS:?}/${RUNNER_ARCHITECTURE:?}" in
  Linux/X64) asset=template-verify-linux-amd64 ;;
  Linux/ARM64) asset=template-verify-linux-arm64 ;;
  *)
    echo "::error::pin-template runs on Linux X64 or ARM64 runners, not ${RUNNER_OS} ${RUNNER_ARCHITECTURE}"
    exit 1
    ;;
esac
# The signer is named as GitHub's API spells the repository (`full_name`): gh matches
# --signer-workflow case-sensitively, and `uses:` keeps the casing a consumer typed (and a
# former name after a rename or transfer).
read -r full_name branch < <(gh api "repos/${TEMPLATE_REPOSITORY:?}" --jq '"\(.full_name) \(.default_branch)"')
if ! [[ "${full_name:-}" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]]; then
  echo "::error::GitHub's API names no repository for $TEMPLATE_REPOSITORY (got '${full_name:-}')"
  exit 1
fi
signer="$full_name/.github/workflows/update-template.yml"
provenance=https://slsa.dev/provenance/v1
source_ref=${SOURCE_REF:-}
if [ -z "$source_ref" ]; then
  if [ -z "${branch:-}" ] || [ "$branch" = null ]; then
    echo "::error::GitHub's API names no default branch for $TEMPLATE_REPOSITORY"
    exit 1
  fi
  source_ref="refs/heads/$branch"
fi

tags=$(gh release list --repo "$TEMPLATE_REPOSITORY" --exclude-drafts --limit "${MAX_RELEASES:?}" \
  --json tagName,isPrerelease | jq -r '.[] | select(.isPrerelease | not) | .tagName')
for tag in $tags; do
  if ! gh release view "$tag" --repo "$TEMPLATE_REPOSITORY" --json assets \
    | jq -e --arg asset "$asset" 'any(.assets[]; .name == $asset)' > /dev/null; then
    continue
  fi
  dir="${WORK_DIR:?}/verifier/$tag"
  gh release download "$tag" --repo "$TEMPLATE_REPOSITORY" --pattern "$asset" --dir "$dir" --clobber
  digest=$(sha256sum "$dir/$asset" | cut -d' ' -f1)
  # gh's exit status alone is not enough: gh up to 2.66.1 exits 0 when no attestation has the
  # predicate type asked for (cli/cli#10418). So its JSON is read as well: every attestation it
  # returns must be provenance for this file, from source_ref, on a GitHub-hosted runner.
  if ! verified=$(gh attestation verify "$dir/$asset" --repo "$TEMPLATE_REPOSITORY" \
    --signer-workflow "$signer" --source-ref "$source_ref" --deny-self-hosted-runners \
    --predicate-type "$provenance" --format json) \
    || ! jq -e --arg type "$provenance" --arg ref "$source_ref" --arg digest "$digest" '
        length > 0 and all(.[].verificationResult;
          .statement.predicateType == $type
          and any(.statement.subject[]; .digest.sha256 == $digest)
          and (.signature.certificate.sourceRepositoryRef | ascii_downcase) == ($ref | ascii_downcase)
          and .signature.certificate.runnerEnvironment == "github-hosted")' \
      <<< "$verified" > /dev/null; then
    echo "::error::$asset of release $tag is not attested by $signer from $source_ref on a GitHub-hosted runner: refusing to run it"
    exit 1
  fi
  chmod +x "$dir/$asset"
  echo "Verifier: $asset of release $tag, attested by $signer from $source_ref"
  {
    echo "path=$dir/$asset"
    echo "source-ref=$source_ref"
  } >> "$GITHUB_OUTPUT"
  exit 0
done
echo "::error::none of the newest releases of $TEMPLATE_REPOSITORY carries $asset"
exit 1
