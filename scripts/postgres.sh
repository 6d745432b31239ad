#!/usr/bin/env bash
# Make sure the local PostgreSQL (127.0.0.1:5432, trust auth, database "test") is up for the Keycast
# store tests. Starts the Debian cluster when it is installed but down; installs it when absent and we
# are root (CI machines). Set KEYCAST_TEST_DATABASE_URL to use another server.
set -euo pipefail
if [ -n "${KEYCAST_TEST_DATABASE_URL:-}" ]; then exit 0; fi
ready() { command -v pg_isready >/dev/null && pg_isready -h 127.0.0.1 -p 5432 -q; }
if ready; then exit 0; fi
if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "postgres.sh: installing PostgreSQL from Debian packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    ver=$(ls /etc/postgresql | head -n1)
    sed -i -E 's/^(local|host)(\s+\S+\s+\S+.*\s)(peer|md5|scram-sha-256)$/\1\2trust/' "/etc/postgresql/$ver/main/pg_hba.conf"
  else
    echo "postgres.sh: PostgreSQL is not installed and cannot be installed here; PostgreSQL tests will fail in CI and skip elsewhere" >&2
    exit 0
  fi
fi
ver=$(ls /etc/postgresql | head -n1)
echo "postgres.sh: starting PostgreSQL $ver"
pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
for _ in $(seq 1 50); do ready && break; sleep 0.2; done
ready || { echo "postgres.sh: PostgreSQL did not come up on 127.0.0.1:5432" >&2; exit 1; }
psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE test" >/dev/null
