#!/usr/bin/env bash
# Installs the third-party emulators used by the cross-check tests into
# <repo>/.tools/bin, built from source with `go install MODULE@VERSION`
# through the Go module proxy (nothing else is downloaded).
#
#   fake-gcs-server    github.com/fsouza/fake-gcs-server                       (pure Go)
#   bigquery-emulator  github.com/goccy/bigquery-emulator/cmd/bigquery-emulator (pure Go since v0.8:
#                      its SQL engine, googlesqlite, runs GoogleSQL as WebAssembly; v0.6.x and
#                      older needed cgo + a C++ compiler for go-zetasql)
#
# Each binary is skipped when .tools/bin/<name>.version already holds the pinned
# version and the binary exists. Needs Go >= 1.25 (bigquery-emulator v0.8.1's go.mod).
#
# Environment knobs:
#   GO=/path/to/go          go command (default: `go` on PATH, else /usr/local/go/bin/go)
#   EMULATORS_BUILD_P=2     value for `go install -p`
#   EMULATORS_NICE=10       niceness of the build (0 disables nice)
#   EMULATORS_FORCE=1       rebuild even when the stamp matches
#   EMULATORS_ONLY=name     install only that tool (fake-gcs-server | bigquery-emulator)
set -euo pipefail

# Pinned versions. The module proxy reachable here refuses the version list of
# github.com/goccy/bigquery-emulator (403 on @v/list, so @latest fails) but serves
# its exact versions. See list_shim_proxy below for why that matters to go install.
FAKE_GCS_SERVER_VERSION="v1.56.1"
BIGQUERY_EMULATOR_VERSION="v0.8.1"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
bin_dir="$repo_root/.tools/bin"
mkdir -p "$bin_dir"

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then
    GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    GO=/usr/local/go/bin/go
  else
    echo "install-emulators: no go command found (set GO=/path/to/go)" >&2
    exit 1
  fi
fi

build_p="${EMULATORS_BUILD_P:-2}"
nice_level="${EMULATORS_NICE:-10}"
force="${EMULATORS_FORCE:-0}"
only="${EMULATORS_ONLY:-}"

nice_cmd=()
if [[ "$nice_level" != "0" ]] && command -v nice >/dev/null 2>&1; then
  nice_cmd=(nice -n "$nice_level")
fi

echo "install-emulators: $("$GO" version), GOBIN=$bin_dir"

# `go install pkg@version` looks up the module's latest version (@v/list, then that
# version's .info and .mod) to report a deprecation notice, and fails outright when
# the proxy refuses the list:
#   loading deprecation for github.com/goccy/bigquery-emulator: module
#   github.com/goccy/bigquery-emulator: reading .../@v/list: 403 Forbidden
# So for such a module we download the pinned version first (`go mod download`,
# verified against the checksum database as usual) and put a local file:// proxy in
# front of GOPROXY that holds only that module's @v/list (naming the pinned version)
# and the pinned version's .info and .mod. Every other request (other modules, the
# checksum database) is not found there and falls through to the real proxy.
# list_shim_proxy MODULE VERSION -> prints the GOPROXY value to use
list_shim_proxy() {
  local module="$1" version="$2"
  local shim="$repo_root/.tools/goproxy-shim"
  local upstream
  upstream="$("$GO" env GOPROXY)"
  upstream="${upstream:-https://proxy.golang.org,direct}"

  local json info_file mod_file
  json="$(GOFLAGS= GOPROXY="$upstream" "$GO" mod download -json "$module@$version")" || {
    echo "install-emulators: go mod download $module@$version failed:" >&2
    printf '%s\n' "$json" >&2
    return 1
  }
  info_file="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p')"
  mod_file="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  if [[ ! -f "$info_file" || ! -f "$mod_file" ]]; then
    echo "install-emulators: could not find .info/.mod of $module@$version in: $json" >&2
    return 1
  fi
  rm -rf "${shim:?}/$module"
  mkdir -p "$shim/$module/@v"
  printf '%s\n' "$version" >"$shim/$module/@v/list"
  cp "$info_file" "$shim/$module/@v/$version.info"
  cp "$mod_file" "$shim/$module/@v/$version.mod"
  printf 'file://%s,%s' "$shim" "$upstream"
}

# install NAME PACKAGE VERSION CGO_ENABLED [MODULE_NEEDING_LIST_SHIM]
install_tool() {
  local name="$1" pkg="$2" version="$3" cgo="$4" shim_module="${5:-}"
  local bin="$bin_dir/$name" stamp="$bin_dir/$name.version"

  if [[ -n "$only" && "$only" != "$name" ]]; then
    return 0
  fi
  if [[ "$force" != "1" && -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    echo "install-emulators: $name $version already installed ($(du -h "$bin" | cut -f1)), skipping"
    return 0
  fi

  echo "install-emulators: building $name $version ($pkg@$version, CGO_ENABLED=$cgo) ..."
  rm -f "$stamp"
  local start end
  start=$(date +%s)
  local goproxy
  goproxy="$("$GO" env GOPROXY)"
  if [[ -n "$shim_module" ]]; then
    goproxy="$(list_shim_proxy "$shim_module" "$version")" || {
      echo "install-emulators: FAILED to prepare $name $version" >&2
      return 1
    }
  fi
  # GOFLAGS from the caller (e.g. -mod=vendor) must not leak into `go install pkg@version`.
  if ! GOBIN="$bin_dir" CGO_ENABLED="$cgo" GOFLAGS=-trimpath GOWORK=off GOPROXY="$goproxy" \
      "${nice_cmd[@]}" "$GO" install -p "$build_p" "$pkg@$version"; then
    echo "install-emulators: FAILED to build $name $version after $(( $(date +%s) - start ))s" >&2
    return 1
  fi
  end=$(date +%s)
  printf '%s\n' "$version" >"$stamp"
  local size
  size=$(stat -c %s "$bin")
  echo "install-emulators: $name $version built in $((end - start))s, binary $bin is $size bytes ($(du -h "$bin" | cut -f1))"
}

status=0
install_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_SERVER_VERSION" 0 || status=1
install_tool bigquery-emulator github.com/goccy/bigquery-emulator/cmd/bigquery-emulator \
  "$BIGQUERY_EMULATOR_VERSION" 0 github.com/goccy/bigquery-emulator || status=1
exit "$status"
