#!/usr/bin/env bash
#
# test-debs.sh: install the packages packaging/build-debs.sh built into plain
# Debian systems that have nothing but Debian's PostgreSQL
# (packaging/debian-system.sh), and run pgsandbox there as an ops team
# would: clusters made by pg_createcluster, shared_preload_libraries in
# their conf.d, the sandbox roles' pg_hba.conf line the README gives,
# servers started by pg_ctlcluster.  Run as root:
#
#   bash packaging/test-debs.sh DEBDIR [OLDDEBDIR]
#
# For each major of PG_VERSIONS (default "15 17 18"), in a copy of its
# system (removed afterwards, in a private mount namespace with its own
# /proc, /dev/shm and /dev/pts):
#   cluster     apt-get install ./postgresql-<major>-pgsandbox_*.deb, a
#               cluster, CREATE EXTENSION, doctor() with nothing to fix, a
#               data clone, a login with the returned conninfo over the
#               cluster's socket (and none without its password), the rows
#               compared with the source's, a drop that leaves no database
#               or role;
#   two majors  with 17 and 18 in PG_VERSIONS, on 18's system, which
#               carries Debian 13's 17 beside it (the other major's pg_dump
#               and pg_restore made unusable during each clone): a
#               cluster of each major with its own package, and each one's
#               doctor() and clone use its own major's pg_dump;
#   upgrade     when OLDDEBDIR holds an earlier release's package of the
#               major (build-debs.sh with PGSANDBOX_REF): that release
#               installed, a sandbox made, the new package installed over
#               it (apt-get install), the server restarted, ALTER EXTENSION
#               pgsandbox UPDATE, and the old sandbox still tracked, logged
#               into with its old credentials and dropped cleanly.
#
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 DEBDIR [OLDDEBDIR]" >&2; exit 2; }
debdir=$(cd "$1" && pwd)
olddir=${2:+$(cd "$2" && pwd)}
versions=${PG_VERSIONS:-15 17 18}
[ "$(id -u)" = 0 ] || { echo "$0: run as root" >&2; exit 1; }

work=$(mktemp -d /tmp/pgsandbox-debtest.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Run the scenario script in system copy $1, as root, with the arguments
# that follow.
in_system()
{
	local box=$1
	shift
	cp "$work/scenario.sh" "$box/tmp/scenario.sh"
	unshare --mount --propagation private -- bash -euc '
		box=$1; shift
		mount -t proc proc "$box/proc"
		mkdir -p "$box/dev/shm" "$box/dev/pts"
		mount -t tmpfs -o mode=1777 shm "$box/dev/shm"
		mount -t devpts -o newinstance,ptmxmode=0666 devpts "$box/dev/pts"
		exec chroot "$box" env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
			LANG=C.UTF-8 HOME=/root bash /tmp/scenario.sh "$@"
	' in-system "$box" "$@"
}

cat > "$work/scenario.sh" <<'SCENARIO'
set -euo pipefail
step() { echo "--- $*"; }
as_pg() { runuser -u postgres -- "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

install_deb()
{
	apt-get install -y -q "$1" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install $1"; }
	dpkg-query -W -f='${Package} ${Version} ${Status}\n' "$(dpkg-deb -f "$1" Package)"
}

# a cluster of major $1 on port $2, as the README says to set one up
make_cluster()
{
	local v=$1 port=$2 conf=/etc/postgresql/$1/main
	pg_createcluster -p "$port" "$v" main >/dev/null
	printf "shared_preload_libraries = 'pgsandbox'\npgsandbox.database = 'postgres'\n" \
		> "$conf/conf.d/pgsandbox.conf"
	sed -i '0,/^local[[:space:]]\+all[[:space:]]\+all/s//local   all   +pgsandbox_sandbox,pgsandbox_reader   scram-sha-256\n&/' \
		"$conf/pg_hba.conf"
	pg_ctlcluster "$v" main start
}

# psql as postgres on the cluster of major $1
q() { local v=$1; shift; as_pg psql -X -At -v ON_ERROR_STOP=1 --cluster "$v/main" "$@"; }

# the extension and a source "shop" with rows, on the cluster of major $1
make_source()
{
	local v=$1
	q "$v" -c 'CREATE EXTENSION pgsandbox' >/dev/null
	q "$v" -c 'CREATE DATABASE shop' >/dev/null
	q "$v" -d shop -c "CREATE TABLE item (id int PRIMARY KEY, name text NOT NULL);
		INSERT INTO item SELECT g, md5(g::text) FROM generate_series(1, 5000) g" >/dev/null
	q "$v" -c "SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true)" >/dev/null
}

# doctor() with nothing to fix, and its pg_dump, on the cluster of major $1
doctor()
{
	local v=$1 bad
	bad=$(q "$v" -c "SELECT string_agg(c || ' (' || detail || ')', '; ') FROM pgsandbox.doctor() AS d(c, ok, detail) WHERE NOT ok")
	[ -z "$bad" ] || fail "doctor() on $v reports: $bad"
	q "$v" -c "SELECT detail FROM pgsandbox.doctor() AS d(c, ok, detail) WHERE c = 'pg_dump found'"
}

# a data clone on the cluster of major $1: "name conninfo"
clone() { q "$1" -F ' ' -c "SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)"; }

# log into sandbox $2 of major $1 with conninfo $3, as an OS user that is not
# postgres (the password is what lets it in), and compare its rows
check_login()
{
	local v=$1 name=$2 conninfo=$3 got want
	case "$conninfo" in
		*host=/var/run/postgresql*|*host=/run/postgresql*) ;;
		*) fail "the conninfo does not name the cluster's socket directory" ;;
	esac
	id dev >/dev/null 2>&1 || useradd --create-home dev
	got=$(runuser -u dev -- psql -X -At -v ON_ERROR_STOP=1 "$conninfo" \
		-c "SELECT current_user || ' ' || count(*) || ' ' || md5(string_agg(name, ',' ORDER BY id)) FROM item")
	want=$(q "$v" -d shop -c "SELECT '$name ' || count(*) || ' ' || md5(string_agg(name, ',' ORDER BY id)) FROM item")
	echo "sandbox $got"
	[ "$got" = "$want" ] || fail "the sandbox holds \"$got\", the source \"$want\""
	if runuser -u dev -- psql -X -At "$(echo "$conninfo" | sed 's/password=[^ ]*//')" -c 'SELECT 1' \
			</dev/null >/dev/null 2>&1; then
		fail "the sandbox role logged in without its password"
	fi
}

