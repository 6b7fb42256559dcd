/*-------------------------------------------------------------------------
 *
 * save.c
 *	  save(): keep a sandbox's state as a save, to reset it to (reset.c) or
 *	  to clone new sandboxes from.
 *
 * A save is a row of the sandbox table of kind 'save', made and kept as a
 * snapshot is: its own NOLOGIN role owns its objects, its database is
 * closed to connections and owned by the bootstrap superuser, and copies
 * of it are made by CREATE DATABASE ... TEMPLATE and given to their own
 * role.  It belongs to its sandbox (parent_id) and its owner: it counts
 * against the owner's quotas, only the owner (or an admin) may see or use
 * it, and it is retired, then dropped, with its sandbox.  A save of a masked
 * sandbox is masked: it copies what the sandbox holds.
 *
 * A save is a template copy of the sandbox's database, which needs it
 * without sessions: the sandbox is closed to connections and its sessions
 * are ended, as reset() does, until the save is done.  The copy's objects
 * are then given to the save's role with REASSIGN OWNED, which would give
 * away the sandbox's own database too (a shared object its role owns): so
 * for that time the bootstrap superuser owns it.  The sandbox's row is
 * marked (reset_started_at) until the save is done, so that a restart
 * between gives the database back to its role and reopens it
 * (sbx_reset_cleanup).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * May sandbox 'name' (of catalog id 'idbuf') have one more save, labelled
 * 'label'?  Raises an error if not.
 */
static void
sbx_check_save_label(const char *idbuf, const char *name, const char *label)
{
	const char *args[2] = {idbuf, label};
	bool		isnull;
	int64		saves;

	sbx_spi("SELECT pg_catalog.count(*), pg_catalog.bool_or(label = $2)"
			"  FROM pgsandbox.sandbox"
			" WHERE kind = 'save' AND parent_id = $1::bigint"
			"   AND status IN ('cloning', 'ready') AND retired_at IS NULL",
			SPI_OK_SELECT, 2, args);
	saves = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
								   &isnull)) && !isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("sandbox \"%s\" already has a save labelled \"%s\"",
						name, label)));
	if (saves >= sbx_max_saves_per_sandbox)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many saves of sandbox \"%s\"", name),
				 errdetail("It has %d saves, the most pgsandbox.max_saves_per_sandbox allows.",
						   (int) saves),
				 errhint("Drop the sandbox's saves with drop_save(), or ask an admin to raise the limit.")));
}

/*
 * Start a save for 'by' as clone job j: check the sandbox and the limits,
 * record the save, make its role, close the sandbox and end its sessions,
 * and leave the copy to the clone worker.  Once the save's row exists and
 * its sandbox is marked, job->sandbox_id and job->parent_id are set, for
 * sbx_save_fail.
 */
void
sbx_save_begin(int j, const SbxActor *by, const SbxRequest *req, SbxCloneJob *job)
{
	char		idbuf[32];
	const char *args[4];
	bool		isnull;
	const char *parent_name = req->name;
	SbxSandboxRow row;
	int64		parent_id;
	int64		save_id;
	SbxActor	owner_actor;
	int			ended;

	memset(job, 0, sizeof(*job));
	job->kind = SBX_KIND_SAVE;

	sbx_xact_begin("pgsandbox: starting a save");
	sbx_sandbox_to_change(by, req->name, "save", &row);
	parent_id = row.id;
	strlcpy(job->source, row.source, sizeof(job->source));
	job->schema_only = row.schema_only;
	job->masked = row.masked;
	if (row.read_only)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sandbox \"%s\" is read-only and cannot be saved", req->name),
				 errdetail("It grew past pgsandbox.max_sandbox_size."),
				 errhint("Reset it, or drop it.")));

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, parent_id);
	sbx_check_save_label(idbuf, req->name, req->target);

	/* a save counts against its sandbox's owner, whoever asks */
	owner_actor.role = row.owner;
	owner_actor.is_admin = by->is_admin;
	owner_actor.name = GetUserNameFromId(row.owner, false);
	sbx_check_quotas(&owner_actor);

	/*
	 * What the copy takes: the sandbox as it is now, not as last measured,
	 * which may be a minute and many rows ago.
	 */
	args[0] = idbuf;
	sbx_spi("UPDATE pgsandbox.sandbox SET size_bytes = pg_catalog.pg_database_size(db_oid),"
			" size_measured_at = pg_catalog.now()"
			" WHERE id = $1::bigint RETURNING size_bytes",
			SPI_OK_UPDATE_RETURNING, 1, args);
	if (SPI_processed == 1)
		row.size_bytes = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													 SPI_tuptable->tupdesc, 1, &isnull));
	sbx_check_budget(&owner_actor, SBX_KIND_SAVE, row.size_bytes, true);

	sbx_pick_name(job->name);
	strlcpy(job->dbname, job->name, sizeof(job->dbname));
	strlcpy(job->origin, req->target, sizeof(job->origin));
	args[0] = job->name;
	args[1] = idbuf;
	args[2] = req->target;
	args[3] = by->name;
	sbx_spi("INSERT INTO pgsandbox.sandbox (name, source, schema_only, status, labels,"
			" requested_by, owner_oid, ttl, kind, parent_id, label, data_as_of,"
			" rules_version, masked, source_generation, size_bytes)"
			" SELECT $1, p.source, p.schema_only, 'cloning', '{}', $4::name, p.owner_oid,"
			"        '0'::interval, 'save', p.id, $3, pg_catalog.now(),"
			"        p.rules_version, p.masked, p.source_generation, p.size_bytes"
			"   FROM pgsandbox.sandbox p WHERE p.id = $2::bigint"
			" RETURNING id", SPI_OK_INSERT_RETURNING, 4, args);
	save_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1, &isnull));
	sbx_record_reduced(save_id, parent_id, false);	/* as its sandbox is */
	args[0] = idbuf;
	sbx_spi("UPDATE pgsandbox.sandbox SET reset_started_at = pg_catalog.now()"
			" WHERE id = $1::bigint", SPI_OK_UPDATE, 1, args);
	sbx_log_event(job->name, "clone", by->name,
				  psprintf("save \"%s\" of sandbox \"%s\"", req->target, parent_name));
	sbx_xact_commit();

	/* from here on, a failure goes through sbx_save_fail */
	job->sandbox_id = save_id;
	job->parent_id = parent_id;
	sbx_progress_set(j, SBX_PHASE_CREATING, job->name, row.size_bytes);
	sbx_create_role(job);

	/* the copy needs the sandbox without sessions */
	ended = sbx_end_sessions(parent_name, InvalidOid, row.dboid, false, "save");
	sbx_xact_begin("pgsandbox: lending a sandbox's database to a save");
	sbx_run_utility(psprintf("ALTER DATABASE %s OWNER TO %s", quote_identifier(parent_name),
							 quote_identifier(GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false))),
					NULL);
	sbx_xact_commit();
	sbx_job_note(job, "%d session%s ended", ended, ended == 1 ? "" : "s");
	job->data_as_of = GetCurrentTimestamp();
	job->copy_stage = true;
	job->planned_dboid = sbx_plan_database_oid(job->sandbox_id);
	job->snapshot_id = parent_id;
	job->snapshot_dboid = row.dboid;
	strlcpy(job->snapshot_name, parent_name, sizeof(job->snapshot_name));
	strlcpy(job->snapshot_role, parent_name, sizeof(job->snapshot_role));
}

