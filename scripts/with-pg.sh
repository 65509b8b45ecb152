#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster for the tests: BUZZ_TEST_DATABASE_URL points
# at an empty database in it. The cluster lives in a temp dir, listens on 127.0.0.1 on a port of
# its own (and a unix socket in that dir), and is stopped and removed when the command ends,
# whatever happens. With BUZZ_TEST_DATABASE_URL already set the command just runs against it.
#
#   scripts/with-pg.sh go test ./internal/relay/...
#
# Installs Debian's postgresql when no initdb is found and we are root with apt-get.
set -euo pipefail

if [ "$#" = 0 ]; then
  echo "usage: $0 command [args...]" >&2
  exit 2
fi
if [ -n "${BUZZ_TEST_DATABASE_URL:-}" ]; then
  exec "$@"
fi

find_bin() {
  if command -v initdb >/dev/null 2>&1; then
    # Resolve symlinks: createdb and pg_ctl live beside the real initdb.
    dirname "$(readlink -f "$(command -v initdb)")"
    return
  fi
  # Debian keeps the server binaries off PATH, one dir per major version; take the newest.
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

bin=$(find_bin || true)
if [ -z "$bin" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "with-pg: installing postgresql" >&2
    for try in 1 2 3; do # a mirror hiccup should not fail the run
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null && break
      [ "$try" = 3 ] && exit 1
      sleep $((try * 5))
    done
    bin=$(find_bin)
  else
    echo "with-pg: no PostgreSQL (initdb) found and cannot install it here; PostgreSQL tests will skip (and fail under CI=true)" >&2
    exec "$@"
  fi
fi

dir=$(mktemp -d /tmp/buzz-pg.XXXXXX)
# PostgreSQL refuses to run as root: run the server as the postgres user, in a dir it owns.
as=()
dbuser=$(id -un)
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir "$dir" --shell /usr/sbin/nologin postgres
  chown postgres "$dir"
  as=(runuser -u postgres --)
  dbuser=postgres
fi

cleanup() {
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U "$dbuser" -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }

# A random port, retried when taken. fsync off: the data is thrown away anyway.
port=""
for try in 1 2 3 4 5; do
  p=$((20000 + RANDOM % 40000))
  if "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $p -k $dir -F -c max_connections=200" start >/dev/null; then
    port=$p
    break
  fi
done
if [ -z "$port" ]; then
  echo "with-pg: PostgreSQL did not start:" >&2
  tail -n 20 "$dir/server.log" >&2
  exit 1
fi

"${as[@]}" "$bin/createdb" -h "$dir" -p "$port" -U "$dbuser" buzz_test
export BUZZ_TEST_DATABASE_URL="postgres://$dbuser@127.0.0.1:$port/buzz_test?sslmode=disable"
echo "with-pg: PostgreSQL on 127.0.0.1:$port" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
