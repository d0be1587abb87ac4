# Sourced by scripts/start and scripts/test: the virtualenv and the local PostgreSQL and Redis.
# Functions only; nothing runs on source.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

ensure_venv() {  # ensure_venv EXTRAS: create .venv and install the project (pip is idempotent)
    local extras="$1"
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet --upgrade pip
    fi
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -e "$ROOT$extras" \
        -e "$ROOT/sdk/python"
}

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

start_postgres() {  # start the local cluster if it is installed and down; 0 when it answers
    postgres_up && return 0
    command -v pg_ctlcluster >/dev/null || return 1
    local version
    version="$(ls /etc/postgresql 2>/dev/null | head -n 1)"
    [ -n "$version" ] || return 1
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || return 1
    for _ in $(seq 1 30); do postgres_up && return 0; sleep 1; done
    return 1
}

start_redis() {  # start a local redis-server if it is installed and down; 0 when it answers
    redis_up && return 0
    command -v redis-server >/dev/null || return 1
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || return 1
    for _ in $(seq 1 30); do redis_up && return 0; sleep 1; done
    return 1
}

create_database() {  # create_database NAME: create it on the local PostgreSQL if missing
    local name="$1"
    if ! psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$name'" \
        | grep -q 1; then
        psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE \"$name\""
    fi
}