/*
 * A save is complete: lock it as a snapshot is, mark it ready, and give its
 * sandbox back its database, open.
 */
void
sbx_save_done(const SbxCloneJob *job, const char *actor, double seconds)
{
	char		idbuf[32];
	char		parent[32];
	const char *args[2] = {idbuf, parent};
	bool		isnull;
	int64		size;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	snprintf(parent, sizeof(parent), INT64_FORMAT, job->parent_id);
	sbx_xact_begin("pgsandbox: finishing a save");
	sbx_lock_copy_source(job->name);
	sbx_spi("UPDATE pgsandbox.sandbox SET status = 'ready', ready_at = pg_catalog.now(),"
			" size_bytes = pg_catalog.pg_database_size(db_oid),"
			" size_measured_at = pg_catalog.now()"
			" WHERE id = $1::bigint AND status = 'cloning'"
			" RETURNING size_bytes", SPI_OK_UPDATE_RETURNING, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "save " INT64_FORMAT " is no longer being made", job->sandbox_id);
	size = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
	sbx_run_utility(psprintf("ALTER DATABASE %s OWNER TO %s",
							 quote_identifier(job->snapshot_name),
							 quote_identifier(job->snapshot_role)), NULL);
	sbx_run_utility(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true",
							 quote_identifier(job->snapshot_name)), NULL);
	sbx_spi("UPDATE pgsandbox.sandbox SET reset_started_at = NULL"
			" WHERE id = $2::bigint", SPI_OK_UPDATE, 2, args);
	sbx_log_event(job->snapshot_name, "save", actor,
				  psprintf("saved as \"%s\" (label \"%s\"), " INT64_FORMAT " bytes, in %.1f s; %s",
						   job->name, job->origin, size, seconds, job->notes));
	sbx_xact_commit();
}

/*
 * A save failed: drop what it made, mark it failed, and open its sandbox
 * again.
 */
void
sbx_save_fail(const SbxCloneJob *job, const char *reason, const char *actor)
{
	if (job->sandbox_id > 0)
		sbx_clone_fail(job->sandbox_id, reason, "failed", actor);
	if (job->parent_id > 0)
		sbx_reset_cleanup(job->parent_id, false);
}

/*
 * drop_save(): retire a save of one of by's sandboxes (any, for an admin);
 * the worker's upkeep drops it once no copy of it is under way.
 */
void
sbx_drop_save(const SbxActor *by, const char *name)
{
	char		owner[16];
	const char *args[2] = {name, owner};

	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_xact_begin("pgsandbox: dropping a save");
	if (!sbx_catalog_has_saves())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("drop_save() needs version 0.8 of extension \"pgsandbox\""),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox SET retired_at = pg_catalog.now()"
					 " WHERE kind = 'save' AND status = 'ready' AND retired_at IS NULL"
					 "   AND name = $1%s", by->is_admin ? "" : " AND owner_oid = $2::oid"),
			SPI_OK_UPDATE, by->is_admin ? 1 : 2, args);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("save \"%s\" does not exist", name)));
	sbx_xact_commit();
}
