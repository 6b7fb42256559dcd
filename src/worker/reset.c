/*-------------------------------------------------------------------------
 *
 * reset.c
 *	  reset(): put a sandbox back as it started, as its source is now, or as
 *	  one of its saves holds it, in place, under the same name, role and
 *	  password.
 *
 * A reset never touches the sandbox's database until a new one is ready.
 * The new one is filled beside it, under the name <name>_reset and owned by
 * the sandbox's role, by the clone workers, as a clone would be: a copy of a
 * snapshot or a save (CREATE DATABASE ... TEMPLATE, then the copied objects
 * given to the role), or a dump of the source restored as the role.  Only
 * then does the lifecycle worker swap the two:
 *
 *	 1. the sandbox's database and the new one are closed to connections and
 *		their sessions ended (prepared transactions rolled back first);
 *	 2. in one transaction, the old database is renamed <name>_old, the new
 *		one takes the name and is opened, and the catalog row points at it;
 *	 3. <name>_old is dropped.
 *
 * A failure before step 2 commits leaves the old database under the name,
 * reopened, and <name>_reset dropped.  The row's reset_started_at marks a
 * reset (or a save, save.c) under way: drops and the reaper leave such a
 * sandbox alone, and after a restart sbx_reset_cleanup finishes or undoes
 * whatever was left, dropping only a <name>_reset or <name>_old that the
 * sandbox's role owns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "libpq/crypt.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_masking.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Close database 'name' (dboid), whose role is 'role', to connections and
 * end its sessions, as DROP DATABASE ... WITH (FORCE) would, for 'step'
 * ("reset", "save").  The way is cleared first (lock_holders.c): the
 * sessions are ended before the database is altered, since one of them
 * may hold its catalog row in an open transaction.  Prepared transactions
 * in the database itself are rolled back with rollback_prepared, and are an
 * error otherwise; those elsewhere that hold the role or the database are
 * rolled back in any case.  A step blocked on a lock is recorded and raised
 * (55P03).  Returns how many client sessions were ended.
 */
int
sbx_end_sessions(const char *name, Oid role, Oid dboid, bool rollback_prepared,
				 const char *step)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		oidbuf[16];
	const char *args[1] = {oidbuf};
	bool		isnull;
	int64		prepared;
	volatile int64 sessions = 0;

	snprintf(oidbuf, sizeof(oidbuf), "%u", dboid);
	sbx_xact_begin("pgsandbox: looking for a database's sessions");
	sbx_spi("SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_xacts p"
			"          JOIN pg_catalog.pg_database d ON d.datname = p.database"
			"         WHERE d.oid = $1::oid),"
			"       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity"
			"         WHERE datid = $1::oid AND backend_type = 'client backend')",
			SPI_OK_SELECT, 1, args);
	prepared = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
	sessions = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 2, &isnull));
	sbx_xact_commit();
	if (prepared > 0 && !rollback_prepared)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("sandbox \"%s\" has prepared transactions", name),
				 errhint("Commit or roll them back (COMMIT PREPARED, ROLLBACK PREPARED) first.")));

	PG_TRY();
	{
		(void) sbx_clear_way(name, role, dboid, false);
		sbx_run_utility_xact(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS false",
									  quote_identifier(name)),
							 "pgsandbox: closing a sandbox database");
		/* and those that came in between */
		sbx_xact_begin("pgsandbox: ending a sandbox's sessions");
		TerminateOtherDBBackends(dboid);
		sbx_xact_commit();
	}
	PG_CATCH();
	{
		sbx_rethrow_blocked(sbx_catch_error(cxt), name, step, role, dboid,
							"Try again once the session or transaction named has ended.");
	}
	PG_END_TRY();
	return (int) sessions;
}

/*
 * In a worker transaction: the sandbox 'name' that 'by' may change with
 * 'what' (reset or save), into *row; an error if 'by' may not see it, or if
 * it cannot take that now: not ready, being reset or saved, being dropped.
 */
