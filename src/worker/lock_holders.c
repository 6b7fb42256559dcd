/*-------------------------------------------------------------------------
 *
 * lock_holders.c
 *	  What holds a lock on a sandbox's role or database, clearing it away
 *	  before the lifecycle worker alters or drops them, and recording a step
 *	  that was blocked all the same.
 *
 * The lifecycle worker serves everyone, one step after another, and alters
 * and drops roles and databases that other sessions can lock: the sandbox
 * role itself (ALTER ROLE CURRENT_USER ..., GRANT ... ON DATABASE, ALTER
 * DATABASE ... SET, in a transaction left open or prepared), any login
 * role (ALTER DEFAULT PRIVILEGES ... TO a sandbox role locks the role), or
 * the role of another sandbox.  Three rules keep it from waiting on them
 * without a bound:
 *
 * - every utility statement it runs waits at most pgsandbox.lock_timeout
 *	 for a lock (sbx_run_utility);
 * - before it touches a sandbox's role or database, every prepared
 *	 transaction that holds either is rolled back, in whatever database it
 *	 was prepared, and the sandbox's own sessions are ended (sbx_clear_way);
 *	 a session of another role is not ended;
 * - a step blocked all the same is given up, recorded as a 'blocked'
 *	 event naming what held the lock, and raised as 55P03
 *	 (sbx_rethrow_blocked), to be tried again later by its caller, with a
 *	 backoff (sbx_backoff_*) where the worker itself tries again.
 *
 * A prepared transaction holds a role or a database when it was prepared in
 * the sandbox's database, by the sandbox's role, with a lock on either
 * object, or when it updated the role's or the database's catalog row (the
 * row's xmax is its xid, and it holds a lock on that catalog).  pg_locks
 * shows a prepared transaction's locks with no pid, under the virtual
 * transaction of the lock on its transaction ID.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* role and db as the text arguments of sbx_holders_sql, NULL if invalid */
static void
sbx_holder_args(Oid role, Oid db, char *rolebuf, char *dbbuf, const char **args)
{
	snprintf(rolebuf, 16, "%u", role);
	snprintf(dbbuf, 16, "%u", db);
	args[0] = OidIsValid(role) ? rolebuf : NULL;
	args[1] = OidIsValid(db) ? dbbuf : NULL;
}

/*
 * What holds role or database db now, as a phrase ("prepared transaction
 * "x" of role r in database d; session 123 of role r in database d"), or
 * NULL if nothing does.  Needs a worker transaction.
 */
char *
sbx_describe_holders(Oid role, Oid db)
{
	char		rolebuf[16];
	char		dbbuf[16];
	const char *args[2];
	StringInfoData out;

	sbx_holder_args(role, db, rolebuf, dbbuf, args);
	sbx_spi(sbx_holders_sql(), SPI_OK_SELECT, 2, args);
	if (SPI_processed == 0)
		return NULL;
	initStringInfo(&out);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *kind = sbx_spi_text(i, 1);
		char	   *id = sbx_spi_text(i, 2);
		char	   *who = sbx_spi_text(i, 3);
		char	   *where = sbx_spi_text(i, 4);

		appendStringInfo(&out, "%s%s %s%s%s of role %s in database %s",
						 i > 0 ? "; " : "",
						 strcmp(kind, "prepared") == 0 ? "prepared transaction" : "session",
						 strcmp(kind, "prepared") == 0 ? "\"" : "",
						 id,
						 strcmp(kind, "prepared") == 0 ? "\"" : "",
						 who ? quote_identifier(who) : "?",
						 where ? quote_identifier(where) : "?");
	}
	return MemoryContextStrdup(sbx_outer_cxt, out.data);
}

/*
 * Clear the way to sandbox 'name''s role and database db (either may be
 * invalid): roll back every prepared transaction that holds either, by a
 * janitor in each database where one was prepared, then end the sessions
 * connected to db.  With may_defer, janitors that had to be started are
 * not waited for and false is returned: call again once they have stopped.
 * Returns true once the way is clear of all but the sessions of other
 * roles elsewhere, which are not ended.
 */
bool
sbx_clear_way(const char *name, Oid role, Oid db, bool may_defer)
{
	char		rolebuf[16];
	char		dbbuf[16];
	const char *args[2];
	List	   *dbs = NIL;
	ListCell   *lc;
	bool		isnull;

	sbx_holder_args(role, db, rolebuf, dbbuf, args);
	sbx_xact_begin("pgsandbox: looking for what holds a sandbox");
	sbx_spi(psprintf("SELECT DISTINCT h.dboid FROM (%s) h WHERE h.kind = 'prepared'",
					 sbx_holders_sql()),
			SPI_OK_SELECT, 2, args);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Oid			dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1,
														   &isnull));
		MemoryContext old = MemoryContextSwitchTo(sbx_outer_cxt);

		dbs = lappend_oid(dbs, dboid);
		MemoryContextSwitchTo(old);
	}
	sbx_xact_commit();

	foreach(lc, dbs)
		sbx_janitor_start(lfirst_oid(lc), name, role, db, false);
	if (dbs != NIL && may_defer)
	{
		list_free(dbs);
		return false;
	}
	foreach(lc, dbs)
		sbx_janitor_wait(lfirst_oid(lc));
	list_free(dbs);

	/*
	 * The sandbox's sessions: those in the process array, even if not yet
	 * in pg_stat_activity.  A prepared transaction made since is an error
	 * here, and the step is tried again.
	 */
	if (OidIsValid(db))
	{
		sbx_xact_begin("pgsandbox: ending a sandbox's sessions");
		TerminateOtherDBBackends(db);
		sbx_xact_commit();
	}
	return true;
}

