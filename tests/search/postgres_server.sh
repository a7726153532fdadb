#!/usr/bin/env bash
# A throwaway PostgreSQL server for the results-database tests.
#
#   tests/search/postgres_server.sh start   # prints the URL on stdout (logs go to stderr)
#   tests/search/postgres_server.sh stop    # stops the server and deletes its files
#   tests/search/postgres_server.sh url     # prints the URL of the running server
#
# Typical use (.ci/run):
#   export LLMCAP_TEST_POSTGRES_URL="$(tests/search/postgres_server.sh start)"
#   trap 'tests/search/postgres_server.sh stop' EXIT
#
# The cluster lives in $LLMCAP_PG_DIR (default: ${TMPDIR:-/tmp}/llmcap-test-postgres-$UID),
# listens on 127.0.0.1 only, on a free port, with a unix socket inside that directory.
# Both commands are idempotent: `start` with a server already running prints its URL again,
# `start` after a crash cleans up and starts afresh, `stop` with nothing running does nothing.
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` system user
# (or $LLMCAP_PG_USER). Needs the PostgreSQL server binaries (apt-get install postgresql).
set -euo pipefail

STATE_DIR="${LLMCAP_PG_DIR:-${TMPDIR:-/tmp}/llmcap-test-postgres-$(id -u)}"
DATA_DIR="$STATE_DIR/data"
SOCKET_DIR="$STATE_DIR/socket"
LOG_FILE="$STATE_DIR/server.log"
URL_FILE="$STATE_DIR/url"
PORT_FILE="$STATE_DIR/port"
DB_USER="llmcap"
DB_PASSWORD="llmcap-test"
DB_NAME="llmcap_test"

log() { echo "postgres_server: $*" >&2; }
die() { log "$*"; exit 1; }

find_bindir() {
    local candidate
    if [[ -n "${PG_BINDIR:-}" && -x "$PG_BINDIR/pg_ctl" ]]; then echo "$PG_BINDIR"; return; fi
    # the newest version under /usr/lib/postgresql (Debian/Ubuntu), then pg_config, then PATH
    candidate="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$candidate" && -x "$candidate/initdb" ]]; then echo "$candidate"; return; fi
    if command -v pg_config >/dev/null 2>&1; then
        candidate="$(pg_config --bindir)"
        if [[ -x "$candidate/initdb" ]]; then echo "$candidate"; return; fi
    fi
    if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
    return 1
}

# run a command as the user that owns the cluster
RUN_AS=()
choose_user() {
    if [[ "$(id -u)" -ne 0 ]]; then RUN_AS=(); return; fi
    local user="${LLMCAP_PG_USER:-postgres}"
    id -u "$user" >/dev/null 2>&1 || die "running as root, and there is no '$user' user to run PostgreSQL as (set LLMCAP_PG_USER to an unprivileged user)"
    if command -v runuser >/dev/null 2>&1; then
        RUN_AS=(runuser -u "$user" --)
    elif command -v setpriv >/dev/null 2>&1; then
        RUN_AS=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --)
    else
        RUN_AS=(su "$user" -s /bin/sh -c '"$0" "$@"')
    fi
    PG_OWNER="$user"
}

as_owner() { if ((${#RUN_AS[@]})); then "${RUN_AS[@]}" "$@"; else "$@"; fi; }

free_port() {
    python3 - <<'PY'
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
PY
}

# running = the postmaster is alive (pg_ctl status) and answers on its port (pg_isready): a
# killed server can leave a pid file, or a zombie that pg_ctl still counts as alive
is_running() {
    [[ -n "$BINDIR" && -f "$DATA_DIR/postmaster.pid" && -f "$PORT_FILE" ]] || return 1
    as_owner "$BINDIR/pg_ctl" -D "$DATA_DIR" status >/dev/null 2>&1 || return 1
    "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$(cat "$PORT_FILE")" -t 5 >/dev/null 2>&1
}

cleanup_files() {
    rm -rf "$STATE_DIR"
}

start() {
    [[ -n "$BINDIR" ]] || die "PostgreSQL server binaries (initdb, pg_ctl) not found: install them (apt-get install -y postgresql) or set PG_BINDIR"
    if [[ -f "$URL_FILE" ]] && is_running; then
        log "already running"
        cat "$URL_FILE"
        return
    fi
    if [[ -e "$STATE_DIR" ]]; then
        log "removing a stale cluster in $STATE_DIR"
        as_owner "$BINDIR/pg_ctl" -D "$DATA_DIR" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
        cleanup_files
    fi
    mkdir -p "$STATE_DIR"
    chmod 700 "$STATE_DIR"
    mkdir -p "$SOCKET_DIR"
    local pwfile="$STATE_DIR/pwfile"
    printf '%s\n' "$DB_PASSWORD" >"$pwfile"
    if [[ -n "${PG_OWNER:-}" ]]; then chown -R "$PG_OWNER" "$STATE_DIR"; fi

    as_owner "$BINDIR/initdb" -D "$DATA_DIR" --username="$DB_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --no-locale \
        >"$STATE_DIR/initdb.log" 2>&1 || { cat "$STATE_DIR/initdb.log" >&2; die "initdb failed"; }
    rm -f "$pwfile"

    local attempt port=""
    for attempt in 1 2 3 4 5; do
        port="$(free_port)"
        if as_owner "$BINDIR/pg_ctl" -D "$DATA_DIR" -l "$LOG_FILE" -w -t 60 \
            -o "-p $port -k $SOCKET_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null 2>&1; then
            break
        fi
        log "start on port $port failed (attempt $attempt)"
        port=""
    done
    if [[ -z "$port" ]]; then
        tail -n 20 "$LOG_FILE" >&2 || true
        die "could not start PostgreSQL"
    fi

    as_owner "$BINDIR/createdb" -h "$SOCKET_DIR" -p "$port" -U "$DB_USER" "$DB_NAME" \
        || die "createdb failed"
    local url="postgresql+psycopg://$DB_USER:$DB_PASSWORD@127.0.0.1:$port/$DB_NAME"
    printf '%s\n' "$port" >"$PORT_FILE"
    printf '%s\n' "$url" >"$URL_FILE"
    log "PostgreSQL $("$BINDIR/pg_ctl" --version | awk '{print $3}') running on 127.0.0.1:$port (data in $DATA_DIR)"
    echo "$url"
}

stop() {
    if [[ ! -e "$STATE_DIR" ]]; then
        log "not running"
        return
    fi
    if [[ -n "$BINDIR" && -d "$DATA_DIR" ]]; then
        as_owner "$BINDIR/pg_ctl" -D "$DATA_DIR" -m fast -w -t 60 stop >/dev/null 2>&1 || true
    fi
    cleanup_files
    log "stopped and removed $STATE_DIR"
}

BINDIR="$(find_bindir)" || BINDIR=""
PG_OWNER=""
choose_user

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url)
        if [[ -f "$URL_FILE" ]] && is_running; then cat "$URL_FILE"; else die "not running"; fi
        ;;
    *)
        echo "usage: $0 start|stop|url" >&2
        exit 2
        ;;
esac
