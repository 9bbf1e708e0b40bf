#!/usr/bin/env bash
# The pack that judges a pull request's preview must be the base branch's, untouched by the pull
# request. The pull request's tree is installed first, with its lifecycle scripts off; the base
# branch is then checked out outside the workspace (so Node's module lookup from the pack never
# climbs into the pull request's node_modules) and installed with scripts off too. This script:
#
#   record DIR   fails unless DIR is the base commit (BASE_SHA) with no file changed or added, and
#                @pulumi/policy resolves from DIR/policies inside DIR/node_modules (not shadowed by a
#                nearer or a farther copy); then prints fingerprint=HASH of every file under DIR
#                (node_modules included) for $GITHUB_OUTPUT;
#   verify DIR   after the preview, fails unless DIR still has that fingerprint (EXPECTED): the pull
#                request's program, which runs during the preview, did not rewrite the pack.
#
# What it cannot close: the pack and the pull request's program run on the same runner as the same
# user. Server-side enforcement (a policy group in Pulumi Cloud, docs/deploy.md) decides which pack
# version runs; the deploy on main, whose code is all reviewed, is the gate that changes a stack.
set -euo pipefail
mode="${1:?usage: check-policy-base.sh record|verify DIR}"
dir="${2:?usage: check-policy-base.sh record|verify DIR}"

fingerprint() {
  (cd "$dir" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
    sha256sum | cut -d' ' -f1
}

fail() {
  echo "::error title=policy pack not the base branch's::$1"
  exit 1
}

case "$mode" in
  record)
    head="$(git -C "$dir" rev-parse HEAD)"
    [[ "$head" == "${BASE_SHA:?BASE_SHA is not set}" ]] || fail "$dir is at $head, not the base commit $BASE_SHA"
    changed="$(git -C "$dir" status --porcelain --untracked-files=all)"
    [[ -z "$changed" ]] || fail "$dir differs from the base commit: $changed"
    resolved="$(cd "$dir/policies" && node -p "require.resolve('@pulumi/policy')")"
    real_dir="$(cd "$dir" && pwd -P)"
    [[ "$(realpath "$resolved")" == "$real_dir/node_modules/@pulumi/policy/"* ]] ||
      fail "@pulumi/policy resolves to $resolved, outside $dir/node_modules"
    echo "fingerprint=$(fingerprint)"
    ;;
  verify)
    now="$(fingerprint)"
    [[ "$now" == "${EXPECTED:?EXPECTED is not set}" ]] || fail "$dir changed during the preview ($EXPECTED -> $now)"
    echo "the base branch's pack is unchanged"
    ;;
  *)
    echo "usage: check-policy-base.sh record|verify DIR" >&2
    exit 2
    ;;
esac
