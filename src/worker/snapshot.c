/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *	  Snapshots of sources: what the lifecycle worker does to finish,
 *	  retire and drop them, and to keep their schedules.
 *
 * A snapshot is a database filled from its source like a sandbox, by a
 * clone job that no caller need wait for, and tracked by a row of kind
 * 'snapshot' in the sandbox table.  Clones then copy it with CREATE
 * DATABASE ... TEMPLATE instead of dumping the source.  Once complete it is
 * locked: its role loses its login, its database is closed to connections
 * and handed to the bootstrap superuser, so that no sandbox role and no
 * pgsandbox_user can ever enter it, and REASSIGN OWNED in a copy moves only
 * the copy's objects.
 *
 * A refresh builds a new snapshot beside the current one, which keeps
 * serving until the new one is ready; the old one is then retired, and
 * dropped once no copy of it is under way.  A failed build leaves the
 * current one serving and records its reason in the plan's last_error.
 *
 * Per source and kind (schema only, or with data), pgsandbox.snapshot_plan
 * holds the schedule, the pool size and the last error.  The lifecycle
 * worker is its only writer, like the sandbox table's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_roles.h"
#include "sbx_schedule.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Whether there is anything for the upkeep timer to look after: a plan, or
 * a snapshot or pool member that is live; and in *pools, whether a pool is
 * set.
 */
bool
sbx_snapshots_in_use(bool *pools)
{
	bool		in_use;
	bool		isnull;

	sbx_xact_begin("pgsandbox: looking for snapshots and pools");
	sbx_spi("SELECT EXISTS (SELECT 1 FROM pgsandbox.snapshot_plan)"
			"    OR EXISTS (SELECT 1 FROM pgsandbox.sandbox"
			"                WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready')),"
			" EXISTS (SELECT 1 FROM pgsandbox.snapshot_plan WHERE pool_size > 0)",
			SPI_OK_SELECT, 0, NULL);
	in_use = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
	*pools = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 2, &isnull));
	sbx_xact_commit();
	return in_use;
}

/*
 * The current snapshot of (source, schema_only), as a copy of it needs to
 * know it.  Returns false if there is none (or its role or database is
 * gone).
 */
bool
sbx_current_snapshot(const char *source, bool schema_only, SbxSnapshotRef *ref)
{
	const char *args[2] = {source, schema_only ? "true" : "false"};
	bool		found;
	bool		isnull;

	memset(ref, 0, sizeof(*ref));
	sbx_xact_begin("pgsandbox: looking up a snapshot");
	sbx_spi(psprintf("WITH %s"
					 " SELECT s.id, s.name, s.db_oid, r.rolname, s.data_as_of, s.size_bytes, %s"
					 "  FROM current_snapshot c"
					 "  JOIN pgsandbox.sandbox s ON s.id = c.id"
					 "  JOIN pg_catalog.pg_roles r ON r.oid = s.role_oid"
					 "  JOIN pg_catalog.pg_database d ON d.oid = s.db_oid AND d.datname = s.name"
					 " WHERE c.source = $1 AND c.schema_only = $2::boolean",
					 sbx_current_snapshots_cte(),
					 sbx_catalog_has_live() ? "s.live_slot IS NOT NULL" : "false"),
			SPI_OK_SELECT, 2, args);
	found = (SPI_processed == 1);
	if (found)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		ref->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		strlcpy(ref->name, sbx_spi_text(0, 2), sizeof(ref->name));
		ref->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
		strlcpy(ref->role, sbx_spi_text(0, 4), sizeof(ref->role));
		ref->data_as_of = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
		ref->size_bytes = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
		ref->live = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
	}
	sbx_xact_commit();
	return found;
}

/*
 * A snapshot's clone job has finished: lock the snapshot, mark it ready,
 * retire the one it replaces and clear the plan's last error.  Returns its
 * size in bytes.
 */
