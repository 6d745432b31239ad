#!/usr/bin/env bash
# Installs Debian's prometheus when it is missing: the remote-write tests write to a real one
# (internal/cli TestRemoteWrite*). Under CI=true a failed install fails the run loudly; elsewhere it warns and
# the remote-write tests skip themselves.
set -uo pipefail

if command -v prometheus >/dev/null; then
  exit 0
fi
echo "prometheus.sh: prometheus is missing; installing Debian's prometheus" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/tmp/loadproof-prometheus-install.log 2>&1 \
  && command -v prometheus >/dev/null; then
  echo "prometheus.sh: installed $(prometheus --version 2>&1 | head -1)" >&2
  exit 0
fi
tail -20 /tmp/loadproof-prometheus-install.log >&2 2>/dev/null || true
if [ "${CI:-}" = "true" ]; then
  echo "prometheus.sh: FAILED to install prometheus; the remote-write tests cannot run (CI=true: failing, not skipping)" >&2
  exit 1
fi
echo "prometheus.sh: could not install prometheus; the remote-write tests will be skipped" >&2
exit 0
