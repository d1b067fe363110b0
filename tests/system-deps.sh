#!/usr/bin/env bash
# Installs the Debian packages that tests drive for real, when they are missing:
# chromium (browser tests, never a Playwright download) and nginx-light (proxy tests).
# Needs root (CI runs as root); elsewhere it says what to install and carries on, and the
# tests that need a missing tool skip with that reason (with CI=true they fail instead).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