int64
sbx_snapshot_done(const SbxCloneJob *job, double seconds)
{
	char		idbuf[32];
	const char *args[2];
	bool		isnull;
	int64		size;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	args[0] = idbuf;
	args[1] = timestamptz_to_str(job->data_as_of);
	sbx_xact_begin("pgsandbox: finishing a snapshot");
	if (job->live_slot[0] != '\0')
		sbx_lock_live_snapshot(job->name, job->sandbox_id, job->live_tables);
	else
		sbx_lock_copy_source(job->name);
	sbx_spi("UPDATE pgsandbox.sandbox SET status = 'ready', ready_at = pg_catalog.now(),"
			" size_bytes = pg_catalog.pg_database_size(db_oid), data_as_of = $2::timestamptz"
			" WHERE id = $1::bigint AND status = 'cloning'"
			" RETURNING size_bytes", SPI_OK_UPDATE_RETURNING, 2, args);
	if (SPI_processed != 1)
		elog(ERROR, "snapshot " INT64_FORMAT " is no longer being built", job->sandbox_id);
	size = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));

	/*
	 * The newest ready snapshot serves; the others of its source and kind
	 * are retired (this one too, if a build started later finished first).
	 */
	sbx_spi("UPDATE pgsandbox.sandbox o SET retired_at = pg_catalog.now()"
			"  FROM pgsandbox.sandbox n"
			" WHERE n.id = $1::bigint AND o.kind = 'snapshot' AND o.status = 'ready'"
			"   AND o.retired_at IS NULL AND o.source = n.source"
			"   AND o.schema_only = n.schema_only"
			"   AND o.id < (SELECT max(m.id) FROM pgsandbox.sandbox m"
			"                WHERE m.kind = 'snapshot' AND m.status = 'ready'"
			"                  AND m.retired_at IS NULL"
			"                  AND m.source = n.source AND m.schema_only = n.schema_only)",
			SPI_OK_UPDATE, 1, args);
	sbx_spi("UPDATE pgsandbox.snapshot_plan p SET last_error = NULL"
			"  FROM pgsandbox.sandbox s"
			" WHERE s.id = $1::bigint AND p.source = s.source"
			"   AND p.schema_only = s.schema_only", SPI_OK_UPDATE, 1, args);
	sbx_log_event(job->name, "snapshot", SBX_WORKER_ACTOR,
				  job->notes[0]
				  ? psprintf("taken in %.1f s, " INT64_FORMAT " bytes; %s", seconds, size, job->notes)
				  : psprintf("taken in %.1f s, " INT64_FORMAT " bytes", seconds, size));
	sbx_xact_commit();
	return size;
}

/*
 * In a worker transaction: lock database 'name' (and its role of the same
 * name) as a snapshot or a save is kept, so that only copies read it: its
 * role cannot log in, and the database takes no connection and belongs to
 * the bootstrap superuser.
 */
void
sbx_lock_copy_source(const char *name)
{
	char	   *superuser = GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false);

	sbx_run_utility(psprintf("ALTER ROLE %s NOLOGIN", quote_identifier(name)), NULL);
	sbx_run_utility(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS false",
							 quote_identifier(name)), NULL);
	sbx_run_utility(psprintf("ALTER DATABASE %s OWNER TO %s",
							 quote_identifier(name), quote_identifier(superuser)),
					NULL);
}

/*
 * Serve a change to a source's snapshot plan: SNAPSHOT makes sure the plan
 * exists, SCHEDULE sets or clears the schedule (the first run is its next
 * time from now), SET_POOL sets the pool's size.  The caller checked the
 * arguments; the source is checked again here.
 */
