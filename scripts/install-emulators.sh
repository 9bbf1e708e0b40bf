#!/usr/bin/env bash
# Installs the third-party emulators used by the cross-check tests into
# <repo>/.tools: the Go ones into .tools/bin, built from source with
# `go install MODULE@VERSION` through the Go module proxy; ZetaSQL into
# .tools/zetasql with `npm install` of one pinned package (nothing else is downloaded).
#
#   fake-gcs-server    github.com/fsouza/fake-gcs-server                       (pure Go)
#   bigquery-emulator  github.com/goccy/bigquery-emulator/cmd/bigquery-emulator (pure Go since v0.8:
#                      its SQL engine, googlesqlite, runs GoogleSQL as WebAssembly; v0.6.x and
#                      older needed cgo + a C++ compiler for go-zetasql)
#
# Each binary is skipped when .tools/bin/<name>.version already holds the pinned
# version and the binary exists. Needs Go >= 1.25 (bigquery-emulator v0.8.1's go.mod).
#
#   zetasql            @fivetrandevelopers/zetasql (npm): ZetaSQL, the open-source GoogleSQL
#                      analyzer, as a prebuilt gRPC server (lib/zetasql/remote_server.so, linux
#                      x86-64, ~110 MB) plus its Node client. Installed with npm into
#                      .tools/zetasql (never a package.json dependency, install scripts off) and
#                      skipped when .tools/zetasql/.version holds the pinned version. Used by the
#                      emulator suite to analyse every statement docline sends to BigQuery.
#
# Environment knobs:
#   GO=/path/to/go          go command (default: `go` on PATH, else /usr/local/go/bin/go)
#   EMULATORS_BUILD_P=2     value for `go install -p`
#   EMULATORS_NICE=10       niceness of the build (0 disables nice)
#   EMULATORS_FORCE=1       rebuild even when the stamp matches
#   EMULATORS_ONLY=name     install only that tool (fake-gcs-server | bigquery-emulator | zetasql)
#   NPM=/path/to/npm        npm command for zetasql (default: `npm` on PATH; the npm scripts put
#                           node_modules/.bin first, so it runs on the project's Node 22)
set -euo pipefail

# Pinned versions. The module proxy reachable here refuses the version list of
# github.com/goccy/bigquery-emulator (403 on @v/list, so @latest fails) but serves
# its exact versions. See list_shim_proxy below for why that matters to go install.
FAKE_GCS_SERVER_VERSION="v1.56.1"
BIGQUERY_EMULATOR_VERSION="v0.8.1"
ZETASQL_PACKAGE="@fivetrandevelopers/zetasql"
ZETASQL_VERSION="1.13.0"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
bin_dir="$repo_root/.tools/bin"
mkdir -p "$bin_dir"

# shellcheck source=SCRIPTDIR/lib/find-go.sh
source "$script_dir/lib/find-go.sh"
find_go install-emulators

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

# install_zetasql: the npm package into .tools/zetasql, stamped with its version.
install_zetasql() {
  local name=zetasql
  local dir="$repo_root/.tools/zetasql"
  local stamp="$dir/.version"
  local server="$dir/node_modules/$ZETASQL_PACKAGE/lib/zetasql/remote_server.so"

  if [[ -n "$only" && "$only" != "$name" ]]; then
    return 0
  fi
  if [[ "$force" != "1" && -f "$server" && -f "$stamp" && "$(cat "$stamp")" == "$ZETASQL_VERSION" ]]; then
    echo "install-emulators: $name $ZETASQL_VERSION already installed ($(du -sh "$dir" | cut -f1)), skipping"
    return 0
  fi
  local npm="${NPM:-}"
  if [[ -z "$npm" ]]; then
    if ! npm="$(command -v npm)"; then
      echo "install-emulators: no npm command found (set NPM=/path/to/npm)" >&2
      return 1
    fi
  fi

  echo "install-emulators: installing $name $ZETASQL_VERSION ($ZETASQL_PACKAGE@$ZETASQL_VERSION with node $(node --version 2>/dev/null || echo '?')) ..."
  rm -f "$stamp"
  # A clean tree each time: npm would keep a half-pruned or older copy as "up to date".
  rm -rf "${dir:?}/node_modules"
  mkdir -p "$dir"
  local start
  start=$(date +%s)
  # --ignore-scripts: the package needs no build step (the server ships prebuilt); --no-save and
  # the prefix keep it out of the project's package.json and node_modules.
  if ! "$npm" install --prefix "$dir" --no-save --no-audit --no-fund --ignore-scripts \
      "$ZETASQL_PACKAGE@$ZETASQL_VERSION"; then
    echo "install-emulators: FAILED to install $name $ZETASQL_VERSION after $(( $(date +%s) - start ))s" >&2
    return 1
  fi
  if [[ ! -f "$server" ]]; then
    echo "install-emulators: $ZETASQL_PACKAGE@$ZETASQL_VERSION has no $server (linux x86-64 only)" >&2
    return 1
  fi
  # The package carries the servers of four platforms (~340 MB); only linux x86-64 runs here.
  rm -f "${server%.so}" "${server%.so}_arm" "${server%.so}_arm.so"
  chmod +x "$server"
  printf '%s\n' "$ZETASQL_VERSION" >"$stamp"
  echo "install-emulators: $name $ZETASQL_VERSION installed in $(( $(date +%s) - start ))s, $dir is $(du -sb "$dir" | cut -f1) bytes ($(du -sh "$dir" | cut -f1))"
}

status=0
install_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_SERVER_VERSION" 0 || status=1
install_tool bigquery-emulator github.com/goccy/bigquery-emulator/cmd/bigquery-emulator \
  "$BIGQUERY_EMULATOR_VERSION" 0 github.com/goccy/bigquery-emulator || status=1
install_zetasql || status=1
exit "$status"
