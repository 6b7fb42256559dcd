/*-------------------------------------------------------------------------
 *
 * janitor.c
 *	  Clearing what other databases hold of a sandbox's role or database:
 *	  prepared transactions, and privileges granted to the role.
 *
 * Only a session connected to a database may finish the transactions
 * prepared there, and DROP OWNED works on one database at a time.  The
 * lifecycle worker is connected to its own database only, so for each
 * database that holds something of a sandbox it starts a short-lived
 * "pgsandbox janitor" worker connected there (even to a database closed to
 * connections), which:
 *
 * - rolls back the prepared transactions there that hold the sandbox's
 *	 role or database (lock_holders.c says which: in the sandbox's own
 *	 database, every one), which DROP DATABASE refuses and which block
 *	 ALTER ROLE, ALTER DATABASE and DROP ROLE;
 * - with drop_grants, revokes whatever that database grants the role
 *	 (privileges, default privileges, policies: DROP OWNED), unless the
 *	 role owns something there, which pgsandbox did not make and so does
 *	 not drop.
 *
 * A drop asked for by a caller, or by the reaper, does not wait for a
 * janitor: the request is set aside and served again once the janitor has
 * stopped, and other callers are served meanwhile.  Only the worker's own
 * clean-ups wait, for a bounded time, in a loop that keeps the wake-ups of
 * callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_common.h"
#include "sbx_roles.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* what a janitor clears, passed in its bgw_extra */
typedef struct SbxJanitorTarget
{
	Oid			role;			/* the sandbox's role, or InvalidOid */
	Oid			db;				/* the sandbox's database, or InvalidOid */
	bool		drop_grants;	/* revoke what this database grants the role */
	TimestampTz prepared_before;	/* if not 0: instead, roll back every
									 * transaction prepared before this
									 * moment (tenants.c) */
} SbxJanitorTarget;

/* the janitors the lifecycle worker has started and not yet seen stop */
typedef struct SbxJanitor
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
} SbxJanitor;

#define SBX_MAX_JANITORS	8

static SbxJanitor sbx_janitors[SBX_MAX_JANITORS];

/*
 * What holds role $1 or database $2 (either may be NULL): prepared
 * transactions (kind 'prepared', id its gid) and sessions (kind 'session',
 * id its pid), with their role, database name and database oid.
 */
const char *
sbx_holders_sql(void)
{
	return
		"WITH t AS (SELECT $1::pg_catalog.oid AS role, $2::pg_catalog.oid AS db),"
		" updated AS ("
		"  SELECT a.xmax AS xid, 'pg_catalog.pg_authid'::pg_catalog.regclass::pg_catalog.oid AS rel"
		"    FROM pg_catalog.pg_authid a, t WHERE a.oid = t.role"
		"  UNION ALL"
		"  SELECT d.xmax, 'pg_catalog.pg_database'::pg_catalog.regclass::pg_catalog.oid"
		"    FROM pg_catalog.pg_database d, t WHERE d.oid = t.db),"
		" objects AS ("
		"  SELECT l.pid, l.virtualtransaction FROM pg_catalog.pg_locks l, t"
		"   WHERE l.granted AND l.locktype = 'object' AND l.database = 0"
		"     AND ((l.classid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND l.objid = t.role)"
		"          OR (l.classid = 'pg_catalog.pg_database'::pg_catalog.regclass AND l.objid = t.db))),"
		" catalogs AS ("
		"  SELECT l.pid, l.virtualtransaction, l.relation FROM pg_catalog.pg_locks l"
		"   WHERE l.granted AND l.locktype = 'relation' AND l.database = 0"
		"     AND l.relation IN ('pg_catalog.pg_authid'::pg_catalog.regclass,"
		"                        'pg_catalog.pg_database'::pg_catalog.regclass)),"
		/* a prepared transaction's locks: those of its transaction ID's lock */
		" prepared AS ("
		"  SELECT p.gid, p.owner, p.database, p.transaction, l.virtualtransaction AS vxid"
		"    FROM pg_catalog.pg_prepared_xacts p"
		"    LEFT JOIN pg_catalog.pg_locks l ON l.locktype = 'transactionid' AND l.pid IS NULL"
		"     AND l.transactionid OPERATOR(pg_catalog.=) p.transaction)"
		" SELECT 'prepared' AS kind, p.gid AS id, p.owner::text AS role,"
		"        p.database::text AS database, d.oid AS dboid"
		"   FROM prepared p"
		"   JOIN pg_catalog.pg_database d ON d.datname = p.database, t"
		"  WHERE d.oid = t.db"
		"     OR p.owner = (SELECT a.rolname FROM pg_catalog.pg_authid a WHERE a.oid = t.role)"
		"     OR EXISTS (SELECT 1 FROM objects o"
		"                 WHERE o.pid IS NULL AND o.virtualtransaction = p.vxid)"
		"     OR EXISTS (SELECT 1 FROM updated u JOIN catalogs c ON c.relation = u.rel"
		"                 WHERE u.xid OPERATOR(pg_catalog.=) p.transaction"
		"                   AND c.pid IS NULL AND c.virtualtransaction = p.vxid)"
		" UNION ALL"
		" SELECT 'session', a.pid::text, a.usename::text, a.datname::text, a.datid"
		"   FROM pg_catalog.pg_stat_activity a, t"
		"  WHERE a.pid <> pg_catalog.pg_backend_pid()"
		"    AND (a.datid = t.db"
		"         OR a.pid IN (SELECT o.pid FROM objects o)"
		"         OR EXISTS (SELECT 1 FROM updated u JOIN catalogs c ON c.relation = u.rel"
		"                     WHERE u.xid OPERATOR(pg_catalog.=) a.backend_xid AND c.pid = a.pid))"
		"  ORDER BY 1, 2";
}