# drop sandbox $2 of major $1: no database, no role left
drop()
{
	local v=$1 name=$2 left
	q "$v" -c "SELECT pgsandbox.drop('$name')" >/dev/null
	left=$(q "$v" -c "SELECT (SELECT count(*) FROM pg_database WHERE datname = '$name') + (SELECT count(*) FROM pg_roles WHERE rolname = '$name')")
	[ "$left" = 0 ] || fail "the drop of $name left $left objects"
	echo "dropped $name: $(q "$v" -c "SELECT status FROM pgsandbox.sandbox WHERE name = '$name'")"
}

mode=$1
shift
case "$mode" in
cluster)
	v=$1 deb=$2 port=$3
	step "apt-get install $deb (its dependencies are there: nothing is downloaded)"
	install_deb "$deb"
	step "the upgrade notice apt-listchanges shows: the reader's pg_hba.conf line"
	zgrep -q 'local   all   pgsandbox_reader   scram-sha-256' \
		"/usr/share/doc/postgresql-$v-pgsandbox/NEWS.Debian.gz" ||
		fail "NEWS.Debian of postgresql-$v-pgsandbox does not give the reader's pg_hba.conf line"
	step "pg_createcluster $v main, its conf.d, the sandbox roles' pg_hba.conf line, pg_ctlcluster"
	make_cluster "$v" "$port"
	grep -n '^local' "/etc/postgresql/$v/main/pg_hba.conf"
	pg_lsclusters
	step "CREATE EXTENSION pgsandbox, a source with rows, doctor()"
	make_source "$v"
	q "$v" -c "SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox'"
	doctor "$v"
	step "a data clone, a login with its conninfo over the socket, a drop"
	read -r name conninfo < <(clone "$v")
	check_login "$v" "$name" "$conninfo"
	drop "$v" "$name"
	pg_ctlcluster "$v" main stop
	;;
