# Sourced by the benchmarks that run against PostgreSQL (bench/micro/pg_commit.sh,
# bench/oo/oo1/pg_store.sh): `start_pg_server TEMPLATE` starts a server of
# their own in a new directory made from the mktemp TEMPLATE (initdb and
# pg_ctl, as the postgres user when run as root; fsync on, as in production),
# on a Unix socket, or with DELAY_MS=X on TCP behind
# build/oo/bench/oo/delay_proxy (bench/oo/harness/delay_proxy.cpp), which
# holds each direction X ms (0.25 gives a 0.5 ms round trip), and with
# RATE_MBIT=R also paces each direction to R Mbit/s. The server and the proxy
# stop on exit; KEEP=1 keeps the directory.
# Sets bin, dir, port, as_pg and url (the server and database; `url_with
# PARAMS` adds URL parameters to it).
start_pg_server() {
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  dir=$(mktemp -d "$1")
  chmod 755 "$dir"
  as_pg=()
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
  port=$((20000 + $$ % 20000))
  "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U steppe --no-sync >/dev/null
  local listen=""
  [ -n "${DELAY_MS:-}" ] && listen=127.0.0.1
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses=$listen -p $port" -l "$dir/log" -w start >/dev/null
  proxy=""
  trap '[ -n "$proxy" ] && kill $proxy; "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
  url="postgresql:///postgres?host=$dir&port=$port&user=steppe"
  if [ -n "${DELAY_MS:-}" ]; then
    build/oo/bench/oo/delay_proxy $((port + 1)) 127.0.0.1 "$port" "$DELAY_MS" ${RATE_MBIT:-} &
    proxy=$!
    sleep 0.5
    url="postgresql://steppe@127.0.0.1:$((port + 1))/postgres"
  fi
}

url_with() { if [[ "$url" == *\?* ]]; then echo "$url&$1"; else echo "$url?$1"; fi; }
