#!/usr/bin/env bash
# Installs actionlint, the GitHub Actions workflow linter, into <repo>/.tools/bin, built from source
# with `go install MODULE@VERSION` through the Go module proxy, as scripts/install-emulators.sh
# installs the emulators. Skipped when .tools/bin/actionlint.version already holds the pinned
# version and the binary exists. `.ci/run` runs it, then `.tools/bin/actionlint` on .github/workflows.
#
# actionlint calls shellcheck on every `run:` script when shellcheck is on PATH, and skips that
# check otherwise; the workflows are written to pass it either way.
#
# Environment knobs:
#   GO=/path/to/go          go command (default: `go` on PATH, else /usr/local/go/bin/go)
#   ACTIONLINT_FORCE=1      rebuild even when the stamp matches
set -euo pipefail

ACTIONLINT_MODULE="github.com/rhysd/actionlint"
ACTIONLINT_VERSION="v1.7.12"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
bin_dir="$repo_root/.tools/bin"
bin="$bin_dir/actionlint"
stamp="$bin_dir/actionlint.version"
mkdir -p "$bin_dir"

# shellcheck source=SCRIPTDIR/lib/find-go.sh
source "$script_dir/lib/find-go.sh"
find_go install-actionlint

if [[ "${ACTIONLINT_FORCE:-0}" != "1" && -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$ACTIONLINT_VERSION" ]]; then
  echo "install-actionlint: actionlint $ACTIONLINT_VERSION already installed, skipping"
  exit 0
fi

echo "install-actionlint: building actionlint $ACTIONLINT_VERSION with $("$GO" version) ..."
rm -f "$stamp"
start=$(date +%s)
# GOFLAGS from the caller must not leak into `go install pkg@version`.
GOBIN="$bin_dir" CGO_ENABLED=0 GOFLAGS=-trimpath GOWORK=off \
  nice -n 10 "$GO" install "$ACTIONLINT_MODULE/cmd/actionlint@$ACTIONLINT_VERSION"
printf '%s\n' "$ACTIONLINT_VERSION" >"$stamp"
echo "install-actionlint: actionlint $ACTIONLINT_VERSION built in $(( $(date +%s) - start ))s ($(du -h "$bin" | cut -f1))"