void
sbx_sandbox_to_change(const SbxActor *by, const char *name, const char *what,
					  SbxSandboxRow *row)
{
	char		owner[16];
	const char *args[2] = {name, owner};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *status;
	bool		busy;
	bool		can_login;

	if (!sbx_catalog_has_saves())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s() needs version 0.8 of extension \"pgsandbox\"", what),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_spi(psprintf("SELECT s.id, s.status, s.source, s.schema_only, s.db_oid, s.owner_oid,"
					 "       COALESCE(s.size_bytes, 0), COALESCE(s.snapshot_id, 0),"
					 "       s.expires_at <= pg_catalog.now(), s.read_only_at IS NOT NULL,"
					 "       s.masked, s.reset_started_at IS NOT NULL,"
					 "       COALESCE(r.rolcanlogin, false)"
					 "  FROM pgsandbox.sandbox s"
					 "  LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.role_oid"
					 " WHERE s.name = $1 AND s.kind = 'sandbox'%s",
					 by->is_admin ? "" : " AND s.owner_oid = $2::oid"),
			SPI_OK_SELECT, by->is_admin ? 1 : 2, args);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name)));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(row, 0, sizeof(*row));
	row->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	status = sbx_spi_text(0, 2);
	strlcpy(row->source, sbx_spi_text(0, 3), sizeof(row->source));
	row->schema_only = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
	row->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &isnull));
	row->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 6, &isnull));
	row->size_bytes = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
	row->origin_id = DatumGetInt64(SPI_getbinval(tup, desc, 8, &isnull));
	row->expired = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
	row->read_only = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
	row->masked = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
	busy = DatumGetBool(SPI_getbinval(tup, desc, 12, &isnull));
	can_login = DatumGetBool(SPI_getbinval(tup, desc, 13, &isnull));

	if (strcmp(status, "cloning") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sandbox \"%s\" is still being cloned", name),
				 errhint("Call %s() once its clone has finished.", what)));
	if (strcmp(status, "ready") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name),
				 errdetail("It is %s.", status)));
	if (busy)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("sandbox \"%s\" is being reset or saved", name),
				 errhint("Try again once that has finished.")));
	/* a drop that waits for a janitor took its login first */
	if (!can_login)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("sandbox \"%s\" is being dropped", name)));
}

/*
 * In a worker transaction: the snapshot or save a sandbox was copied from
 * (origin_id), if it still serves: not retired, of the source as it is,
 * read under its rules as they are (the catalog has them: saves came with
 * 0.8).
 */
static bool
sbx_origin_ref(int64 origin_id, SbxSnapshotRef *ref, bool *is_save)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	bool		isnull;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, origin_id);
	sbx_spi(psprintf("SELECT s.id, s.name, s.db_oid, s.data_as_of, s.size_bytes,"
					 "       s.kind = 'save'"
					 "  FROM pgsandbox.sandbox s"
					 "  JOIN pg_catalog.pg_database d ON d.oid = s.db_oid AND d.datname = s.name"
					 " WHERE s.id = $1::bigint AND s.status = 'ready' AND s.retired_at IS NULL"
					 "   AND s.kind IN ('snapshot', 'save')"
					 "   AND EXISTS (SELECT 1 FROM pgsandbox.source o"
					 "                WHERE o.name = s.source AND %s"
					 "                  AND (s.schema_only OR s.rules_version = o.rules_version))",
					 sbx_same_source_sql()),
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		return false;
	sbx_ref_from_row(ref);
	*is_save = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6,
										  &isnull));
	return true;
}

/*
 * In a worker transaction: the encoding and locale of database dboid, for
 * a reset's new database made by a dump.
 */
