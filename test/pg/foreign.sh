#!/usr/bin/env bash
#
# foreign.sh: plain PostgreSQL servers of the majors under test, for the
# cross-version tests (test/t/026_cross_version.pl): a sandbox host of one
# major cloning sources of the others.  Run as root, after provision.sh.
#
#   test/pg/foreign.sh start DIR VERSION...
#   test/pg/foreign.sh stop DIR
#
# start makes one throwaway cluster per VERSION under DIR (15 on the host,
# 17 and 18 in their chroots), listening on 127.0.0.1 only, port 54000 +
# VERSION, trusting the local superuser "postgres" and asking every other
# role for its password (scram-sha-256, replication connections too), with
# wal_level = logical so that a test can make one a live source
# (test/t/054_live_cross_version.pl); it prints what the tests read from
# PGSANDBOX_FOREIGN: "VERSION:PORT VERSION:PORT ...".  stop stops them
# all.  Nothing else of the machine is touched.
#
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

[ $# -ge 2 ] || { echo "usage: $0 start DIR VERSION... | stop DIR" >&2; exit 2; }
action=$1
dir=$2
shift 2

case "$action" in
start)
	mkdir -p "$dir"
	chown postgres: "$dir"
	out=()
	for v in "$@"; do
		port=$((54000 + v))
		d=$dir/pg$v
		rm -rf "$d"
		mkdir "$d"
		chown postgres: "$d"
		bash "$here/run-in.sh" -u postgres -b "$dir" "$v" \
			initdb -D "$d/data" -U postgres -A trust --no-sync >"$d/initdb.log" 2>&1 || {
			echo "foreign: initdb of PostgreSQL $v failed:" >&2; tail -n 20 "$d/initdb.log" >&2; exit 1; }
		cat >>"$d/data/postgresql.conf" <<-EOF
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = '$d'
			fsync = off
			max_connections = 30
			wal_level = logical
			password_encryption = 'scram-sha-256'
		EOF
		cat >"$d/data/pg_hba.conf" <<-EOF
			host all postgres 127.0.0.1/32 trust
			local all postgres trust
			host all all 127.0.0.1/32 scram-sha-256
			host replication all 127.0.0.1/32 scram-sha-256
		EOF
		bash "$here/run-in.sh" -u postgres -b "$dir" "$v" \
			pg_ctl -D "$d/data" -l "$d/server.log" -w -t 60 start >/dev/null || {
			echo "foreign: PostgreSQL $v did not start:" >&2; tail -n 20 "$d/server.log" >&2; exit 1; }
		echo "$v" >"$d/version"
		out+=("$v:$port")
	done
	echo "${out[*]}"
	;;
stop)
	for d in "$dir"/pg*; do
		[ -f "$d/version" ] || continue
		bash "$here/run-in.sh" -u postgres -b "$dir" "$(cat "$d/version")" \
			pg_ctl -D "$d/data" -m fast -w stop >/dev/null 2>&1 || true
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start DIR VERSION... | stop DIR" >&2
	exit 2
	;;
esac