/* Forget the janitors that have stopped; return how many still run. */
static int
sbx_janitors_check(void)
{
	int			running = 0;

	for (int i = 0; i < SBX_MAX_JANITORS; i++)
	{
		if (sbx_janitors[i].handle == NULL)
			continue;
		if (sbx_dynamic_worker_stopped(sbx_janitors[i].handle))
		{
			pfree(sbx_janitors[i].handle);
			sbx_janitors[i].handle = NULL;
			sbx_janitors[i].dboid = InvalidOid;
		}
		else
			running++;
	}
	return running;
}

static bool
sbx_janitor_running_for(Oid dboid)
{
	sbx_janitors_check();
	for (int i = 0; i < SBX_MAX_JANITORS; i++)
	{
		if (sbx_janitors[i].handle != NULL && sbx_janitors[i].dboid == dboid)
			return true;
	}
	return false;
}

/*
 * In the lifecycle worker: start a janitor in database dboid that clears
 * what it holds of sandbox 'name''s role and database db, unless one
 * already works there (what it leaves is found by the next attempt).
 * Does not wait.
 */
static bool
sbx_janitor_launch(Oid dboid, const char *name, const SbxJanitorTarget *target)
{
	int			free_slot = -1;

	if (sbx_janitor_running_for(dboid))
		return true;
	for (int i = 0; i < SBX_MAX_JANITORS && free_slot < 0; i++)
	{
		if (sbx_janitors[i].handle == NULL)
			free_slot = i;
	}
	if (free_slot >= 0)
		sbx_janitors[free_slot].handle =
			sbx_start_dynamic_worker("sbx_janitor_main", "pgsandbox janitor", name,
									 ObjectIdGetDatum(dboid), target, sizeof(*target));
	if (free_slot < 0 || sbx_janitors[free_slot].handle == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a worker to roll back the prepared transactions of sandbox \"%s\"",
						name),
				 errhint("Raise max_worker_processes.")));
	sbx_janitors[free_slot].dboid = dboid;
	return true;
}

bool
sbx_janitor_start(Oid dboid, const char *name, Oid role, Oid db, bool drop_grants)
{
	SbxJanitorTarget target;

	memset(&target, 0, sizeof(target));
	target.role = role;
	target.db = db;
	target.drop_grants = drop_grants;
	return sbx_janitor_launch(dboid, name, &target);
}

/*
 * Start a janitor in sandbox 'name''s database dboid that rolls back every
 * transaction prepared there before prepared_before: the moment the caller
 * judged by, so that the janitor rolls back only what the caller saw and
 * logged, not one that grew old while it started.  Does not wait.
 */
bool
sbx_janitor_start_aged(Oid dboid, const char *name, TimestampTz prepared_before)
{
	SbxJanitorTarget target;

	memset(&target, 0, sizeof(target));
	target.prepared_before = prepared_before;
	return sbx_janitor_launch(dboid, name, &target);
}