void
sbx_plan_update(const SbxActor *by, const SbxRequest *req)
{
	const char *args[4];
	char		size[16];
	SbxCloneJob job;

	args[0] = req->source;
	args[1] = req->schema_only ? "true" : "false";
	sbx_xact_begin("pgsandbox: changing a snapshot plan");
	/* removing a schedule or a pool needs no right to copy data */
	sbx_check_clone_allowed(by, req->source,
							req->schema_only ||
							(req->kind == SBX_REQ_SCHEDULE && req->schedule[0] == '\0') ||
							(req->kind == SBX_REQ_SET_POOL && req->pool_size == 0),
							&job);
	explicit_bzero(job.conninfo, sizeof(job.conninfo));
	/* removing a schedule or a pool that was never set makes no plan */
	if (!((req->kind == SBX_REQ_SCHEDULE && req->schedule[0] == '\0') ||
		  (req->kind == SBX_REQ_SET_POOL && req->pool_size == 0)))
		sbx_spi("INSERT INTO pgsandbox.snapshot_plan (source, schema_only)"
				" VALUES ($1, $2::boolean) ON CONFLICT DO NOTHING", SPI_OK_INSERT, 2, args);
	if (req->kind == SBX_REQ_SCHEDULE)
	{
		TimestampTz next = 0;

		if (req->schedule[0] != '\0')
		{
			SbxSchedule schedule;

			sbx_schedule_parse(req->schedule, &schedule);
			next = sbx_schedule_next(&schedule, GetCurrentTimestamp());
		}
		args[2] = req->schedule[0] ? req->schedule : NULL;
		args[3] = req->schedule[0] ? timestamptz_to_str(next) : NULL;
		sbx_spi("UPDATE pgsandbox.snapshot_plan SET schedule = $3,"
				" next_run_at = $4::timestamptz"
				" WHERE source = $1 AND schema_only = $2::boolean", SPI_OK_UPDATE, 4, args);
	}
	else if (req->kind == SBX_REQ_SET_POOL)
	{
		snprintf(size, sizeof(size), "%d", req->pool_size);
		args[2] = size;
		sbx_spi("UPDATE pgsandbox.snapshot_plan SET pool_size = $3::integer"
				" WHERE source = $1 AND schema_only = $2::boolean", SPI_OK_UPDATE, 3, args);
	}
	if (req->locale.encoding[0] != '\0')
	{
		const char *loc[7] = {req->source, req->schema_only ? "true" : "false",
			req->locale.encoding, req->locale.collate, req->locale.ctype,
			req->locale.provider == 'i' ? "i" : req->locale.provider == 'b' ? "b" : "c",
		req->locale.icu_locale};

		sbx_spi("UPDATE pgsandbox.snapshot_plan SET source_locale = ARRAY[$3, $4, $5, $6, $7]"
				" WHERE source = $1 AND schema_only = $2::boolean", SPI_OK_UPDATE, 7, loc);
	}
	sbx_xact_commit();
}

/*
 * The source's encoding and locale as the plan last recorded them, for a
 * build no caller asked for; left empty if not known.
 */
void
sbx_plan_locale(const char *source, bool schema_only, SbxLocale *locale)
{
	const char *args[2] = {source, schema_only ? "true" : "false"};

	memset(locale, 0, sizeof(*locale));
	sbx_xact_begin("pgsandbox: reading a snapshot plan");
	sbx_spi("SELECT source_locale[1], source_locale[2], source_locale[3],"
			" source_locale[4], source_locale[5] FROM pgsandbox.snapshot_plan"
			" WHERE source = $1 AND schema_only = $2::boolean"
			"   AND source_locale IS NOT NULL", SPI_OK_SELECT, 2, args);
	if (SPI_processed == 1)
	{
		strlcpy(locale->encoding, sbx_spi_text(0, 1), sizeof(locale->encoding));
		strlcpy(locale->collate, sbx_spi_text(0, 2), sizeof(locale->collate));
		strlcpy(locale->ctype, sbx_spi_text(0, 3), sizeof(locale->ctype));
		locale->provider = sbx_spi_text(0, 4)[0];
		strlcpy(locale->icu_locale, sbx_spi_text(0, 5), sizeof(locale->icu_locale));
	}
	sbx_xact_commit();
}

/*
 * drop_snapshot(): retire the source's snapshots of one kind or both, ready
 * or being built.  They serve no new copy from now on and are dropped as
 * soon as no copy of them is under way (sbx_drop_one_retired), a build once
 * it is complete.
 */
void
sbx_retire_snapshots(const SbxActor *by, const char *source, bool both_kinds,
					 bool schema_only)
{
	const char *args[3] = {source, both_kinds ? "true" : "false",
	schema_only ? "true" : "false"};

	sbx_xact_begin("pgsandbox: retiring snapshots");
	if (!by->is_admin)
		sbx_report_source_denied(source, false);
	sbx_spi("SELECT 1 FROM pgsandbox.source WHERE name = $1", SPI_OK_SELECT, 1, args);
	if (SPI_processed == 0)
		sbx_report_source_denied(source, true);
	/* a build under way is retired too: it is dropped once complete */
	sbx_spi("UPDATE pgsandbox.sandbox SET retired_at = pg_catalog.now()"
			" WHERE kind = 'snapshot' AND status IN ('cloning', 'ready')"
			"   AND retired_at IS NULL"
			"   AND source = $1 AND ($2::boolean OR schema_only = $3::boolean)",
			SPI_OK_UPDATE, 3, args);
	sbx_xact_commit();
}

