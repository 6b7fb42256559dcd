# common.sh: shared by provision.sh and run-in.sh (sourced, not run).

PGSANDBOX_CACHE=${PGSANDBOX_CACHE:-/var/cache/pgsandbox}

# The Debian suite that carries PostgreSQL VERSION's server packages.
pgsbx_suite()
{
	case "$1" in
		15) echo bookworm ;;	# only with PGSANDBOX_CHROOT_15=1
		17) echo trixie ;;
		18) echo sid ;;
		*) echo "unsupported PostgreSQL version: $1 (15, 17 or 18)" >&2; return 1 ;;
	esac
}

# Does VERSION run on the host?  15 does (Debian 12's own packages), unless
# PGSANDBOX_CHROOT_15=1 asks for a Debian 12 chroot like the others: for
# testing on a machine whose own PostgreSQL 15 must not be touched.
pgsbx_on_host()
{
	[ "$1" = 15 ] && [ "${PGSANDBOX_CHROOT_15:-0}" != 1 ]
}

# The chroot directory for VERSION (keyed by suite, not by version).
pgsbx_root()
{
	local suite
	suite=$(pgsbx_suite "$1") || return 1
	echo "$PGSANDBOX_CACHE/chroot-$suite"
}

# The host apt's own mirror: the first URIs: line of debian.sources.
pgsbx_mirror()
{
	awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources
}
