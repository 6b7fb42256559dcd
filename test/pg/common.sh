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

# Run pg_regress, then the TAP files (test/prove-each.sh, through PGXS's
# PROVE), in the work directory WORK with the command prefix given (e.g.
# test/pg/run-in.sh -u postgres 17): a failure of the one never keeps the
# other from running.  REGRESS and PROVE_TESTS, when set, pick the tests
# (REGRESS empty: none); TAP=0 runs no TAP file.  The regression diffs
# are printed when they exist (prove-each.sh prints the failed TAP files'
# logs itself).  Returns 1 if anything failed.
pgsbx_run_suites()
{
	local work=$1 status=0
	local regress=() tap=()
	shift
	[ -n "${REGRESS+x}" ] && regress=(REGRESS="$REGRESS")
	[ -n "${PROVE_TESTS+x}" ] && tap=(PROVE_TESTS="$PROVE_TESTS")
	"$@" make -C "$work" -s installcheck TAP_TESTS= "${regress[@]}" || status=1
	if [ -f "$work/regression.diffs" ]; then
		echo "=== $work/regression.diffs (last 80 lines)"
		tail -n 80 "$work/regression.diffs"
	fi
	if [ "${TAP:-1}" != 0 ]; then
		"$@" make -C "$work" -s installcheck REGRESS= PROVE_FLAGS=--timer "${tap[@]}" || status=1
	fi
	return $status
}