static void
sbx_database_locale(Oid dboid, SbxLocale *locale)
{
	char		oidbuf[16];
	const char *args[1] = {oidbuf};

	snprintf(oidbuf, sizeof(oidbuf), "%u", dboid);
	/* the ICU or builtin locale's column changed its name in 17 */
	sbx_spi("SELECT pg_catalog.pg_encoding_to_char(d.encoding), d.datcollate, d.datctype,"
			"       d.datlocprovider::text,"
			"       COALESCE(pg_catalog.to_jsonb(d) ->> 'daticulocale',"
			"                pg_catalog.to_jsonb(d) ->> 'datlocale', '')"
			"  FROM pg_catalog.pg_database d WHERE d.oid = $1::oid",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "database %u of a sandbox is gone", dboid);
	memset(locale, 0, sizeof(*locale));
	strlcpy(locale->encoding, sbx_spi_text(0, 1), sizeof(locale->encoding));
	strlcpy(locale->collate, sbx_spi_text(0, 2), sizeof(locale->collate));
	strlcpy(locale->ctype, sbx_spi_text(0, 3), sizeof(locale->ctype));
	locale->provider = sbx_spi_text(0, 4)[0];
	strlcpy(locale->icu_locale, sbx_spi_text(0, 5), sizeof(locale->icu_locale));
}

/*
 * In a worker transaction: the sandbox's owner, for its quotas and budget.
 */
static void
sbx_owner_actor(Oid owner, bool is_admin, SbxActor *actor)
{
	actor->role = owner;
	actor->is_admin = is_admin;
	actor->name = GetUserNameFromId(owner, false);
}

/*
 * A dump is filled as a temporary role, <name>_reset, with a password no one
 * else knows: the sandbox's role, whose password its owner knows, must not
 * log into a database in which the clone worker runs superuser steps.  It
 * is recorded (reset_role) before anything is made with it.
 */
static void
sbx_create_reset_role(SbxCloneJob *job)
{
	char		idbuf[32];
	const char *args[2] = {job->name, idbuf};
	char	   *verifier;
	char	   *leftover;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);

	/* a previous reset's role, left behind, goes first */
	sbx_xact_begin("pgsandbox: looking for a previous reset's role");
	sbx_spi("SELECT reset_role FROM pgsandbox.sandbox WHERE id = $2::bigint",
			SPI_OK_SELECT, 2, args);
	leftover = SPI_processed == 1 ? sbx_keep(sbx_spi_text(0, 1)) : NULL;
	sbx_xact_commit();
	if (leftover != NULL && !sbx_drop_role(job->name, leftover))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("the role of a previous reset of this sandbox is not dropped yet"),
				 errhint("pgsandbox drops it once nothing holds it; try again later.")));

	sbx_random_string(job->password, SBX_PASSWORD_LEN, SBX_PASSWORD_ALPHABET);
	sbx_xact_begin("pgsandbox: creating a reset's role");
	verifier = encrypt_password(PASSWORD_TYPE_SCRAM_SHA_256, job->name, job->password);
	sbx_run_utility(psprintf("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"
							 " NOREPLICATION NOBYPASSRLS",
							 quote_identifier(job->name)),
					verifier);
	explicit_bzero(verifier, strlen(verifier));
	sbx_run_utility(psprintf(SBX_SANDBOX_MEMBERSHIP, quote_identifier(job->name)), NULL);
	sbx_spi("UPDATE pgsandbox.sandbox SET reset_role ="
			" (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1)"
			" WHERE id = $2::bigint", SPI_OK_UPDATE, 2, args);
	sbx_xact_commit();
}

/*
 * In a worker transaction: what a reset of sandbox 'row' to req->target
 * copies, the snapshot or save it was made from or the save named, into
 * *ref and *is_save; false when that is to be found later (the source's
 * current snapshot, else a dump).  *gone says so when the start no longer
 * serves.
 */
static bool
sbx_reset_target(const SbxRequest *req, const SbxSandboxRow *row,
				 SbxSnapshotRef *ref, bool *is_save, const char **gone)
{
	*is_save = false;
	*gone = "";
	if (strcmp(req->target, "start") == 0)
	{
		if (row->origin_id == 0)
			return false;
		if (sbx_origin_ref(row->origin_id, ref, is_save))
			return true;
		*gone = " (the snapshot or save it was made from no longer serves)";
		return false;
	}
	if (strcmp(req->target, "latest") == 0)
		return false;
	if (!sbx_find_save(row->id, req->target, ref))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("save \"%s\" of sandbox \"%s\" does not exist",
						req->target, req->name),
				 errhint("reset() takes 'start', 'latest', or the name or label of one of the sandbox's saves.")));
	*is_save = true;
	return true;
}