/*
 * Wait until no janitor works in database dboid, for a bounded time: an
 * error (55P03) if one still does then.  A wake-up of the latch that comes
 * meanwhile (a caller's request) is kept for the main loop.
 */
void
sbx_janitor_wait(Oid dboid)
{
	bool		woken = false;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Max(30000, 10 * sbx_lock_timeout));

	while (sbx_janitor_running_for(dboid))
	{
		int			rc;

		if (GetCurrentTimestamp() >= deadline)
		{
			if (woken)
				SetLatch(MyLatch);
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("a pgsandbox janitor did not finish in time")));
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   50L, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			woken = true;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (woken)
		SetLatch(MyLatch);
}

/* Does any janitor still run? */
bool
sbx_janitors_running(void)
{
	return sbx_janitors_check() > 0;
}

/*
 * In a worker transaction: the name of role 'role' if this database (or a
 * shared object) grants it something to revoke with DROP OWNED, and the
 * role owns nothing here, which pgsandbox did not make and so does not
 * drop; NULL otherwise.  The name is in sbx_outer_cxt.
 */
char *
sbx_role_to_revoke(Oid role)
{
	char		rolebuf[16];
	const char *args[1] = {rolebuf};

	snprintf(rolebuf, sizeof(rolebuf), "%u", role);
	sbx_spi(psprintf("SELECT a.rolname FROM pg_catalog.pg_authid a"
					 " WHERE a.oid = $1::pg_catalog.oid"
					 "   AND EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend s"
					 "                WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass"
					 "                  AND s.refobjid = a.oid AND s.dbid IN (0, %u))"
					 "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend s"
					 "                    WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass"
					 "                      AND s.refobjid = a.oid AND s.dbid = %u"
					 "                      AND s.deptype = 'o')",
					 MyDatabaseId, MyDatabaseId),
			SPI_OK_SELECT, 1, args);
	return SPI_processed == 1 ? sbx_keep(sbx_spi_text(0, 1)) : NULL;
}

/*
 * The janitor: connected to a database as superuser, its session hardened
 * against the settings a sandbox role may have given its database.
 */
void
sbx_janitor_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	SbxJanitorTarget target;
	char		rolebuf[16];
	char		dbbuf[16];
	char		timeout[16];
	const char *args[2] = {rolebuf, dbbuf};
	List	   *gids = NIL;
	char	   *revoke = NULL;
	ListCell   *lc;

	memcpy(&target, MyBgworkerEntry->bgw_extra, sizeof(target));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
	pgstat_report_appname("pgsandbox janitor");
	sbx_harden_session();
	snprintf(timeout, sizeof(timeout), "%d", sbx_lock_timeout);
	SetConfigOption("lock_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE);

	snprintf(rolebuf, sizeof(rolebuf), "%u", target.role);
	snprintf(dbbuf, sizeof(dbbuf), "%u", target.db);
	if (!OidIsValid(target.role))
		args[0] = NULL;
	if (!OidIsValid(target.db))
		args[1] = NULL;

	sbx_xact_begin("pgsandbox: looking for what holds a sandbox");
	if (target.prepared_before != 0)
	{
		const char *before[1] = {timestamptz_to_str(target.prepared_before)};

		sbx_spi("SELECT gid FROM pg_catalog.pg_prepared_xacts"
				" WHERE database = pg_catalog.current_database()"
				"   AND prepared < $1::pg_catalog.timestamptz",
				SPI_OK_SELECT, 1, before);
	}
	else
		sbx_spi(psprintf("SELECT h.id FROM (%s) h"
						 " WHERE h.kind = 'prepared' AND h.dboid = %u",
						 sbx_holders_sql(), MyDatabaseId),
				SPI_OK_SELECT, 2, args);
	gids = sbx_keep_column(1);

	if (target.drop_grants && OidIsValid(target.role))
		revoke = sbx_role_to_revoke(target.role);
	sbx_xact_commit();

	foreach(lc, gids)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		FinishPreparedTransaction((const char *) lfirst(lc), false);
		CommitTransactionCommand();
		ereport(LOG,
				(errmsg("rolled back prepared transaction \"%s\", which held a sandbox",
						(const char *) lfirst(lc))));
	}
	if (revoke != NULL)
	{
		sbx_xact_begin("pgsandbox: revoking what a database grants a sandbox role");
		sbx_run_utility(psprintf("DROP OWNED BY %s", quote_identifier(revoke)), NULL);
		sbx_xact_commit();
	}
	proc_exit(0);
}
