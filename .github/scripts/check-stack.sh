#!/usr/bin/env bash
# A stack CI deploys must exist, and name a real project, before the first `pulumi up` from CI:
# CI never creates a stack (a mistyped organization would otherwise start a second, empty prod).
# The one-time step, from a laptop with the Pulumi CLI (docs/deploy.md, "Continuous delivery"):
#   pulumi stack init ORG/docline/STACK
#   set gcp:project in Pulumi.STACK.yaml to the project's id, and commit it through a pull request
#
#   .github/scripts/check-stack.sh STACK ORG/docline/STACK
# Needs the Pulumi CLI on PATH and its token (PULUMI_ACCESS_TOKEN) in the environment.
set -euo pipefail
stack="${1:?usage: check-stack.sh STACK ORG/docline/STACK}"
qualified="${2:?usage: check-stack.sh STACK ORG/docline/STACK}"
file="Pulumi.${stack}.yaml"
problems=()

project="$(sed -n 's/^[[:space:]]*gcp:project:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$file" 2>/dev/null | head -n1)"
if [[ ! -f "$file" ]]; then
  problems+=("$file does not exist: commit the stack's settings first")
elif [[ -z "$project" || "$project" == *-example ]]; then
  problems+=("$file sets gcp:project to '${project}', a placeholder: set the project's id there and commit it")
fi

if ! output="$(pulumi stack output --json --stack "$qualified" 2>&1)"; then
  if grep -qi "no stack named" <<<"$output"; then
    problems+=("the stack $qualified does not exist: run 'pulumi stack init $qualified' once (CI never creates a stack)")
  else
    problems+=("the stack $qualified could not be read: $output")
  fi
fi

if ((${#problems[@]} > 0)); then
  for p in "${problems[@]}"; do
    echo "::error title=stack not ready for CI::$p (docs/deploy.md, \"Continuous delivery\", first deploy)"
  done
  exit 1
fi
echo "stack $qualified exists; $file deploys project $project"