/* A reset that copies ref: the copy's objects go to the sandbox's role. */
static void
sbx_reset_as_copy(SbxCloneJob *job, const char *name, const SbxSnapshotRef *ref,
				  bool is_save, const char *gone)
{
	strlcpy(job->name, name, sizeof(job->name));
	job->copy_stage = true;
	job->from_save = is_save;
	job->planned_dboid = sbx_plan_database_oid(job->sandbox_id);
	job->snapshot_id = ref->id;
	job->snapshot_dboid = ref->dboid;
	strlcpy(job->snapshot_name, ref->name, sizeof(job->snapshot_name));
	strlcpy(job->snapshot_role, ref->role, sizeof(job->snapshot_role));
	job->data_as_of = ref->data_as_of;
	if (is_save)
		snprintf(job->origin, sizeof(job->origin),
				 "a copy of save \"%s\" made at %s", ref->name,
				 timestamptz_to_str(ref->data_as_of));
	else
		snprintf(job->origin, sizeof(job->origin),
				 "a copy of snapshot \"%s\" taken at %s%s", ref->name,
				 timestamptz_to_str(ref->data_as_of), gone);
}

/*
 * A reset that dumps the source anew: the reset's role, and its database,
 * created closed with the old database's encoding and locale.
 */
static void
sbx_reset_as_dump(int j, SbxCloneJob *job, const SbxSandboxRow *row,
				  SbxCloneSpec *spec, const char *gone)
{
	SbxLocale	locale;
	int64		size;

	snprintf(job->origin, sizeof(job->origin), "a new dump of source \"%s\"%s",
			 row->source, gone);
	strlcpy(job->name, job->dbname, sizeof(job->name));
	sbx_xact_begin("pgsandbox: reading a sandbox's locale");
	sbx_database_locale(row->dboid, &locale);
	sbx_xact_commit();
	sbx_create_reset_role(job);
	spec->locale = &locale;
	sbx_run_utility_xact(psprintf("CREATE DATABASE %s OWNER %s TEMPLATE template0%s"
								  " ALLOW_CONNECTIONS false%s",
								  quote_identifier(job->dbname),
								  quote_identifier(job->name),
								  sbx_locale_options(spec, job),
								  sbx_database_oid_clause(sbx_plan_database_oid(job->sandbox_id))),
						 "pgsandbox: creating a database for a reset");
	sbx_secure_database(job, &size);
	sbx_progress_database(j, job->dboid, size);
}

/*
 * Start a reset for 'by' as clone job j: check the sandbox, find what to
 * copy, mark the row and, for a dump, make the reset's role and the new
 * database.  Fills *job for the clone worker.  An error raised once the row
 * is marked leaves job->reset set, for sbx_reset_fail.
 */
