#!/usr/bin/env bash
# Installs the Pulumi CLI into <repo>/.tools/bin, built from source through the Go module proxy, as
# scripts/install-actionlint.sh installs actionlint. Skipped when .tools/bin/pulumi.version already
# holds the pinned version and the binary exists.
#
# `go install github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@VERSION` is refused (pkg/v3's go.mod has
# replace directives), so the CLI is built from a small throwaway module that requires pkg/v3 at the
# pinned version and carries the one replace it needs (github.com/atotto/clipboard, as pkg/v3's own
# go.mod replaces it). The version is stamped in with -ldflags, as Pulumi's release build does.
# About 170 MB; a few minutes cold on 2 cores.
#
# Environment knobs:
#   GO=/path/to/go          go command (default: `go` on PATH, else /usr/local/go/bin/go)
#   PULUMI_FORCE=1          rebuild even when the stamp matches
set -euo pipefail

PULUMI_MODULE="github.com/pulumi/pulumi/pkg/v3"
PULUMI_VERSION="v3.276.0"
CLIPBOARD_REPLACE="github.com/tgummerer/clipboard@v0.0.0-20241001131231-d02d263e614e"

# shellcheck source=SCRIPTDIR/lib/pinned-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/pinned-tool.sh"
pinned_tool pulumi "$PULUMI_VERSION" "${PULUMI_FORCE:-0}"
build_dir="$(mktemp -d)"
trap 'rm -rf "$build_dir"' EXIT
(
  cd "$build_dir"
  # GOFLAGS from the caller must not leak into the build; no workspace either.
  export GOFLAGS=-trimpath GOWORK=off CGO_ENABLED=0
  "$GO" mod init docline.local/pulumi-cli >/dev/null 2>&1
  "$GO" mod edit -replace "github.com/atotto/clipboard=$CLIPBOARD_REPLACE"
  "$GO" get "$PULUMI_MODULE/cmd/pulumi@$PULUMI_VERSION"
  nice -n 10 "$GO" build -o "$bin" \
    -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    "$PULUMI_MODULE/cmd/pulumi"
)
pinned_tool_built
"$bin" version
