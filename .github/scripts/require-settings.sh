#!/usr/bin/env bash
# Fails the job, naming every missing setting, when one of the named environment variables is empty.
# The workflows map each repository or environment variable they need into the step's environment
# under its own name, then call this first: an unset variable never becomes an empty argument that a
# later step would read as "use the default" (another environment's stack, project or identity).
#
#   .github/scripts/require-settings.sh NAME...
set -euo pipefail
missing=()
for name in "$@"; do
  if [[ -z "${!name:-}" ]]; then
    missing+=("$name")
  fi
done
if ((${#missing[@]} > 0)); then
  for name in "${missing[@]}"; do
    echo "::error title=setting not set::vars.${name} is not set (Settings → Secrets and variables → Actions, or the job's environment); see docs/deploy.md, \"Continuous delivery\"."
  done
  exit 1
fi
echo "settings present: $*"