void
sbx_reset_begin(int j, const SbxActor *by, const SbxRequest *req, SbxCloneJob *job)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	SbxSandboxRow row;
	int64		expected;
	SbxActor	owner_actor;
	SbxSnapshotRef ref;
	bool		have_ref;
	bool		ref_is_save;
	const char *gone;
	SbxCloneSpec spec;

	memset(job, 0, sizeof(*job));
	memset(&spec, 0, sizeof(spec));
	job->kind = SBX_KIND_SANDBOX;
	job->locale_fallback = sbx_locale_fallback;

	sbx_xact_begin("pgsandbox: starting a reset");
	sbx_sandbox_to_change(by, req->name, "reset", &row);
	job->sandbox_id = row.id;
	if (row.expired && req->ttl_secs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sandbox \"%s\" has expired", req->name),
				 errhint("Give reset() a ttl to keep it longer.")));
	have_ref = sbx_reset_target(req, &row, &ref, &ref_is_save, &gone);
	sbx_xact_commit();

	/* 'latest', or a start no longer there: the source's current snapshot */
	if (!have_ref)
		have_ref = sbx_current_snapshot(row.source, row.schema_only, &ref);

	sbx_xact_begin("pgsandbox: starting a reset");
	/* any copy of the source's rows, even of a save, needs the right now */
	sbx_check_clone_allowed(by, row.source, row.schema_only, job);
	if (!have_ref && !row.schema_only)
		job->masked = sbx_read_rules(row.source, job);

	/*
	 * The budget: for a moment both databases exist, but what lasts is the
	 * difference, which is what is checked.
	 */
	spec.kind = SBX_KIND_SANDBOX;
	spec.source = row.source;
	spec.schema_only = row.schema_only;
	spec.snapshot = have_ref ? &ref : NULL;
	spec.source_bytes = req->source_bytes;	/* probed by the caller */
	expected = sbx_expected_size(&spec);
	sbx_owner_actor(row.owner, by->is_admin, &owner_actor);
	sbx_check_budget(&owner_actor, SBX_KIND_SANDBOX, Max(expected - row.size_bytes, 0), true);

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	sbx_spi("UPDATE pgsandbox.sandbox SET reset_started_at = pg_catalog.now()"
			" WHERE id = $1::bigint AND status = 'ready' AND reset_started_at IS NULL",
			SPI_OK_UPDATE, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox \"%s\" changed while its reset started", req->name);
	sbx_xact_commit();

	/* from here on, a failure goes through sbx_reset_fail */
	job->reset = true;
	job->reset_ttl_secs = req->ttl_secs;
	strlcpy(job->reset_of, req->name, sizeof(job->reset_of));
	snprintf(job->dbname, sizeof(job->dbname), "%s" SBX_RESET_SUFFIX, req->name);
	strlcpy(job->source, row.source, sizeof(job->source));
	job->schema_only = row.schema_only;
	sbx_progress_set(j, SBX_PHASE_CREATING, req->name, have_ref ? ref.size_bytes : -1);

	if (have_ref)
		sbx_reset_as_copy(job, req->name, &ref, ref_is_save, gone);
	else
		sbx_reset_as_dump(j, job, &row, &spec, gone);
}

/*
 * A reset's new database is ready: swap it in (steps 1 and 2 above).
 * Returns the sandbox's new data_as_of, and its expiry in *expires_at.
 * <name>_old is left for sbx_reset_cleanup.
 */
