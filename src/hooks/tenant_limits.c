/*-------------------------------------------------------------------------
 *
 * tenant_limits.c
 *	  A sandbox's share of what every backend of the server shares: its
 *	  sessions, the connection slots left to everyone else, and the
 *	  prepared-transaction slots.  Checked where a login and a PREPARE
 *	  TRANSACTION happen, in the backend that asks.
 *
 * Sessions.  The login check (login_check.c) calls sbx_check_sandbox_login
 * for a sandbox role logging into its own database, after pg_hba.conf and
 * before PostgreSQL's own checks.  A login is refused (53300) if
 *
 *	- the sandbox has as many sessions as its cap: the lower of
 *	  pgsandbox.max_connections_per_sandbox and the role's own CONNECTION
 *	  LIMIT, which the worker sets from the clone's connection_limit and
 *	  which only a role with CREATEROLE could raise;
 *	- or it would leave fewer than pgsandbox.reserved_connections slots
 *	  free: those are for administrators, for callers of clone() and the
 *	  other functions, and for pgsandbox's own pg_dump and pg_restore.
 *
 * A clone under way is never refused its own sessions: the role of a job
 * that has not reported yet logs in only as pgsandbox's pg_restore and
 * COPY, since no one else knows its password.  Counting costs a walk of
 * the process array and of the free slots' list, no catalog access.
 *
 * Prepared transactions.  A PREPARE TRANSACTION of a sandbox role is
 * refused, before anything is prepared, when its database already holds
 * pgsandbox.max_prepared_per_sandbox of them (by default a quarter of
 * max_prepared_transactions).  The worker rolls back the ones older than
 * pgsandbox.max_prepared_age (worker/tenants.c).
 *
 * Every refusal is noted (login_times.c) and written at most once a minute
 * as an event of the sandbox and in the metrics.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_hooks.h"
#include "sbx_shmem.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/syscache.h"

/* The role's own CONNECTION LIMIT, -1 for none. */
static int
sbx_role_connection_limit(Oid role)
{
	HeapTuple	tuple = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	int			limit = -1;

	if (HeapTupleIsValid(tuple))
	{
		limit = ((Form_pg_authid) GETSTRUCT(tuple))->rolconnlimit;
		ReleaseSysCache(tuple);
	}
	return limit;
}

/*
 * A sandbox role 'name' (OID role) logs into its database: refuse it past
 * the sandbox's cap of sessions or into the reserved slots.
 */
void
sbx_check_sandbox_login(Oid role, const char *name)
{
	int			setting = sbx_max_connections_per_sandbox;
	int			own = sbx_role_connection_limit(role);
	int			cap = setting;

	if (sbx_clone_under_way(name))
		return;
	if (own >= 0 && (cap < 0 || own < cap))
		cap = own;
	if (cap >= 0)
	{
		/* this backend does not count itself yet: its role is not set */
		int			sessions = CountUserBackends(role);

		if (sessions >= cap)
		{
			sbx_note_refusal(role, SBX_REFUSED_SANDBOX_SESSIONS);
			ereport(FATAL,
					(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
					 errmsg("too many connections for sandbox \"%s\"", name),
					 errdetail("It has %d session%s open, and may have %d (%s).",
							   sessions, sessions == 1 ? "" : "s", cap,
							   cap == setting ? "pgsandbox.max_connections_per_sandbox"
							   : "the connection_limit of its clone"),
					 errhint("Close a session, or have the client keep fewer open.")));
		}
	}
	if (sbx_reserved_connections > 0 &&
		!sbx_have_n_free_procs_compat(sbx_reserved_connections))
	{
		sbx_note_refusal(role, SBX_REFUSED_RESERVED_SLOTS);
		ereport(FATAL,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("remaining connection slots are reserved for pgsandbox and its callers"),
				 errdetail("A sandbox login may not take the last %d slots (pgsandbox.reserved_connections).",
						   sbx_reserved_connections),
				 errhint("Try again once other sessions have closed.")));
	}
}

/*
 * The session of sandbox role 'role' prepares the current transaction, as
 * that role or as any role it has become (login_check.c): refuse it,
 * before anything is prepared, if its database holds its share already.
 */
void
sbx_check_sandbox_prepare(Oid role)
{
	int			cap = sbx_prepared_cap();
	int64		held;
	bool		isnull;

	if (IsAbortedTransactionBlockState())
		return;					/* PREPARE only rolls it back */
	SPI_connect();
	if (SPI_execute("SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_xacts"
					" WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not count the prepared transactions");
	held = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
									   &isnull));
	SPI_finish();
	if (held >= cap)
	{
		sbx_note_refusal(role, SBX_REFUSED_PREPARED);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("this sandbox already holds %lld prepared transaction%s", (long long) held,
						held == 1 ? "" : "s"),
				 errdetail("A sandbox may hold %d at once (pgsandbox.max_prepared_per_sandbox), so that every other may prepare some too.",
						   cap),
				 errhint("Finish one with COMMIT PREPARED or ROLLBACK PREPARED first.")));
	}
}
