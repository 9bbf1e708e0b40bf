# shellcheck shell=bash
# Sourced by the install scripts: sets GO to the go command (GO from the environment, else `go` on
# PATH, else /usr/local/go/bin/go), or exits naming the caller ($1) when there is none.
find_go() {
  GO="${GO:-}"
  if [[ -z "$GO" ]]; then
    if command -v go >/dev/null 2>&1; then
      GO="$(command -v go)"
    elif [[ -x /usr/local/go/bin/go ]]; then
      GO=/usr/local/go/bin/go
    else
      echo "$1: no go command found (set GO=/path/to/go)" >&2
      exit 1
    fi
  fi
}
