#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: the report and dashboard tests draw pages in it
# (internal/report/e2e). Under CI=true a failed install fails the run loudly; elsewhere it warns and
# the browser tests skip themselves.
set -uo pipefail

if command -v chromium >/dev/null || [ -n "${CHROMIUM:-}" ]; then
  exit 0
fi
echo "chromium.sh: chromium is missing; installing Debian's chromium" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/tmp/loadproof-chromium-install.log 2>&1 \
  && command -v chromium >/dev/null; then
  echo "chromium.sh: installed $(chromium --version 2>/dev/null | head -1)" >&2
  exit 0
fi
tail -20 /tmp/loadproof-chromium-install.log >&2 2>/dev/null || true
if [ "${CI:-}" = "true" ]; then
  echo "chromium.sh: FAILED to install chromium; the browser tests cannot run (CI=true: failing, not skipping)" >&2
  exit 1
fi
echo "chromium.sh: could not install chromium; the browser tests will be skipped (set CHROMIUM to a Chrome binary)" >&2
exit 0
