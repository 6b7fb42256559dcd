#!/usr/bin/env bash
#
# run-in.sh: run a command with PostgreSQL VERSION's tools first on PATH and
# PG_CONFIG set; for 17 and 18, inside the chroot test/pg/provision.sh made.
# Run as root.
#
#   test/pg/run-in.sh [-u USER] [-b DIR]... VERSION CMD [ARG]...
#
#   -u USER   run CMD as USER (e.g. postgres: initdb and postgres refuse root)
#   -b DIR    make host directory DIR visible at the same path in the chroot
#             (bind mount; may be given more than once)
#
# For 15, CMD runs on the host.  For 17 and 18 it runs in a private mount
# namespace in which the chroot has /proc, a tmpfs /dev/shm (for the
# server's dynamic shared memory) and the -b directories; all of them vanish
# when CMD ends, whatever way it ends.  The working directory is kept when it
# exists in the chroot (e.g. inside a -b directory), else it is /.
#
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

user=
binds=()
while getopts 'u:b:' opt; do
	case "$opt" in
		u) user=$OPTARG ;;
		b) binds+=("$(cd "$OPTARG" && pwd)") ;;
		*) echo "usage: $0 [-u USER] [-b DIR]... VERSION CMD [ARG]..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { echo "usage: $0 [-u USER] [-b DIR]... VERSION CMD [ARG]..." >&2; exit 2; }
version=$1
shift

bindir=/usr/lib/postgresql/$version/bin
as_user=()
[ -n "$user" ] && as_user=(runuser -u "$user" --)

if pgsbx_on_host "$version"; then
	exec "${as_user[@]}" env PATH="$bindir:$PATH" PG_CONFIG="$bindir/pg_config" "$@"
fi

root=$(pgsbx_root "$version")
[ -f "$root/.pgsandbox-stamp" ] || {
	echo "$0: PostgreSQL $version is not provisioned: run test/pg/provision.sh $version" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "$0: run as root" >&2; exit 1; }

# Environment passed into the chroot: the PostgreSQL test knobs and locale
# settings the caller set, nothing else of the host's.
passenv=()
for v in PG_TEST_TIMEOUT_DEFAULT PG_TEST_EXTRA PG_TEST_PORT_DIR PGCTLTIMEOUT PROVE_FLAGS PROVE_TESTS \
		 PGSANDBOX_PAGILA_DIR PGSANDBOX_FOREIGN PGSANDBOX_COW_DIR PGSANDBOX_SMALL_DISK_DIR PGSANDBOX_TEST_JOBS \
		 PGSANDBOX_TAP_TIMES PGSANDBOX_UPGRADE_FROM PGSANDBOX_TEST_FILE_TIMEOUT LANG LC_ALL TZ WERROR; do
	[ -n "${!v+x}" ] && passenv+=("$v=${!v}")
done
home=/root
[ -n "$user" ] && home=$(chroot "$root" getent passwd "$user" | cut -d: -f6)

exec unshare --mount --propagation private -- bash -euc '
	root=$1 cwd=$2 nbinds=$3
	shift 3
	mount -t proc proc "$root/proc"
	mkdir -p "$root/dev/shm"
	mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
	for ((i = 0; i < nbinds; i++)); do
		mkdir -p "$root$1"
		mount --bind "$1" "$root$1"
		shift
	done
	[ -d "$root$cwd" ] || cwd=/
	exec chroot "$root" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
' run-in "$root" "$PWD" "${#binds[@]}" "${binds[@]}" \
	"${as_user[@]}" env -i HOME="$home" USER="${user:-root}" LANG=C.UTF-8 \
	PATH="$bindir:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" PG_CONFIG="$bindir/pg_config" \
	"${passenv[@]}" "$@"