/*
 * Record, as a 'blocked' event of sandbox 'name', that 'step' ("drop",
 * "reset", ...) was given up on error edata, with what holds the role or
 * database db now.  Returns that (NULL if nothing holds them).
 */
char *
sbx_record_blocked(ErrorData *edata, const char *name, const char *step,
				   Oid role, Oid db)
{
	char	   *holders;

	sbx_xact_begin("pgsandbox: recording a blocked step");
	holders = sbx_describe_holders(role, db);
	if (sbx_catalog_has_dropping())
		sbx_log_event(name, "blocked", SBX_WORKER_ACTOR,
					  psprintf("%s: %s%s%s", step, edata->message,
							   holders ? "; held by " : "", holders ? holders : ""));
	sbx_xact_commit();
	return holders;
}

/*
 * In a PG_CATCH block, with the error taken by sbx_catch_error: an error
 * other than a lock timeout is raised again as it was.  A lock timeout on
 * sandbox 'name''s role or database db is recorded (sbx_record_blocked)
 * and raised again as 55P03 naming what holds them, with 'hint'.
 */
pg_noreturn void
sbx_rethrow_blocked(ErrorData *edata, const char *name, const char *step,
					Oid role, Oid db, const char *hint)
{
	char	   *holders;

	if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		ReThrowError(edata);
	holders = sbx_record_blocked(edata, name, step, role, db);
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("could not %s sandbox \"%s\" now: another session holds a lock it needs",
					step, name),
			 holders ? errdetail("Held by %s.", holders)
			 : errdetail("The lock was released since."),
			 hint ? errhint("%s", hint) : 0));
}

/* ------------------------------------------------------------------------
 * Backoff of steps that failed
 * ------------------------------------------------------------------------
 */

/* a step that failed, and when it may be tried again */
typedef struct SbxRetry
{
	char	   *what;			/* what it was done to, and how */
	int			failures;
	TimestampTz next;
} SbxRetry;

static List *sbx_retries = NIL;	/* in TopMemoryContext */

static SbxRetry *
sbx_retry_find(const char *what)
{
	ListCell   *lc;

	foreach(lc, sbx_retries)
	{
		SbxRetry   *r = lfirst(lc);

		if (strcmp(r->what, what) == 0)
			return r;
	}
	return NULL;
}

/*
 * Run step(arg) on 'key' if its backoff is over: a failure is logged as a
 * warning ("what" and the error) and puts the next attempt off, a success
 * forgets the backoff.  Returns whether the step ran and succeeded.
 */
bool
sbx_try_with_backoff(const char *key, void (*step) (void *arg), void *arg,
					 const char *what)
{
	if (!sbx_backoff_due(key))
		return false;
	if (!sbx_try_or_warn(step, arg, what))
	{
		sbx_backoff_failed(key);
		return false;
	}
	sbx_backoff_done(key);
	return true;
}

/* Whether a step on 'what' may be tried now. */
bool
sbx_backoff_due(const char *what)
{
	SbxRetry   *r = sbx_retry_find(what);

	return r == NULL || GetCurrentTimestamp() >= r->next;
}

/*
 * Note that a step on 'what' failed: it is tried again after 10 s, then
 * twice as long after each further failure, up to 10 minutes.
 */
void
sbx_backoff_failed(const char *what)
{
	SbxRetry   *r = sbx_retry_find(what);
	int64		delay_ms = 10000;
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	/* forget what has not failed again for an hour: it went another way */
	foreach(lc, sbx_retries)
	{
		SbxRetry   *old = lfirst(lc);

		if (old != r && TimestampDifferenceExceeds(old->next, now, 3600 * 1000))
		{
			sbx_retries = foreach_delete_current(sbx_retries, lc);
			pfree(old->what);
			pfree(old);
		}
	}
	if (r == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		r = palloc0(sizeof(SbxRetry));
		r->what = pstrdup(what);
		sbx_retries = lappend(sbx_retries, r);
		MemoryContextSwitchTo(old);
	}
	r->failures++;
	for (int i = 1; i < r->failures && delay_ms < 600000; i++)
		delay_ms *= 2;
	r->next = TimestampTzPlusMilliseconds(now, Min(delay_ms, 600000));
}

/* A step on 'what' succeeded: forget its failures. */
void
sbx_backoff_done(const char *what)
{
	SbxRetry   *r = sbx_retry_find(what);

	if (r == NULL)
		return;
	sbx_retries = list_delete_ptr(sbx_retries, r);
	pfree(r->what);
	pfree(r);
}
