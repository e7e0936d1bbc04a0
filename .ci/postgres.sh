#!/bin/sh
# Install Debian's PostgreSQL server (initdb, pg_ctl) for the storage tests, if it is missing.
# Quiet, and tolerant: without root or apt-get it says so and exits 0 (the tests then skip with a
# reason). The tests start their own throw-away cluster; nothing here starts a server.
set -u
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
    echo "postgres.sh: PostgreSQL server binaries already present"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "postgres.sh: no apt-get; install PostgreSQL by hand to run the PostgreSQL storage tests"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "postgres.sh: not root and no password-less sudo; PostgreSQL tests will be skipped"
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || true
if $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1; then
    echo "postgres.sh: installed $(ls -d /usr/lib/postgresql/*/bin | head -n 1)"
else
    echo "postgres.sh: apt-get install postgresql failed; PostgreSQL tests will be skipped"
fi
exit 0