TimestampTz
sbx_reset_swap(const SbxCloneJob *job, const char *actor, double seconds,
			   TimestampTz *expires_at)
{
	char		idbuf[32];
	char		newoid[16];
	char		data_as_of[64];
	char		snapshot_id[32];
	char		rules_version[16];
	char		ttl[32];
	char		generation[32];
	const char *args[10];
	bool		isnull;
	Oid			old_dboid;
	Oid			new_dboid;
	Oid			role;
	int			ended;
	MemoryContext cxt = CurrentMemoryContext;
	char	   *old_name = psprintf("%s" SBX_OLD_SUFFIX, job->reset_of);
	TimestampTz result;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	args[0] = idbuf;
	args[1] = job->dbname;
	sbx_xact_begin("pgsandbox: looking up a reset's databases");
	sbx_spi("SELECT s.db_oid, d.oid, s.role_oid FROM pgsandbox.sandbox s"
			"  JOIN pg_catalog.pg_database d ON d.datname = $2 AND d.datdba = s.role_oid"
			" WHERE s.id = $1::bigint AND s.status = 'ready'"
			"   AND s.reset_started_at IS NOT NULL", SPI_OK_SELECT, 2, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox \"%s\" is no longer being reset", job->reset_of);
	old_dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	new_dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 2, &isnull));
	role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 3, &isnull));
	sbx_xact_commit();

	/* the role may have logged into the new one too: end those as well */
	ended = sbx_end_sessions(job->reset_of, role, old_dboid, true, "reset");
	(void) sbx_end_sessions(job->dbname, role, new_dboid, true, "reset");

	snprintf(newoid, sizeof(newoid), "%u", new_dboid);
	strlcpy(data_as_of, timestamptz_to_str(job->data_as_of), sizeof(data_as_of));
	snprintf(snapshot_id, sizeof(snapshot_id), INT64_FORMAT, job->snapshot_id);
	snprintf(rules_version, sizeof(rules_version), "%d", job->rules_version);
	snprintf(ttl, sizeof(ttl), INT64_FORMAT, job->reset_ttl_secs);
	snprintf(generation, sizeof(generation), INT64_FORMAT, job->source_generation);
	args[1] = newoid;
	args[2] = data_as_of;
	args[3] = NULL;				/* unused */
	args[4] = job->snapshot_id ? snapshot_id : NULL;
	args[5] = job->masked ? "true" : "false";
	args[6] = rules_version;
	args[7] = ttl;
	args[8] = job->snapshot_id ? NULL : generation;

	sbx_xact_begin("pgsandbox: swapping in a reset's database");
	PG_TRY();
	{
		sbx_run_utility(psprintf("ALTER DATABASE %s RENAME TO %s",
								 quote_identifier(job->reset_of), quote_identifier(old_name)),
						NULL);
		sbx_run_utility(psprintf("ALTER DATABASE %s RENAME TO %s",
								 quote_identifier(job->dbname), quote_identifier(job->reset_of)),
						NULL);
		sbx_run_utility(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true",
								 quote_identifier(job->reset_of)), NULL);
		/* settings the role gave itself go too; it had none at the start */
		sbx_run_utility(psprintf("ALTER ROLE %s RESET ALL", quote_identifier(job->reset_of)),
						NULL);
		/* but what pgsandbox gives every sandbox role, as now set */
		(void) sbx_give_tenant_limits(job->sandbox_id);
	}
	PG_CATCH();
	{
		sbx_rethrow_blocked(sbx_catch_error(cxt), job->reset_of, "reset", role, old_dboid,
							"Try again once the session or transaction named has ended.");
	}
	PG_END_TRY();

	/*
	 * A copy keeps the rules_version and masking of what it copies; a dump
	 * has the source's generation as read now.  method and snapshot_id
	 * still say what the sandbox was made from: its start.
	 */
	sbx_spi("UPDATE pgsandbox.sandbox s SET db_oid = $2::oid, data_as_of = $3::timestamptz,"
			" masked = COALESCE(c.masked, $6::boolean),"
			" rules_version = COALESCE(c.rules_version, $7::integer),"
			" source_generation = COALESCE($9::bigint, c.source_generation, s.source_generation),"
			" ttl = CASE WHEN $8::bigint > 0"
			"  THEN pg_catalog.make_interval(secs => $8::float8) ELSE s.ttl END,"
			" expires_at = CASE WHEN $8::bigint > 0"
			"  THEN pg_catalog.now() + pg_catalog.make_interval(secs => $8::float8)"
			"  ELSE s.expires_at END,"
			" size_bytes = pg_catalog.pg_database_size($2::oid),"
			" size_measured_at = pg_catalog.now(), size_busy = false,"
			" last_used_at = pg_catalog.now(), read_only_at = NULL"
			"  FROM (SELECT) AS one"
			"  LEFT JOIN pgsandbox.sandbox c ON c.id = $5::bigint"
			" WHERE s.id = $1::bigint"
			" RETURNING s.expires_at", SPI_OK_UPDATE_RETURNING, 9, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox \"%s\" is no longer being reset", job->reset_of);
	*expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	/* reduced as what it copies, or as the source's rules reduce a dump now */
	sbx_record_reduced(job->sandbox_id, job->snapshot_id, sbx_rules_reduce(job));
	sbx_log_event(job->reset_of, "reset", actor,
				  psprintf("to %s, in %.1f s; %d session%s ended%s%s",
						   job->origin, seconds, ended, ended == 1 ? "" : "s",
						   job->notes[0] ? "; " : "", job->notes));
	result = job->data_as_of;
	sbx_xact_commit();
	return result;
}

/*
 * Finish or undo what a reset or a save of sandbox_id left, when none runs
 * for it: give the sandbox its database back and open it, drop
 * <name>_reset and <name>_old if its role (or the reset's role) owns them
 * and the reset's role, and clear the mark.  With 'interrupted' (found by
 * reconciliation), say so in the event log.  Does nothing for a row not
 * marked.
 */