two-majors)
	v=$1 deb=$2 port=$3 v2=$4 deb2=$5 port2=$6
	step "two majors side by side: $v and $v2, each with its package and its cluster"
	install_deb "$deb"
	install_deb "$deb2"
	make_cluster "$v" "$port"
	make_cluster "$v2" "$port2"
	pg_lsclusters
	for m in "$v" "$v2"; do
		other=$v
		[ "$m" = "$v" ] && other=$v2
		make_source "$m"
		got=$(doctor "$m")
		echo "$m: doctor() says $got"
		case "$got" in
			/usr/lib/postgresql/$m/bin/pg_dump,\ version\ $m.*) ;;
			*) fail "doctor() on $m does not name $m's pg_dump" ;;
		esac
		# the other major's pg_dump and pg_restore cannot run meanwhile: a
		# clone that took them would fail
		chmod 000 "/usr/lib/postgresql/$other/bin/pg_dump" "/usr/lib/postgresql/$other/bin/pg_restore"
		read -r name conninfo < <(clone "$m")
		chmod 755 "/usr/lib/postgresql/$other/bin/pg_dump" "/usr/lib/postgresql/$other/bin/pg_restore"
		[ -n "$name" ] || fail "the clone on $m failed without $other's pg_dump"
		echo "$m: cloned with $other's pg_dump and pg_restore unusable"
		check_login "$m" "$name" "$conninfo" 2>&1 | grep -v 'No existing cluster is suitable'
		drop "$m" "$name"
	done
	pg_ctlcluster "$v" main stop
	pg_ctlcluster "$v2" main stop
	;;
upgrade)
	v=$1 old=$2 new=$3 port=$4
	step "the earlier release, $old, and a sandbox made with it"
	install_deb "$old"
	make_cluster "$v" "$port"
	make_source "$v"
	from=$(q "$v" -c "SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox'")
	echo "extension $from"
	read -r name conninfo < <(clone "$v")
	check_login "$v" "$name" "$conninfo"
	step "apt-get install $new over it, a restart, ALTER EXTENSION pgsandbox UPDATE"
	install_deb "$new"
	pg_ctlcluster "$v" main restart
	q "$v" -c 'ALTER EXTENSION pgsandbox UPDATE'
	to=$(q "$v" -c "SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox'")
	want=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "/usr/share/postgresql/$v/extension/pgsandbox.control")
	echo "extension $from -> $to"
	[ "$to" = "$want" ] && [ "$to" != "$from" ] || fail "the update went from $from to $to, not to $want"
	step "the old sandbox: still tracked, its credentials still log in, a clean drop; a new clone"
	[ "$(q "$v" -c "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'")" = ready ] ||
		fail "sandbox $name is not tracked as ready after the update"
	check_login "$v" "$name" "$conninfo"
	drop "$v" "$name"
	read -r name conninfo < <(clone "$v")
	check_login "$v" "$name" "$conninfo"
	drop "$v" "$name"
	doctor "$v" >/dev/null
	pg_ctlcluster "$v" main stop
	;;
esac
echo "PASS"
SCENARIO

# the package of major $1 in folder $2
deb_of() { ls "$2"/postgresql-"$1"-pgsandbox_*_*.deb 2>/dev/null | grep -v dbgsym | tail -n 1; }

status=0
# run scenario $1 on the system of major $2 with arguments $3...: package
# files are copied into the system, and named there by their base names
run()
{
	local what=$1 v=$2 sys box start=$SECONDS log args=("$2") a
	shift 2
	echo "=== $what on Debian's PostgreSQL $v"
	sys=$(bash "$top/packaging/debian-system.sh" "$v")
	box=$work/system-$v
	cp -a "$sys" "$box"
	for a in "$@"; do
		if [ -f "$a" ]; then
			cp "$a" "$box/tmp/"
			args+=("/tmp/$(basename "$a")")
		else
			args+=("$a")
		fi
	done
	log=$work/$what-$v.log
	if in_system "$box" "$what" "${args[@]}" >"$log" 2>&1; then
		sed 's/^/  /' "$log"
		echo "$what, PostgreSQL $v: PASS in $((SECONDS - start)) s"
	else
		sed 's/^/  /' "$log"
		echo "$what, PostgreSQL $v: FAIL" >&2
		status=1
	fi
	# a server a failed scenario left running lives in the copy
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$box" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
	done
	rm -rf "$box"
}

for v in $versions; do
	deb=$(deb_of "$v" "$debdir")
	[ -n "$deb" ] || { echo "no postgresql-$v-pgsandbox package in $debdir" >&2; status=1; continue; }
	run cluster "$v" "$deb" "$((5400 + v))"
	if [ "$v" = 18 ] && [[ " $versions " == *" 17 "* ]]; then
		deb17=$(deb_of 17 "$debdir")
		if [ -n "$deb17" ]; then
			run two-majors 18 "$deb" 5418 17 "$deb17" 5417
		else
			echo "no postgresql-17-pgsandbox package in $debdir" >&2
			status=1
		fi
	fi
	if [ -n "$olddir" ] && old=$(deb_of "$v" "$olddir") && [ -n "$old" ]; then
		run upgrade "$v" "$old" "$deb" "$((5400 + v))"
	fi
done
exit $status
