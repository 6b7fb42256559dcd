# throwaway_cluster.sh: sourced by the bench scripts that need a cluster of their own
#
# Installs the packages and builds pgsandbox (as root; unless SKIP_BUILD=1),
# then makes a throwaway cluster in a private directory under /tmp, on a Unix
# socket only, preloading pgsandbox, run as the "postgres" OS user when
# root.  The caller sets, before sourcing it:
#   repo           the checkout
#   CLUSTER_NAME   used in the directory's and the saved log's names
#   CLUSTER_PORT   the port
#   PGBIN, OUTDIR, SKIP_BUILD
#   CLUSTER_DIR    (optional) where its private directory is made, /tmp
#                  unless set (bench/live.sh puts it on XFS for 18)
# and gets:
#   as_pg CMD...   run a program as the cluster's user, aimed at the cluster
#   q SQL          run SQL in "postgres", unaligned, tuples only
#   cluster_start  start it, with postgresql.conf lines read from stdin
# The cluster is stopped and its directory removed on exit; its log is kept
# in $OUTDIR/$CLUSTER_NAME-server.log.

if [ "$(id -u)" = 0 ]; then
	bash "$repo/test/install-deps.sh"
fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	make -C "$repo" -s
	if [ "$(id -u)" = 0 ]; then make -C "$repo" -s install; else sudo make -C "$repo" -s install; fi
fi

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
tmp=$(mktemp -d "${CLUSTER_DIR:-/tmp}/pgsandbox-$CLUSTER_NAME.XXXXXX")
data=$tmp/data
sock=$tmp/sock
cluster_started=0
mkdir "$sock"
[ "$(id -u)" != 0 ] || chown -R postgres: "$tmp"
chmod 700 "$tmp"
cd "$tmp"

as_pg() {
	local env=(env PGHOST="$sock" PGPORT="$CLUSTER_PORT" PGUSER=postgres
			   PGDATABASE=postgres PATH="$PGBIN:$PATH")
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "${env[@]}" "$@"; else "${env[@]}" "$@"; fi
}

q() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -A -t -c "$1"
}

cluster_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	[ -f "$tmp/server.log" ] && cp "$tmp/server.log" "$OUTDIR/$CLUSTER_NAME-server.log"
	[ $cluster_started = 0 ] || as_pg pg_ctl -D "$data" -m immediate -w stop >/dev/null
	rm -rf "$tmp"
	exit $rc
}
trap cluster_cleanup EXIT

cluster_start() {
	as_pg initdb -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
	cat >"$data/pg_hba.conf" <<-EOF
	local all postgres trust
	local all all scram-sha-256
	EOF
	{
		echo "port = $CLUSTER_PORT"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$sock'"
		echo "shared_preload_libraries = 'pgsandbox'"
		cat
	} >>"$data/postgresql.conf"
	cluster_started=1
	as_pg pg_ctl -D "$data" -l "$tmp/server.log" -w start >/dev/null
	q "CREATE EXTENSION pgsandbox" >/dev/null
}