void
sbx_reset_cleanup(int64 sandbox_id, bool interrupted)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	char	   *name;
	char	   *role_oid;
	char	   *db_oid;
	char	   *reset_role;
	bool		live;
	bool		role_gone = true;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, sandbox_id);
	sbx_xact_begin("pgsandbox: looking up a sandbox left by a reset");
	if (!sbx_catalog_has_saves())
	{
		sbx_xact_commit();
		return;
	}
	sbx_spi("SELECT name, role_oid, db_oid, status = 'ready', reset_role FROM pgsandbox.sandbox"
			" WHERE id = $1::bigint AND reset_started_at IS NOT NULL",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
	{
		sbx_xact_commit();
		return;
	}
	name = sbx_keep(sbx_spi_text(0, 1));
	role_oid = sbx_keep(sbx_spi_text(0, 2));
	db_oid = sbx_keep(sbx_spi_text(0, 3));
	live = (strcmp(sbx_spi_text(0, 4), "t") == 0);
	reset_role = sbx_keep(sbx_spi_text(0, 5));
	sbx_xact_commit();

	/* first the sandbox: a save lent its database to the superuser, closed */
	sbx_xact_begin("pgsandbox: reopening a sandbox");
	if (live && db_oid != NULL && role_oid != NULL)
	{
		const char *dbargs[3] = {db_oid, name, role_oid};

		sbx_spi("SELECT datdba <> $3::oid, NOT datallowconn FROM pg_catalog.pg_database"
				" WHERE oid = $1::oid AND datname = $2",
				SPI_OK_SELECT, 3, dbargs);
		if (SPI_processed == 1)
		{
			bool		lent = (strcmp(sbx_spi_text(0, 1), "t") == 0);
			bool		closed = (strcmp(sbx_spi_text(0, 2), "t") == 0);

			if (lent)
				sbx_run_utility(psprintf("ALTER DATABASE %s OWNER TO %s",
										 quote_identifier(name), quote_identifier(name)),
								NULL);
			if (closed)
				sbx_run_utility(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true",
										 quote_identifier(name)), NULL);
		}
	}
	sbx_xact_commit();

	/* then what was made beside it */
	if (role_oid != NULL)
	{
		sbx_drop_side_database(psprintf("%s" SBX_RESET_SUFFIX, name), role_oid,
							   reset_role, db_oid);
		sbx_drop_side_database(psprintf("%s" SBX_OLD_SUFFIX, name), role_oid,
							   NULL, db_oid);
	}
	/*
	 * The role a dump was filled as, once its database is gone.  One that
	 * cannot be dropped yet (another role granted it something, or holds a
	 * lock on it) is left without login, recorded in reset_role, and
	 * dropped by a later pass of the reaper (drop.c): the sandbox is
	 * settled all the same.
	 */
	if (reset_role != NULL)
		role_gone = sbx_drop_role(psprintf("%s" SBX_RESET_SUFFIX, name), reset_role);

	/* and the mark last, so that a failure above is tried again */
	sbx_xact_begin("pgsandbox: unmarking a sandbox");
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox SET reset_started_at = NULL%s"
					 " WHERE id = $1::bigint", role_gone ? ", reset_role = NULL" : ""),
			SPI_OK_UPDATE, 1, args);
	if (interrupted)
		sbx_log_event(name, "cleanup", SBX_WORKER_ACTOR,
					  "A reset or save left unfinished (by a restart, or a clean-up that failed) was cleaned up; the sandbox holds the data its name held then.");
	sbx_xact_commit();
}

/*
 * A reset failed before its swap: the sandbox keeps its old database,
 * reopened, and the new one is dropped.
 */
void
sbx_reset_fail(const SbxCloneJob *job, const char *reason, const char *actor)
{
	/* recorded first, in case the clean-up fails and is left for later */
	sbx_xact_begin("pgsandbox: recording a failed reset");
	sbx_log_event(job->reset_of, "reset_failed", actor, reason);
	sbx_xact_commit();
	sbx_reset_cleanup(job->sandbox_id, false);
}