/*
 * Drop one snapshot that serves no more: retired, or of a source that was
 * removed (and maybe added again since, which makes a new source).  One that a copy still reads is left for a later step.  Returns
 * whether one was dropped (there may be more).
 */
bool
sbx_drop_one_retired(void)
{
	sbx_xact_begin("pgsandbox: looking for snapshots to drop");
	return sbx_drop_first_found(psprintf("SELECT s.id, CASE WHEN s.kind = 'save'"
					 "                    THEN 'save of a dropped sandbox, or dropped by drop_save()'"
					 "                  WHEN o.name IS NULL THEN 'snapshot of a removed source'"
					 "                  WHEN s.retired_at IS NOT NULL"
					 "                    THEN 'snapshot replaced by a newer one, or dropped by drop_snapshot()'"
					 "                  ELSE 'snapshot taken before the source''s rules changed' END"
					 "  FROM pgsandbox.sandbox s"
					 "  LEFT JOIN pgsandbox.source o"
					 "    ON o.name = s.source AND %s"
					 " WHERE s.status = 'ready'"
					 "   AND ((s.kind = 'snapshot'"
					 "         AND (s.retired_at IS NOT NULL OR o.name IS NULL%s))"
					 "        OR (s.kind = 'save' AND s.retired_at IS NOT NULL))"
					 " ORDER BY s.id",
					 sbx_same_source_sql(),
					 sbx_if_rules(" OR (NOT s.schema_only AND s.rules_version <> o.rules_version)", "")));
}

/*
 * Whether a scheduled snapshot build is due, without starting it (the
 * worker keeps a clone job for it then).  Needs a worker transaction.
 */
bool
sbx_scheduled_build_due(void)
{
	sbx_spi("SELECT 1 FROM pgsandbox.snapshot_plan p"
			" WHERE p.next_run_at <= pg_catalog.now()"
			"   AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
			"                    WHERE s.kind = 'snapshot' AND s.status = 'cloning'"
			"                      AND s.source = p.source AND s.schema_only = p.schema_only)"
			" LIMIT 1", SPI_OK_SELECT, 0, NULL);
	return SPI_processed > 0;
}

/*
 * The next snapshot whose schedule is due, or whose retake a change of its
 * source's rules asked for (rules.c), if any, and no build of it is under
 * way: its next run is set from now (none without a schedule), and true
 * returned with its source and kind.  A build that fails waits for the
 * next run.
 */
bool
sbx_next_scheduled_build(char *source, bool *schema_only)
{
	bool		found;
	bool		isnull;

	sbx_xact_begin("pgsandbox: looking for scheduled snapshots");
	sbx_spi("SELECT p.source, p.schema_only, p.schedule FROM pgsandbox.snapshot_plan p"
			" WHERE p.next_run_at <= pg_catalog.now()"
			"   AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
			"                    WHERE s.kind = 'snapshot' AND s.status = 'cloning'"
			"                      AND s.source = p.source AND s.schema_only = p.schema_only)"
			" ORDER BY p.next_run_at LIMIT 1", SPI_OK_SELECT, 0, NULL);
	found = (SPI_processed == 1);
	if (found)
	{
		SbxSchedule schedule;
		const char *args[3];
		char	   *text = sbx_spi_text(0, 3);

		strlcpy(source, sbx_spi_text(0, 1), NAMEDATALEN);
		*schema_only = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 2, &isnull));
		args[0] = source;
		args[1] = *schema_only ? "true" : "false";
		args[2] = NULL;			/* no schedule: a retake once rules changed */
		if (text != NULL)
		{
			sbx_schedule_parse(text, &schedule);
			args[2] = timestamptz_to_str(sbx_schedule_next(&schedule, GetCurrentTimestamp()));
		}
		sbx_spi("UPDATE pgsandbox.snapshot_plan SET next_run_at = $3::timestamptz"
				" WHERE source = $1 AND schema_only = $2::boolean", SPI_OK_UPDATE, 3, args);
	}
	sbx_xact_commit();
	return found;
}
