/*-------------------------------------------------------------------------
 *
 * disk_budget.c
 *	  The disk budget: refusing copies that would pass it, measuring the
 *	  sandboxes in use, and making one that grew too large read-only.
 *
 * The directory a crash left of a database pgsandbox was making counts
 * too, by the size its clone expected, until the worker removes it
 * (orphans.c).
 *
 * Every database pgsandbox makes is counted by the size_bytes of its
 * catalog row.  A row being cloned holds the size its copy is expected to
 * reach (its snapshot's, the source's, or an empty database's for a dump
 * of the schema only), so that copies under way count as well; a ready
 * one holds what was last measured.  A new copy is refused, before
 * anything is created, if it would take the total past
 * pgsandbox.max_total_size or its owner's sandboxes past
 * pgsandbox.max_size_per_owner (SQLSTATE 53100, with the figures).
 *
 * Sizes are logical (pg_database_size): a thin copy that shares its blocks
 * with its snapshot counts in full.
 *
 * Measuring every database on every pass would cost a walk of each one's
 * directory.  Only a sandbox can grow, and only while a session is open in
 * it, so a pass measures the sandboxes that have sessions now, had some at
 * their last measurement, or were logged into since (and those last
 * measured past a limit lowered since, or whose making read-only failed);
 * a bounded number of them, the longest unmeasured first.
 *
 * A sandbox measured past pgsandbox.max_sandbox_size is made read-only
 * (read_only.c): its database refuses writes from then on, its sessions are
 * ended once so that new ones start read-only, and an event names the
 * limit.  It stays readable.  Neither extend() nor a larger limit makes it
 * writable again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/procarray.h"
#include "utils/builtins.h"

/* sandboxes a pass measures at most */
#define SBX_MEASURE_BATCH	32

#define SBX_MB	((int64) 1024 * 1024)

static char *
sbx_pretty_size(int64 bytes)
{
	return text_to_cstring(DatumGetTextPP(DirectFunctionCall1(pg_size_pretty,
															  Int64GetDatum(bytes))));
}

/*
 * In a worker transaction: the size a new copy is expected to reach.  A
 * copy of a snapshot, its size; a dump of the schema only, an empty
 * database's; a dump with data, the source's size as the caller probed it,
 * or else its last snapshot's with data.  0 if nothing tells.
 */
int64
sbx_expected_size(const SbxCloneSpec *spec)
{
	const char *args[1] = {spec->source};
	int64		expected = 0;
	bool		isnull;

	if (spec->snapshot)
		return spec->snapshot->size_bytes;
	if (!sbx_catalog_has_usage())
		return 0;
	if (spec->schema_only)
		sbx_spi("SELECT pg_catalog.pg_database_size(oid) FROM pg_catalog.pg_database"
				" WHERE datname = 'template0'", SPI_OK_SELECT, 0, NULL);
	else if (spec->source_bytes > 0)
		return spec->source_bytes;
	else
		sbx_spi("SELECT s.size_bytes FROM pgsandbox.sandbox s"
				" WHERE s.kind = 'snapshot' AND s.status IN ('ready', 'dropped')"
				"   AND s.source = $1 AND NOT s.schema_only AND s.size_bytes IS NOT NULL"
				" ORDER BY s.id DESC LIMIT 1", SPI_OK_SELECT, 1, args);
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			expected = DatumGetInt64(d);
	}
	return expected;
}

/*
 * In a worker transaction: refuse a copy of 'expected' bytes that would
 * take pgsandbox's databases past pgsandbox.max_total_size (adds_to_total:
 * a new database, not a pool member handed out) or, for a sandbox, its
 * owner's past pgsandbox.max_size_per_owner.
 */
