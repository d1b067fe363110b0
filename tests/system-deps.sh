#!/usr/bin/env bash
# Everything the tests drive for real that pip does not install:
#  - Debian packages: chromium (browser tests; never a Playwright download), nginx-light
#    (proxy tests), nodejs/npm (SPA unit tests, the Node.js OTLP and AG-UI clients,
#    LangGraph's JavaScript SDK);
#  - the npm packages of the Node.js test clients, from their lock files (npm ci);
#  - Redis and PostgreSQL must answer on 127.0.0.1 (this machine kind starts them; if one
#    is down and this is root, it is started the way the machine starts it).
# Needs root for apt (CI runs as root); elsewhere it says what to install and carries on,
# and the tests that need a missing tool skip with that reason (with CI=true they fail).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "system-deps: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  else
    echo "system-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# the Node.js test clients, exactly as locked
for dir in tests/interop/node tests/interop/agui tests/interop/langgraph_js; do
  if [ -f "$dir/package-lock.json" ] && command -v npm >/dev/null 2>&1; then
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
  fi
done

# the services the backend tests talk to
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && command -v redis-server >/dev/null; then
  echo "system-deps: starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --logfile /tmp/redis-ci.log || true
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && command -v pg_ctlcluster >/dev/null \
    && [ "$(id -u)" -eq 0 ]; then
  echo "system-deps: starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
