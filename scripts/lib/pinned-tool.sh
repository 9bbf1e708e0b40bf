# shellcheck shell=bash
# Sourced by the install scripts that build one pinned Go tool into <repo>/.tools/bin.
#
#   pinned_tool NAME VERSION FORCE   sets GO, bin_dir, bin (.tools/bin/NAME) and stamp
#                                    (.tools/bin/NAME.version); exits the script when the stamp
#                                    already holds VERSION and the binary exists (unless FORCE is 1);
#                                    otherwise clears the stamp and says what it builds.
#   pinned_tool_built                writes the stamp and says how long the build took.
#
# The stamp is written only after a build succeeds, so a build cut short is redone next time.

# shellcheck source=SCRIPTDIR/find-go.sh
source "$(dirname "${BASH_SOURCE[0]}")/find-go.sh"

pinned_tool() {
  tool_name="$1"
  tool_version="$2"
  bin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.tools/bin"
  bin="$bin_dir/$tool_name"
  stamp="$bin_dir/$tool_name.version"
  mkdir -p "$bin_dir"
  find_go "install-$tool_name"
  if [[ "$3" != "1" && -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$tool_version" ]]; then
    echo "install-$tool_name: $tool_name $tool_version already installed, skipping"
    exit 0
  fi
  echo "install-$tool_name: building $tool_name $tool_version with $("$GO" version) ..."
  rm -f "$stamp"
  tool_start=$(date +%s)
}

pinned_tool_built() {
  printf '%s\n' "$tool_version" >"$stamp"
  echo "install-$tool_name: $tool_name $tool_version built in $(($(date +%s) - tool_start))s ($(du -h "$bin" | cut -f1))"
}
