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

# shellcheck source=SCRIPTDIR/lib/pinned-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/pinned-tool.sh"
pinned_tool actionlint "$ACTIONLINT_VERSION" "${ACTIONLINT_FORCE:-0}"
# GOFLAGS from the caller must not leak into `go install pkg@version`.
GOBIN="$bin_dir" CGO_ENABLED=0 GOFLAGS=-trimpath GOWORK=off \
  nice -n 10 "$GO" install "$ACTIONLINT_MODULE/cmd/actionlint@$ACTIONLINT_VERSION"
pinned_tool_built
