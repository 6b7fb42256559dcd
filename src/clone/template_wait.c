/*-------------------------------------------------------------------------
 *
 * template_wait.c
 *	  A copy of a snapshot (CREATE DATABASE ... TEMPLATE) that waits out
 *	  what holds the snapshot for a moment, in the clone worker.
 *
 * CREATE DATABASE takes a share lock on its template and refuses a
 * template that another session is connected to.  A snapshot is held so
 * for moments by others than its clones: an autovacuum worker that
 * analyzes it after its build (CREATE DATABASE ends those, but waits for
 * them to go), the lifecycle worker as it swaps a refreshed snapshot in, a
 * live snapshot's apply.  Each try waits pgsandbox.lock_timeout for the
 * lock; one that gives up on the lock (55P03) or finds the template in use
 * (55006) is tried again, a moment later, until pgsandbox.copy_lock_wait
 * has passed.  Then the copy fails with the last error, its detail naming
 * what held the snapshot: the sessions that hold a lock on its database,
 * or are connected to it, by process, kind and role (never their query,
 * which may hold anything).  A copy that had to wait says for how long and
 * what held it, in its clone's notes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* between two tries */
#define SBX_TEMPLATE_RETRY_MS	200

/*
 * The sessions that hold a lock on database 'db' or are connected to it,
 * this one aside, as a phrase ("autovacuum worker 123 in database d;
 * client backend 456 of role r"), or NULL if none.  In a transaction of
 * its own.
 */
static char *
sbx_template_holders(Oid db)
{
	MemoryContext outer = CurrentMemoryContext;
	char		dbbuf[16];
	const char *args[1] = {dbbuf};
	StringInfoData out;

	snprintf(dbbuf, sizeof(dbbuf), "%u", db);
	initStringInfo(&out);
	sbx_xact_begin("pgsandbox: looking for what holds a snapshot");
	sbx_spi("SELECT a.pid, a.backend_type, r.rolname, d.datname"
			"  FROM pg_catalog.pg_stat_activity a"
			"  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.usesysid"
			"  LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) a.datid"
			" WHERE a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()"
			"   AND (a.datid OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
			"        OR a.pid IN (SELECT l.pid FROM pg_catalog.pg_locks l"
			"                      WHERE l.granted AND l.locktype OPERATOR(pg_catalog.=) 'object'"
			"                        AND l.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_database'::pg_catalog.regclass"
			"                        AND l.objid OPERATOR(pg_catalog.=) $1::pg_catalog.oid))"
			" ORDER BY a.pid LIMIT 10",
			SPI_OK_SELECT, 1, args);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *role = sbx_spi_text(i, 3);
		char	   *where = sbx_spi_text(i, 4);

		appendStringInfo(&out, "%s%s %s", i > 0 ? "; " : "", sbx_spi_text(i, 2),
						 sbx_spi_text(i, 1));
		if (role)
			appendStringInfo(&out, " of role %s", quote_identifier(role));
		if (where)
			appendStringInfo(&out, " in database %s", quote_identifier(where));
	}
	sbx_xact_commit();
	MemoryContextSwitchTo(outer);
	return out.len > 0 ? out.data : NULL;
}

/*
 * Run 'sql', a CREATE DATABASE ... TEMPLATE of database 'template' (OID),
 * in a transaction of its own, trying again while a lock or a session on
 * the template keeps it from starting, for at most pgsandbox.copy_lock_wait.
 * Returns how many milliseconds it waited beyond the first try (0 if it
 * did not), and in *held_by what held the template last (NULL if nothing
 * did).
 */
long
sbx_copy_template_waiting(const char *sql, const char *activity, Oid template,
						  char **held_by)
{
	MemoryContext outer = CurrentMemoryContext;
	TimestampTz start = GetCurrentTimestamp();
	bool		tried_again = false;

	*held_by = NULL;
	for (;;)
	{
		ErrorData  *edata;
		long		waited;

		PG_TRY();
		{
			sbx_run_utility_xact(sql, activity);
			edata = NULL;
		}
		PG_CATCH();
		{
			edata = sbx_catch_error(outer);
		}
		PG_END_TRY();

		waited = TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		if (edata == NULL)
			return tried_again ? waited : 0;
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
			edata->sqlerrcode != ERRCODE_OBJECT_IN_USE)
			ReThrowError(edata);

		if (*held_by)
			pfree(*held_by);
		*held_by = sbx_template_holders(template);
		if (waited >= sbx_copy_lock_wait)
			ereport(ERROR,
					(errcode(edata->sqlerrcode),
					 errmsg("could not copy the snapshot: %s", edata->message),
					 *held_by
					 ? errdetail("It was held for %ld ms, by %s.", waited, *held_by)
					 : errdetail("It was held for %ld ms.", waited),
					 errhint("A copy waits at most pgsandbox.copy_lock_wait for its snapshot.")));
		FreeErrorData(edata);
		tried_again = true;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SBX_TEMPLATE_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}
