/*-------------------------------------------------------------------------
 *
 * reconcile.c
 *	  Reconciling the catalog with the cluster when the lifecycle worker
 *	  starts: what a restart left cloning, dropping, being reset or saved,
 *	  or ready without its database, is undone or finished, one sandbox at
 *	  a time.
 *
 * It sits above what it finishes: clones (lifecycle.c), drops (drop.c),
 * resets and saves (reset.c).  A sandbox whose reconciliation or clean-up
 * fails is tried again later: the list of those is kept here, and the
 * reconciliation timer (timers.c) runs a round over it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

/* ids (text) still to reconcile; in sbx_worker_cxt */
static List *sbx_reconcile_ids = NIL;

/*
 * Clone workers of a previous run may still be running (this worker
 * exited, and the postmaster did not restart): end them, and wait for them,
 * before what they were doing is reconciled, so that none of them makes a
 * database afterwards (a copy's first half is connected to the admin
 * database, not to the one it makes).
 */
void
sbx_end_orphan_clone_workers(void)
{
	for (int i = 0; i < 300; i++)
	{
		int64		left;
		bool		isnull;

		sbx_xact_begin("pgsandbox: ending the clone workers of a previous run");
		sbx_spi("SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(pid))"
				"  FROM pg_catalog.pg_stat_activity WHERE backend_type = 'pgsandbox clone'",
				SPI_OK_SELECT, 0, NULL);
		left = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
		sbx_xact_commit();
		if (left == 0)
			return;
		pg_usleep(100000L);
		CHECK_FOR_INTERRUPTS();
	}
	ereport(WARNING,
			(errmsg("clone workers of a previous run of the pgsandbox worker are still running")));
}

/*
 * What a start or a restart must reconcile: the ids of the sandboxes left
 * 'cloning' or 'dropping', and of the 'ready' ones whose database has gone
 * (a crash in the middle of a drop before 0.9).  Call it before any clone starts; each id is then
 * handled by sbx_reconcile_one, one at a time.
 */
List *
sbx_reconcile_todo(void)
{
	List	   *ids = NIL;
	List	   *texts;
	ListCell   *lc;

	sbx_xact_begin("pgsandbox: reconciling the catalog");
	sbx_spi(psprintf("SELECT id FROM pgsandbox.sandbox s"
			" WHERE status IN ('cloning', 'dropping')%s"
			"    OR (status = 'ready'"
			"        AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_database d"
			"                         WHERE d.datname = s.name"
			"                           AND (d.datdba = s.role_oid OR d.oid = s.db_oid)))"
			" ORDER BY id",
			sbx_catalog_has_saves() ? " OR reset_started_at IS NOT NULL" : ""),
			SPI_OK_SELECT, 0, NULL);
	texts = sbx_keep_column(1);
	sbx_xact_commit();

	foreach(lc, texts)
		ids = lappend(ids, sbx_keep(lfirst(lc)));
	return ids;
}

/*
 * Reconcile one sandbox found by sbx_reconcile_todo: a clone left unfinished
 * is undone, a drop left unfinished is finished, and a ready sandbox whose
 * database has gone has its role dropped and is marked dropped.  Whatever it finds already settled is left
 * alone, so that a failed attempt can simply be repeated.
 */
void
sbx_reconcile_one(int64 sandbox_id)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	char	   *status = NULL;
	char	   *name = NULL;

	/* a reset or a save interrupted: undone, or finished (reset.c) */
	sbx_reset_cleanup(sandbox_id, true);

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, sandbox_id);
	sbx_xact_begin("pgsandbox: reconciling a sandbox");
	sbx_spi("SELECT status, name FROM pgsandbox.sandbox s"
			" WHERE id = $1::bigint"
			"   AND (status IN ('cloning', 'dropping')"
			"        OR (status = 'ready'"
			"            AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_database d"
			"                             WHERE d.datname = s.name"
			"                               AND (d.datdba = s.role_oid OR d.oid = s.db_oid))))",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed == 1)
	{
		status = sbx_keep(sbx_spi_text(0, 1));
		name = sbx_keep(sbx_spi_text(0, 2));
	}
	sbx_xact_commit();

	if (status == NULL)
		return;
	if (strcmp(status, "cloning") == 0)
	{
		sbx_clone_fail(sandbox_id,
					   "The clone was interrupted by a restart of the server or of the pgsandbox worker.",
					   "cleanup", SBX_WORKER_ACTOR);
		ereport(LOG,
				(errmsg("cleaned up sandbox \"%s\", left unfinished by a restart", name)));
	}
	else if (strcmp(status, "dropping") == 0)
	{
		if (sbx_drop(name, &sbx_worker_actor, false, false, "cleanup") == SBX_DROP_DONE)
			ereport(LOG,
					(errmsg("finished dropping sandbox \"%s\", whose drop was interrupted", name)));
	}
	else if (strcmp(status, "ready") == 0)
	{
		if (sbx_drop(name, &sbx_worker_actor, false, false, "cleanup") == SBX_DROP_DONE)
			ereport(LOG,
					(errmsg("finished dropping sandbox \"%s\", whose database was gone", name)));
	}
}

/* Reconcile this sandbox again later (its clean-up failed now). */
void
sbx_reconcile_later(int64 sandbox_id)
{
	MemoryContext old = MemoryContextSwitchTo(sbx_worker_cxt);

	sbx_reconcile_ids = lappend(sbx_reconcile_ids,
								psprintf(INT64_FORMAT, sandbox_id));
	MemoryContextSwitchTo(old);
}

/* Whether a sandbox waits to be reconciled again. */
bool
sbx_reconcile_pending(void)
{
	return sbx_reconcile_ids != NIL;
}

static void
sbx_reconcile_one_step(void *arg)
{
	sbx_reconcile_one(*(int64 *) arg);
}

/*
 * A round of reconciliation: each sandbox waiting is tried once.  One that
 * fails is logged and goes back on the list, for the next round.
 */
void
sbx_reconcile_round(void)
{
	List	   *ids = sbx_reconcile_ids;
	ListCell   *lc;

	sbx_reconcile_ids = NIL;
	foreach(lc, ids)
	{
		int64		id = pg_strtoint64(lfirst(lc));
		char	   *what = psprintf("could not reconcile sandbox " INT64_FORMAT
									", will try again later", id);

		if (!sbx_try_or_warn(sbx_reconcile_one_step, &id, what))
			sbx_reconcile_later(id);
		pfree(what);
	}
	list_free_deep(ids);
}