void
sbx_check_budget(const SbxActor *by, SbxCopyKind kind, int64 expected,
				 bool adds_to_total)
{
	char		owner[16];
	const char *args[1] = {owner};
	bool		isnull;
	Datum		d;
	int64		total;
	int64		mine;

	/* before the update, copies under way have no expected size to count */
	if ((sbx_max_total_size == 0 && sbx_max_size_per_owner == 0) ||
		!sbx_catalog_has_usage())
		return;
	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_spi(psprintf("SELECT COALESCE(pg_catalog.sum(size_bytes), 0)::bigint + %s,"
					 "       COALESCE(pg_catalog.sum(size_bytes)"
					 "                FILTER (WHERE kind IN ('sandbox', 'save') AND owner_oid = $1::oid), 0)::bigint"
					 "  FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready')",
					 sbx_orphan_bytes_sql()),
			SPI_OK_SELECT, 1, args);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	total = DatumGetInt64(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	mine = DatumGetInt64(d);

	/* what all of pgsandbox's databases take is for admins to know */
	if (adds_to_total && sbx_max_total_size > 0 &&
		total + expected > sbx_max_total_size * SBX_MB)
		ereport(ERROR,
				(errcode(ERRCODE_DISK_FULL),
				 errmsg("a new %s would pass pgsandbox's disk budget", sbx_kind_names[kind]),
				 by->is_admin
				 ? errdetail("It needs about %s; pgsandbox's databases take %s of the %s pgsandbox.max_total_size allows.",
							 sbx_pretty_size(expected), sbx_pretty_size(total),
							 sbx_pretty_size(sbx_max_total_size * SBX_MB))
				 : errdetail("It needs about %s, more than is left of the %s pgsandbox.max_total_size allows.",
							 sbx_pretty_size(expected),
							 sbx_pretty_size(sbx_max_total_size * SBX_MB)),
				 errhint("Drop sandboxes that are no longer needed, or ask an admin to raise pgsandbox.max_total_size.")));
	if ((kind == SBX_KIND_SANDBOX || kind == SBX_KIND_SAVE) && sbx_max_size_per_owner > 0 &&
		mine + expected > sbx_max_size_per_owner * SBX_MB)
		ereport(ERROR,
				(errcode(ERRCODE_DISK_FULL),
				 errmsg("a new sandbox would pass the disk budget of role \"%s\"", by->name),
				 errdetail("It needs about %s; the role's sandboxes take %s of the %s pgsandbox.max_size_per_owner allows.",
						   sbx_pretty_size(expected), sbx_pretty_size(mine),
						   sbx_pretty_size(sbx_max_size_per_owner * SBX_MB)),
				 errhint("Drop sandboxes that are no longer needed.")));
}

/*
 * In a worker transaction: whether a copy of 'expected' bytes fits in the
 * total budget.  A pool fill that does not is held back (worker.c).
 */
bool
sbx_budget_allows(int64 expected)
{
	bool		isnull;
	int64		total;

	if (sbx_max_total_size == 0 || !sbx_catalog_has_usage())
		return true;
	sbx_spi(psprintf("SELECT COALESCE(pg_catalog.sum(size_bytes), 0)::bigint + %s"
					 "  FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready')",
					 sbx_orphan_bytes_sql()),
			SPI_OK_SELECT, 0, NULL);
	total = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
	return total + expected <= sbx_max_total_size * SBX_MB;
}

/*
 * Make a sandbox that grew past pgsandbox.max_sandbox_size read-only: set
 * its database so, record it, and end its sessions, so that every session
 * from now on starts read-only.  The way is cleared before the database is
 * altered (a session of its role may hold its catalog row) and again after:
 * every prepared transaction in it is rolled back, since one prepared while
 * it was writable would otherwise commit its writes later, and every
 * session found in the process array is ended (one that read the
 * database's settings just before they changed may not show in
 * pg_stat_activity yet).  A step blocked on a lock is recorded, and the
 * next pass, which finds the sandbox still past the limit and not
 * read-only, tries again.
 */
typedef struct SbxReadOnlyStep
{
	const char *id;
	const char *name;
	const char *db_oid;
	int64		size;
} SbxReadOnlyStep;

static void
sbx_make_read_only_step(void *arg)
{
	const SbxReadOnlyStep *step = arg;
	MemoryContext cxt = CurrentMemoryContext;
	const char *name = step->name;
	int64		size = step->size;
	const char *args[1] = {step->id};
	const char *db = quote_identifier(name);
	Oid			dboid = atooid(step->db_oid);

	PG_TRY();
	{
		(void) sbx_clear_way(name, InvalidOid, dboid, false);
		sbx_xact_begin("pgsandbox: making a sandbox read-only");
		sbx_run_utility(psprintf("ALTER DATABASE %s SET default_transaction_read_only = on", db),
						NULL);
		sbx_run_utility(psprintf("ALTER DATABASE %s SET pgsandbox.read_only = on", db), NULL);
		sbx_xact_commit();
		(void) sbx_clear_way(name, InvalidOid, dboid, false);
	}
	PG_CATCH();
	{
		sbx_rethrow_blocked(sbx_catch_error(cxt), name, "make read-only", InvalidOid, dboid,
							NULL);
	}
	PG_END_TRY();

	/* recorded last: if anything above failed, the next pass does it again */
	sbx_xact_begin("pgsandbox: recording a read-only sandbox");
	sbx_spi("UPDATE pgsandbox.sandbox SET read_only_at = pg_catalog.now()"
			" WHERE id = $1::bigint AND read_only_at IS NULL",
			SPI_OK_UPDATE, 1, args);
	sbx_log_event(name, "read_only", SBX_WORKER_ACTOR,
				  psprintf("grew to %s, past pgsandbox.max_sandbox_size (%s): writes are refused from now on",
						   sbx_pretty_size(size),
						   sbx_pretty_size(sbx_max_sandbox_size * SBX_MB)));
	sbx_xact_commit();
	ereport(LOG,
			(errmsg("sandbox \"%s\" is read-only: it grew to %s, past pgsandbox.max_sandbox_size",
					name, sbx_pretty_size(size))));
}

/*
 * The lifecycle worker's timer: measure the sandboxes in use, at most
 * SBX_MEASURE_BATCH of them, and make those that grew too large read-only.
 */
void
sbx_measure_sizes(void)
{
	char		limit[32];
	char		batch[16];
	const char *args[2] = {limit, batch};
	List	   *ids;
	List	   *names;
	List	   *dbs;
	List	   *sizes;
	ListCell   *l1,
			   *l2,
			   *l3,
			   *l4;

	snprintf(limit, sizeof(limit), INT64_FORMAT,
			 sbx_max_sandbox_size > 0 ? sbx_max_sandbox_size * SBX_MB : (int64) -1);
	snprintf(batch, sizeof(batch), "%d", SBX_MEASURE_BATCH);
	sbx_xact_begin("pgsandbox: measuring sandboxes");
	if (!sbx_catalog_has_usage())
	{
		sbx_xact_commit();
		return;
	}
	/* a sandbox being reset or saved is measured once that is done */
	sbx_spi(psprintf("WITH busy AS ("
			"  SELECT DISTINCT a.datid FROM pg_catalog.pg_stat_activity a"
			"   WHERE a.datid IS NOT NULL AND a.backend_type = 'client backend'),"
			" todo AS ("
			"  SELECT s.id, b.datid IS NOT NULL AS busy FROM pgsandbox.sandbox s"
			"    JOIN pg_catalog.pg_database d ON d.oid = s.db_oid AND d.datname = s.name"
			"    LEFT JOIN busy b ON b.datid = s.db_oid"
			"   WHERE s.status = 'ready' AND s.kind = 'sandbox'%s"
			"     AND (b.datid IS NOT NULL OR s.size_busy OR s.size_measured_at IS NULL"
			"          OR s.last_used_at > s.size_measured_at"
			"          OR ($1::bigint > 0 AND s.read_only_at IS NULL"
			"              AND s.size_bytes > $1::bigint))"
			"   ORDER BY s.size_measured_at NULLS FIRST LIMIT $2::integer),"
			" measured AS ("
			"  UPDATE pgsandbox.sandbox s"
			"     SET size_bytes = pg_catalog.pg_database_size(s.db_oid),"
			"         size_measured_at = pg_catalog.now(), size_busy = t.busy"
			"    FROM todo t WHERE s.id = t.id"
			"  RETURNING s.id, s.name, s.db_oid, s.size_bytes, s.read_only_at)"
			" SELECT m.id, m.name, m.db_oid, m.size_bytes FROM measured m"
			"  WHERE $1::bigint > 0 AND m.read_only_at IS NULL"
			"    AND m.size_bytes > $1::bigint",
			sbx_catalog_has_saves() ? " AND s.reset_started_at IS NULL" : ""),
			SPI_OK_SELECT, 2, args);
	ids = sbx_keep_column(1);
	names = sbx_keep_column(2);
	dbs = sbx_keep_column(3);
	sizes = sbx_keep_column(4);
	sbx_xact_commit();

	/* one that fails is measured again, and tried again once its backoff is over */
	forfour(l1, ids, l2, names, l3, dbs, l4, sizes)
	{
		SbxReadOnlyStep step = {lfirst(l1), lfirst(l2), lfirst(l3),
								pg_strtoint64(lfirst(l4))};
		char	   *key = psprintf("read-only %s", step.name);
		char	   *what = psprintf("could not make sandbox \"%s\" read-only, will try again later",
									step.name);

		(void) sbx_try_with_backoff(key, sbx_make_read_only_step, &step, what);
		pfree(key);
		pfree(what);
	}
	list_free_deep(ids);
	list_free_deep(names);
	list_free_deep(dbs);
	list_free_deep(sizes);
}
