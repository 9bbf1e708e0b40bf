#!/usr/bin/env bash
# Installs Debian's Chromium (the `chromium` package) for the review page's browser test
# (`npm run test:browser`, local/test/review-page.browser.test.ts), which drives it headless with
# playwright-core. Skipped when /usr/bin/chromium already runs. Needs root (or sudo) and the
# machine's Debian package sources; nothing is downloaded by playwright itself.
#
# Environment knobs:
#   CHROMIUM_FORCE=1   reinstall even when /usr/bin/chromium runs
set -euo pipefail

bin=/usr/bin/chromium
if [[ "${CHROMIUM_FORCE:-0}" != "1" && -x "$bin" ]] && "$bin" --headless --no-sandbox --version >/dev/null 2>&1; then
  echo "install-chromium: $("$bin" --version) already installed, skipping"
  exit 0
fi

sudo=()
if [[ "$(id -u)" != "0" ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-chromium: not root and no sudo: run 'apt-get install -y chromium' as root" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "install-chromium: $("$bin" --version) installed"
