/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *	  What the lifecycle worker does to sandboxes: create the role and the
 *	  database of a new clone (empty, or a copy of a snapshot), mark it ready
 *	  or failed, drop it, extend it, and reconcile the catalog with the
 *	  cluster after a restart.  Snapshots and pool members are rows of the
 *	  same catalog and go through the same steps (snapshot.c and pool.c do
 *	  what is particular to them).
 *
 * Every function here runs in the lifecycle worker, starts and commits its
 * own transactions and reports trouble with ereport.  The catalog records
 * the OID of each role and database pgsandbox creates, in the transaction
 * that creates it (or, for a database, checked against its owner), and
 * nothing is ever dropped that does not match such a record: a name alone
 * is never enough.  A database matches its row by name and by its owner or
 * its recorded OID (a snapshot's database is handed to the bootstrap
 * superuser once complete, see snapshot.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "libpq/crypt.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/pg_locale.h"
#include "utils/timestamp.h"

const char *const sbx_kind_names[] = {"sandbox", "snapshot", "pool", "save"};
const char *const sbx_phase_names[] = {"queued", "creating", "copying",
	"extensions", "dumping", "restoring", "finishing", "catching up"};

/*
 * Starting a clone takes four steps, each its own transaction, so that
 * what a step made is recorded before the next begins:
 *   1. sbx_record_clone: check the source and the quotas, pick a name and
 *      record the sandbox as 'cloning';
 *   2. sbx_create_role: the login role, with a fresh password;
 *   3. CREATE DATABASE, which must run alone in its transaction: empty, from
 *      template0, for a dump of the source; or a copy of a snapshot;
 *   4. sbx_secure_database: record the database, revoke CONNECT from
 *      PUBLIC and only then open it to connections.
 */

/*
 * In a worker transaction: the source, checked again for a clone, as it may
 * have changed since the call.  Fills job->conninfo, job->require_password,
 * job->trusted_owners and job->source_generation (0 before the catalog has
 * generations), all read at once.
 */
void
sbx_check_clone_allowed(const SbxActor *by, const char *source, bool schema_only,
						SbxCloneJob *job)
{
	const char *args[1] = {source};
	bool		isnull;

	if (!sbx_may_clone(by->role, by->is_admin, source))
		sbx_report_source_denied(source, by->is_admin);
	sbx_spi(psprintf("SELECT conninfo, allow_data, require_password, %s, %s, %s"
					 "  FROM pgsandbox.source WHERE name = $1",
					 sbx_catalog_has_generations() ? "generation" : "0::bigint",
					 sbx_catalog_has_trust() ? "trusted_owners::text" : "'{}'::text",
					 sbx_catalog_has_live() ? "COALESCE(live_publication, '')" : "''"),
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		sbx_report_source_denied(source, by->is_admin);
	if (!schema_only &&
		!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									SPI_tuptable->tupdesc, 2, &isnull)))
		sbx_report_data_denied(source);
	strlcpy(job->conninfo, sbx_spi_text(0, 1), sizeof(job->conninfo));
	job->require_password = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 3, &isnull));
	job->source_generation = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 4, &isnull));
	strlcpy(job->trusted_owners, sbx_spi_text(0, 5), sizeof(job->trusted_owners));
	strlcpy(job->live_publication, sbx_spi_text(0, 6), sizeof(job->live_publication));
}

/*
 * In a worker transaction: may a clone of this source carry the planner's
 * statistics?  They hold values of the source's columns (most common
 * values, histogram bounds), so they are data: only an admin's
 * allow_statistics lets them out, and never for a source with masking
 * rules, whose masked columns' and excluded tables' values they hold too.
 */
static void
sbx_check_statistics_allowed(const char *source)
{
	const char *args[1] = {source};
	bool		isnull;
	bool		allowed;
	bool		has_rules;

	sbx_spi("SELECT o.allow_statistics,"
			"       EXISTS (SELECT 1 FROM pgsandbox.source_rule r WHERE r.source = o.name)"
			"  FROM pgsandbox.source o WHERE o.name = $1",
			SPI_OK_SELECT, 1, args);
	allowed = SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	has_rules = SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (!allowed)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("source \"%s\" does not let its statistics be copied", source),
				 errdetail("Statistics hold values of the source's columns."),
				 errhint("An admin approves the source with add_source(..., allow_statistics => true).")));
	if (has_rules)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the statistics of source \"%s\" cannot be copied: it has masking rules", source),
				 errdetail("Statistics hold the most common values and histogram bounds of masked columns and excluded tables too.")));
}

/*
 * In a worker transaction: the quotas.  The worker takes clones one at a
 * time, so the counts are exact.  Snapshots and pool members not yet handed
 * out count against no one.
 */
void
sbx_check_quotas(const SbxActor *by)
{
	char		owner[16];
	const char *args[1] = {owner};
	bool		isnull;

	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_spi(psprintf("SELECT count(*), count(*) FILTER (WHERE owner_oid = $1::oid)"
					 " FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready')%s",
					 sbx_if_kinds(" AND kind IN ('sandbox', 'save')")),
			SPI_OK_SELECT, 1, args);
	if (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									SPI_tuptable->tupdesc, 1, &isnull)) >= sbx_max_sandboxes)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many sandboxes"),
				 errdetail("The cluster holds %d live sandboxes and saves, the most pgsandbox.max_sandboxes allows.",
						   sbx_max_sandboxes),
				 errhint("Drop sandboxes that are no longer needed.")));
	if (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									SPI_tuptable->tupdesc, 2, &isnull)) >= sbx_max_sandboxes_per_owner)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many sandboxes for role \"%s\"", by->name),
				 errdetail("The role owns %d live sandboxes and saves, the most pgsandbox.max_sandboxes_per_owner allows.",
						   sbx_max_sandboxes_per_owner),
				 errhint("Drop sandboxes that are no longer needed.")));
}

/* A name no database, role or sandbox has, into name[NAMEDATALEN]. */
void
sbx_pick_name(char *name)
{
	const char *args[1] = {name};

	for (;;)
	{
		char		suffix[9];

		sbx_random_string(suffix, 8, "abcdefghijklmnopqrstuvwxyz0123456789");
		snprintf(name, NAMEDATALEN, SBX_NAME_PREFIX "%s", suffix);
		sbx_spi("SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1)"
				" OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)"
				" OR EXISTS (SELECT 1 FROM pgsandbox.sandbox WHERE name = $1)",
				SPI_OK_SELECT, 1, args);
		if (SPI_processed == 0)
			return;
	}
}

/*
 * In sbx_record_clone's transaction: what later catalogs record of a new
 * clone, the source's generation (0.5) and, from 0.7, its idle timeout and
 * the size it is expected to take, which counts against the budget
 * meanwhile.
 */
static void
sbx_record_clone_extras(const SbxCloneSpec *spec, const SbxCloneJob *job, int64 expected)
{
	char		id[32];

	snprintf(id, sizeof(id), INT64_FORMAT, job->sandbox_id);
	/* the source's generation, read with its conninfo (sbx_same_source_sql) */
	if (sbx_catalog_has_generations())
	{
		char		generation[32];
		const char *genargs[2] = {id, generation};

		snprintf(generation, sizeof(generation), INT64_FORMAT, job->source_generation);
		sbx_spi("UPDATE pgsandbox.sandbox SET source_generation = $2::bigint WHERE id = $1::bigint",
				SPI_OK_UPDATE, 2, genargs);
	}
	/* the size it is expected to take counts against the budget meanwhile */
	if (sbx_catalog_has_usage())
	{
		char		idle[32];
		char		size[32];
		const char *useargs[3] = {id, idle, size};

		snprintf(idle, sizeof(idle), INT64_FORMAT,
				 spec->kind == SBX_KIND_SANDBOX ? spec->idle_secs : 0);
		snprintf(size, sizeof(size), INT64_FORMAT, expected);
		sbx_spi("UPDATE pgsandbox.sandbox SET size_bytes = $3::bigint,"
				" idle_timeout = CASE WHEN $2::bigint > 0"
				"  THEN pg_catalog.make_interval(secs => $2::float8) END"
				" WHERE id = $1::bigint", SPI_OK_UPDATE, 3, useargs);
	}
	/* the cap of sessions a caller asked for, given to the role when ready */
	if (sbx_catalog_has_tenants() && spec->connection_limit > 0)
	{
		char		limit[16];
		const char *limargs[2] = {id, limit};

		snprintf(limit, sizeof(limit), "%d", spec->connection_limit);
		sbx_spi("UPDATE pgsandbox.sandbox SET connection_limit = $2::integer WHERE id = $1::bigint",
				SPI_OK_UPDATE, 2, limargs);
	}
	/* reduced by subset rules: a dump now, or a copy as its snapshot was */
	sbx_record_reduced(job->sandbox_id, spec->snapshot ? spec->snapshot->id : 0,
					   sbx_rules_reduce(job));
}

/*
 * In a worker transaction: record whether sandbox, snapshot or save 'id'
 * is reduced: as 'copied' is, the snapshot or sandbox it copies (0 for
 * none), or else as 'reduced' says.
 */
void
sbx_record_reduced(int64 id, int64 copied, bool reduced)
{
	char		idbuf[32];
	char		copiedbuf[32];
	const char *args[3] = {idbuf, copiedbuf, reduced ? "true" : "false"};

	if (!sbx_catalog_has_reduced())
		return;					/* before ALTER EXTENSION UPDATE */
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	snprintf(copiedbuf, sizeof(copiedbuf), INT64_FORMAT, copied);
	sbx_spi("UPDATE pgsandbox.sandbox s SET reduced = COALESCE("
			"  (SELECT c.reduced FROM pgsandbox.sandbox c WHERE c.id = $2::bigint), $3::boolean)"
			" WHERE s.id = $1::bigint", SPI_OK_UPDATE, 3, args);
}

/*
 * In a worker transaction: a data snapshot of a live source is a live
 * build.  Its slot's name is recorded before the slot is made, so that a
 * build that fails or dies leaves none behind unseen (live.c).  Any other
 * clone follows nothing.
 */
static void
sbx_record_live_build(const SbxCloneSpec *spec, SbxCloneJob *job)
{
	char		id[32];
	const char *args[2] = {id, job->live_slot};

	if (spec->kind != SBX_KIND_SNAPSHOT || spec->schema_only || job->live_publication[0] == '\0')
	{
		job->live_publication[0] = '\0';
		return;
	}
	/* slot names take lower-case letters, digits and underscores */
	strlcpy(job->live_slot, "pgsandbox_", sizeof(job->live_slot));
	sbx_random_string(job->live_slot + 10, 12, "abcdefghijklmnopqrstuvwxyz0123456789");
	snprintf(id, sizeof(id), INT64_FORMAT, job->sandbox_id);
	sbx_spi("UPDATE pgsandbox.sandbox SET live_slot = $2 WHERE id = $1::bigint",
			SPI_OK_UPDATE, 2, args);
}

/* The 'clone' event of a new clone: what it is made of. */
static void
sbx_log_clone_event(const SbxActor *by, const SbxCloneSpec *spec, const SbxCloneJob *job)
{
	const char *what = spec->schema_only ? "schema only" : "schema and data";

	if (spec->kind == SBX_KIND_SNAPSHOT)
		sbx_log_event(job->name, "clone", by->name,
					  psprintf("snapshot of source \"%s\", %s", spec->source, what));
	else if (spec->from_save)
		sbx_log_event(job->name, "clone", by->name,
					  psprintf("source \"%s\", %s, copied from save \"%s\" made at %s",
							   spec->source, what, spec->snapshot->name,
							   timestamptz_to_str(spec->snapshot->data_as_of)));
	else if (spec->snapshot)
		sbx_log_event(job->name, "clone", by->name,
					  psprintf("%ssource \"%s\", %s, copied from snapshot \"%s\" taken at %s",
							   spec->kind == SBX_KIND_POOL ? "pool member of " : "",
							   spec->source, what, spec->snapshot->name,
							   timestamptz_to_str(spec->snapshot->data_as_of)));
	else
		sbx_log_event(job->name, "clone", by->name,
					  psprintf("source \"%s\", %s", spec->source, what));
}

/*
 * Step 1: checks, a name and the 'cloning' row.  A snapshot or a pool member
 * has no expiry and counts against no quota.
 */
static void
sbx_record_clone(const SbxActor *by, const SbxCloneSpec *spec, SbxCloneJob *job)
{
	char		ttl[32];
	char		owner[16];
	char		snapshot_id[32];
	char		rules_version[16];
	const char *args[12];
	bool		isnull;
	int64		expected;

	sbx_xact_begin("pgsandbox: starting a clone");
	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_check_clone_allowed(by, spec->source, spec->schema_only, job);
	job->statistics = spec->statistics;
	if (spec->statistics)
		sbx_check_statistics_allowed(spec->source);
	if (spec->kind == SBX_KIND_SANDBOX)
		sbx_check_quotas(by);
	expected = sbx_expected_size(spec);
	sbx_check_budget(by, spec->kind, expected, true);
	sbx_pick_name(job->name);

	snprintf(ttl, sizeof(ttl), INT64_FORMAT,
			 spec->kind == SBX_KIND_SANDBOX ? spec->ttl_secs : 0);
	args[0] = job->name;
	args[1] = spec->source;
	args[2] = spec->schema_only ? "true" : "false";
	args[3] = spec->labels ? spec->labels : "{}";
	args[4] = by->name;
	args[5] = ttl;
	args[6] = owner;
	args[7] = sbx_kind_names[spec->kind];
	args[8] = spec->from_save ? "save" : spec->snapshot ? "snapshot" : "dump";
	if (spec->snapshot)
		snprintf(snapshot_id, sizeof(snapshot_id), INT64_FORMAT, spec->snapshot->id);
	args[9] = spec->snapshot ? snapshot_id : NULL;

	/*
	 * A dump of the source's rows reads them under the source's rules; a
	 * copy is as masked as its snapshot.
	 */
	if (!spec->snapshot && !spec->schema_only)
		job->masked = sbx_read_rules(spec->source, job);
	/* rules set since the check above: statistics would carry their values */
	if (spec->statistics && job->masked)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the statistics of source \"%s\" cannot be copied: it has masking rules",
						spec->source)));
	snprintf(rules_version, sizeof(rules_version), "%d", job->rules_version);
	args[10] = rules_version;
	args[11] = job->masked ? "true" : "false";
	if (!sbx_catalog_has_kinds())	/* before ALTER EXTENSION UPDATE */
		sbx_spi("INSERT INTO pgsandbox.sandbox (name, source, schema_only, status, labels,"
				" requested_by, owner_oid, ttl, expires_at)"
				" VALUES ($1, $2, $3::boolean, 'cloning', $4::jsonb, $5::name, $7::oid,"
				" pg_catalog.make_interval(secs => $6::float8),"
				" pg_catalog.now() + pg_catalog.make_interval(secs => $6::float8))"
				" RETURNING id", SPI_OK_INSERT_RETURNING, 7, args);
	else if (!sbx_catalog_has_rules())	/* a 0.3 catalog */
		sbx_spi("INSERT INTO pgsandbox.sandbox (name, source, schema_only, status, labels,"
				" requested_by, owner_oid, ttl, expires_at, kind, method, snapshot_id)"
				" VALUES ($1, $2, $3::boolean, 'cloning', $4::jsonb, $5::name, $7::oid,"
				" pg_catalog.make_interval(secs => $6::float8),"
				" CASE WHEN $8 = 'sandbox'"
				"  THEN pg_catalog.now() + pg_catalog.make_interval(secs => $6::float8) END,"
				" $8, $9, $10::bigint)"
				" RETURNING id", SPI_OK_INSERT_RETURNING, 10, args);
	else
	{
		sbx_spi("INSERT INTO pgsandbox.sandbox (name, source, schema_only, status, labels,"
				" requested_by, owner_oid, ttl, expires_at, kind, method, snapshot_id,"
				" rules_version, masked)"
				" SELECT $1, $2, $3::boolean, 'cloning', $4::jsonb, $5::name, $7::oid,"
				" pg_catalog.make_interval(secs => $6::float8),"
				" CASE WHEN $8 = 'sandbox'"
				"  THEN pg_catalog.now() + pg_catalog.make_interval(secs => $6::float8) END,"
				" $8, $9, $10::bigint,"
				" COALESCE(c.rules_version, $11::integer), COALESCE(c.masked, $12::boolean)"
				"  FROM (SELECT) AS one"
				"  LEFT JOIN pgsandbox.sandbox c ON c.id = $10::bigint"
				" RETURNING id, masked", SPI_OK_INSERT_RETURNING, 12, args);
		job->masked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 2, &isnull));
	}
	job->sandbox_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
	sbx_record_clone_extras(spec, job, expected);
	sbx_record_live_build(spec, job);
	sbx_log_clone_event(by, spec, job);
	sbx_xact_commit();
}

/* Step 2: the role, with its password given only as a SCRAM secret. */
void
sbx_create_role(SbxCloneJob *job)
{
	char		idbuf[32];
	const char *args[2] = {job->name, idbuf};
	char	   *verifier;

	sbx_random_string(job->password, SBX_PASSWORD_LEN, SBX_PASSWORD_ALPHABET);
	sbx_xact_begin("pgsandbox: creating a sandbox role");
	/* in the transaction: the HMAC code wants a resource owner */
	verifier = encrypt_password(PASSWORD_TYPE_SCRAM_SHA_256, job->name, job->password);
	/* a pool member's role logs in only once handed out */
	sbx_run_utility(psprintf("CREATE ROLE %s %s NOSUPERUSER NOCREATEDB NOCREATEROLE"
							 " NOREPLICATION NOBYPASSRLS",
							 quote_identifier(job->name),
							 job->kind == SBX_KIND_POOL || job->kind == SBX_KIND_SAVE
							 ? "NOLOGIN" : "LOGIN"),
					verifier);
	explicit_bzero(verifier, strlen(verifier));
	sbx_run_utility(psprintf(SBX_SANDBOX_MEMBERSHIP, quote_identifier(job->name)), NULL);
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	sbx_spi("UPDATE pgsandbox.sandbox SET role_oid ="
			" (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1)"
			" WHERE id = $2::bigint", SPI_OK_UPDATE, 2, args);
	sbx_xact_commit();
}

/*
 * Step 4: record the database (checked against its owner), and open it to
 * connections in the same transaction that revokes CONNECT from PUBLIC, so
 * that no one slips in before.
 */
void
sbx_secure_database(SbxCloneJob *job, int64 *size)
{
	char		idbuf[32];
	const char *args[2] = {job->dbname, idbuf};
	bool		isnull;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	sbx_xact_begin("pgsandbox: securing a sandbox database");
	/* a reset's new database is recorded only when it takes the name */
	if (job->reset)
		sbx_spi("SELECT d.oid, pg_catalog.pg_database_size(d.oid)"
				"  FROM pg_catalog.pg_database d, pgsandbox.sandbox s"
				" WHERE s.id = $2::bigint AND d.datname = $1"
				"   AND (d.datdba = s.role_oid OR d.datdba = s.reset_role)",
				SPI_OK_SELECT, 2, args);
	else
		sbx_spi("UPDATE pgsandbox.sandbox s SET db_oid = d.oid"
				" FROM pg_catalog.pg_database d"
				" WHERE s.id = $2::bigint AND d.datname = $1 AND d.datdba = s.role_oid"
				" RETURNING d.oid, pg_catalog.pg_database_size(d.oid)",
				SPI_OK_UPDATE_RETURNING, 2, args);
	if (SPI_processed != 1)
		elog(ERROR, "database \"%s\" was not created as expected", job->dbname);
	job->dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	*size = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 2, &isnull));
	sbx_run_utility(psprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC",
							 quote_identifier(job->dbname)), NULL);
	sbx_run_utility(psprintf("ALTER DATABASE %s ALLOW_CONNECTIONS true",
							 quote_identifier(job->dbname)), NULL);
	sbx_xact_commit();
}

/*
 * The options of CREATE DATABASE that give the sandbox the source's
 * encoding and locale.  A locale this server lacks is an error, unless
 * pgsandbox.locale_fallback lets the sandbox take the server's default,
 * which job->notes then records.
 */
char *
sbx_locale_options(const SbxCloneSpec *spec, SbxCloneJob *job)
{
	const SbxLocale *loc = spec->locale;
	const char *missing = NULL;

	if (loc == NULL || loc->encoding[0] == '\0')
		return "";
	if (pg_char_to_encoding(loc->encoding) < 0)
		missing = loc->encoding;
	else if (!check_locale(LC_COLLATE, loc->collate, NULL))
		missing = loc->collate;
	else if (!check_locale(LC_CTYPE, loc->ctype, NULL))
		missing = loc->ctype;
#ifndef USE_ICU
	else if (loc->provider == COLLPROVIDER_ICU)
		missing = loc->icu_locale;
#endif
#if !SBX_HAVE_BUILTIN_LOCALE
	else if (loc->provider == 'b')	/* the builtin provider, from 17 */
		missing = loc->icu_locale;
#endif
	if (missing != NULL)
	{
		if (!job->locale_fallback)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("locale \"%s\" of source \"%s\" is not available on this server",
							missing, spec->source),
					 errhint("Install the locale, or set pgsandbox.locale_fallback = on to give sandboxes the server's default.")));
		sbx_job_note(job,
				 "the server's default encoding and locale instead of the source's \"%s\", \"%s\", which this server lacks (pgsandbox.locale_fallback)",
				 loc->encoding, loc->collate);
		return "";
	}
	if (loc->provider == COLLPROVIDER_ICU)
		return psprintf(" ENCODING %s LC_COLLATE %s LC_CTYPE %s LOCALE_PROVIDER icu ICU_LOCALE %s",
						quote_literal_cstr(loc->encoding), quote_literal_cstr(loc->collate),
						quote_literal_cstr(loc->ctype), quote_literal_cstr(loc->icu_locale));
#if SBX_HAVE_BUILTIN_LOCALE
	if (loc->provider == COLLPROVIDER_BUILTIN)
		return psprintf(" ENCODING %s LC_COLLATE %s LC_CTYPE %s LOCALE_PROVIDER builtin BUILTIN_LOCALE %s",
						quote_literal_cstr(loc->encoding), quote_literal_cstr(loc->collate),
						quote_literal_cstr(loc->ctype), quote_literal_cstr(loc->icu_locale));
#endif
	return psprintf(" ENCODING %s LC_COLLATE %s LC_CTYPE %s LOCALE_PROVIDER libc",
					quote_literal_cstr(loc->encoding), quote_literal_cstr(loc->collate),
					quote_literal_cstr(loc->ctype));
}

/*
 * Start a clone for 'by' as clone job j: record it, create its role and its
 * database.  Fills *job (catalog id, name, password, dboid, conninfo, the
 * snapshot it copies) for the clone worker.  If an error escapes once the
 * row exists, job->sandbox_id is already set, so that the caller can undo
 * it with sbx_clone_fail.
 *
 * A copy of a snapshot is left to the clone worker (job->copy_stage): it
 * runs CREATE DATABASE ... TEMPLATE, which takes seconds for a large one, so
 * that the lifecycle worker keeps serving meanwhile; sbx_clone_secure then
 * takes step 4, and a second clone worker gives the snapshot role's objects
 * to the sandbox's.  The copy has the snapshot's encoding and locale, which
 * are the source's.
 */
void
sbx_clone_create(int j, const SbxActor *by, const SbxCloneSpec *spec,
				SbxCloneJob *job)
{
	int64		size;

	memset(job, 0, sizeof(*job));
	job->kind = spec->kind;
	job->locale_fallback = sbx_locale_fallback;
	sbx_record_clone(by, spec, job);
	strlcpy(job->dbname, job->name, sizeof(job->dbname));
	sbx_progress_set(j, SBX_PHASE_CREATING, job->name,
					 spec->snapshot ? spec->snapshot->size_bytes : -1);
	sbx_create_role(job);
	strlcpy(job->source, spec->source, sizeof(job->source));
	job->schema_only = spec->schema_only;
	job->source_bytes = spec->source_bytes;
	job->stream_early = spec->source_plain == 1;
	if (spec->snapshot)
	{
		/* the clone worker copies it, then sbx_clone_secure records it */
		job->copy_stage = true;
		job->from_save = spec->from_save;
		job->planned_dboid = sbx_plan_database_oid(job->sandbox_id);
		job->snapshot_id = spec->snapshot->id;
		job->snapshot_dboid = spec->snapshot->dboid;
		strlcpy(job->snapshot_name, spec->snapshot->name, sizeof(job->snapshot_name));
		strlcpy(job->snapshot_role, spec->snapshot->role, sizeof(job->snapshot_role));
		job->data_as_of = spec->snapshot->data_as_of;
		job->snapshot_live = spec->snapshot->live;
		return;
	}
	/* created closed to connections */
	sbx_run_utility_xact(psprintf("CREATE DATABASE %s OWNER %s TEMPLATE template0%s"
								  " ALLOW_CONNECTIONS false%s",
								  quote_identifier(job->name),
								  quote_identifier(job->name),
								  sbx_locale_options(spec, job),
								  sbx_database_oid_clause(sbx_plan_database_oid(job->sandbox_id))),
						 "pgsandbox: creating a sandbox database");
	sbx_secure_database(job, &size);
	/* a dump counts from the empty database */
	sbx_progress_database(j, job->dboid, size);
}

/*
 * A clone worker has copied the snapshot of clone job j into its database:
 * record it and open it, as step 4 does for a database made here.
 */
void
sbx_clone_secure(int j, SbxCloneJob *job)
{
	int64		size;

	sbx_secure_database(job, &size);
	job->copy_stage = false;
	sbx_progress_database(j, job->dboid, 0);
	sbx_progress_set(j, SBX_PHASE_FINISHING, NULL, -1);
}

/*
 * Mark a finished clone job's row ready.  A sandbox's expiry counts from
 * now, and the expiry is returned.  A pool member (whose role has no login
 * until it is handed out with a new password) is only marked ready.  A
 * snapshot is not for here: sbx_snapshot_done finishes it.
 */
TimestampTz
sbx_clone_ready(SbxCloneJob *job, const char *actor, double seconds)
{
	/* from 0.7: in use, and measured, as of now */
#define SBX_READY_USAGE_SQL \
	", last_used_at = pg_catalog.now(), size_measured_at = pg_catalog.now()"
	char		idbuf[32];
	const char *args[2];
	bool		isnull;
	TimestampTz expires_at = 0;
	const char *how;

	/* a snapshot is finished by sbx_snapshot_done */
	Assert(job->kind != SBX_KIND_SNAPSHOT);
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->sandbox_id);
	args[0] = idbuf;
	args[1] = job->data_as_of ? timestamptz_to_str(job->data_as_of) : NULL;
	sbx_xact_begin("pgsandbox: marking a sandbox ready");
	if (!sbx_catalog_has_kinds())	/* before ALTER EXTENSION UPDATE */
		sbx_spi("UPDATE pgsandbox.sandbox SET status = 'ready', ready_at = pg_catalog.now(),"
				" expires_at = pg_catalog.now() + ttl,"
				" size_bytes = pg_catalog.pg_database_size(db_oid)"
				" WHERE id = $1::bigint AND status = 'cloning'"
				" RETURNING expires_at", SPI_OK_UPDATE_RETURNING, 1, args);
	else
		sbx_spi(psprintf("UPDATE pgsandbox.sandbox SET status = 'ready', ready_at = pg_catalog.now(),"
						 " expires_at = CASE WHEN kind = 'sandbox' THEN pg_catalog.now() + ttl END,"
						 " size_bytes = pg_catalog.pg_database_size(db_oid),"
						 " data_as_of = $2::timestamptz%s"
						 " WHERE id = $1::bigint AND status = 'cloning'"
						 " RETURNING expires_at",
						 sbx_catalog_has_usage() ? SBX_READY_USAGE_SQL : ""),
				SPI_OK_UPDATE_RETURNING, 2, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox " INT64_FORMAT " is no longer being cloned", job->sandbox_id);
	if (job->kind != SBX_KIND_POOL)
		expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1, &isnull));
	job->steps[SBX_STEP_MEASURED] = GetCurrentTimestamp();
	if (job->kind == SBX_KIND_SANDBOX)
		sbx_count_clone(sbx_clone_method(job), seconds);
	how = job->from_save ? "copied from a save" :
		job->snapshot_id ? "copied from a snapshot" : "cloned";
	how = job->copy_how[0] ? psprintf("%s in %.1f s (%s)", how, seconds, job->copy_how)
		: psprintf("%s in %.1f s", how, seconds);
	if (job->kind == SBX_KIND_POOL)
		sbx_log_event(job->name, "pool_fill", actor, how);
	else
	{
		const char *steps = sbx_describe_steps(job->steps);

		/* its share of the server, given now that the restore is done */
		if (job->kind == SBX_KIND_SANDBOX)
		{
			char	   *left_out = sbx_give_tenant_limits(job->sandbox_id);

			if (left_out)
				how = psprintf("%s; %s", how, left_out);
		}

		/* for run_sql and describe_schema, which log in as the role */
		args[1] = job->password;
		sbx_spi("INSERT INTO pgsandbox.sandbox_secret (sandbox_id, password)"
				" VALUES ($1::bigint, $2)", SPI_OK_INSERT, 2, args);
		if (job->notes[0])
			how = psprintf("%s; %s", how, job->notes);
		sbx_log_event(job->name, "ready", actor,
					  steps[0] ? psprintf("%s; %s", how, steps) : how);
	}
	sbx_xact_commit();
	return expires_at;
}

/*
 * Undo a clone that did not finish: drop what it made and mark it failed
 * with the reason.  action is 'failed' for a clone that failed now and
 * 'cleanup' for one found unfinished after a restart.
 */
void
sbx_clone_fail(int64 sandbox_id, const char *reason, const char *action,
			   const char *actor)
{
	char		idbuf[32];
	const char *args[2];
	char	   *name;
	char	   *role_oid;
	char	   *db_oid;
	bool		snapshot;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, sandbox_id);
	args[0] = idbuf;
	sbx_xact_begin("pgsandbox: cleaning up a failed clone");
	sbx_spi(psprintf("SELECT name, role_oid, db_oid, %s"
					 " FROM pgsandbox.sandbox WHERE id = $1::bigint",
					 sbx_catalog_has_kinds() ? "kind = 'snapshot'" : "false"),
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox " INT64_FORMAT " is not in the catalog", sandbox_id);
	name = sbx_keep(sbx_spi_text(0, 1));
	role_oid = sbx_keep(sbx_spi_text(0, 2));
	db_oid = sbx_keep(sbx_spi_text(0, 3));
	snapshot = (strcmp(sbx_spi_text(0, 4), "t") == 0);
	sbx_xact_commit();

	(void) sbx_drop_resources(name, role_oid, db_oid, false);

	args[1] = reason;
	sbx_xact_begin("pgsandbox: marking a clone failed");
	sbx_spi("UPDATE pgsandbox.sandbox SET status = 'failed', error = $2,"
			" expires_at = NULL WHERE id = $1::bigint", SPI_OK_UPDATE, 2, args);
	/* a failed snapshot: the last good one, if any, keeps serving */
	if (snapshot)
		sbx_spi("UPDATE pgsandbox.snapshot_plan p SET last_error = $2"
				"  FROM pgsandbox.sandbox s"
				" WHERE s.id = $1::bigint AND p.source = s.source"
				"   AND p.schema_only = s.schema_only", SPI_OK_UPDATE, 2, args);
	sbx_log_event(name,
				  snapshot && strcmp(action, "failed") == 0 ? "snapshot_failed" : action,
				  actor, reason);
	sbx_xact_commit();

	(void) sbx_drop_role(name, role_oid);
}

/*
 * Record what a finished clone holds, counted and hashed by its clone
 * worker, in its row (a reset's: the sandbox's).
 */
void
sbx_record_clone_digest(void *arg)
{
	const SbxCloneJob *job = arg;
	char		id[32];
	const char *args[2] = {id, job->objects_digest};

	if (job->objects_digest[0] == '\0')
		return;
	snprintf(id, sizeof(id), INT64_FORMAT, job->sandbox_id);
	sbx_xact_begin("pgsandbox: recording what a clone holds");
	if (sbx_catalog_has_digests())
		sbx_spi("UPDATE pgsandbox.sandbox SET objects_digest = $2 WHERE id = $1::bigint",
				SPI_OK_UPDATE, 2, args);
	sbx_xact_commit();
}

/*
 * Set a live sandbox's expiry to now() + ttl_secs; returns the new expiry.
 */
TimestampTz
sbx_extend(const char *name, const SbxActor *by, int64 ttl_secs)
{
	char		ttl[32];
	char		owner[16];
	const char *args[4] = {name, ttl, owner, by->is_admin ? "true" : "false"};
	bool		isnull;
	TimestampTz expires_at;

	snprintf(ttl, sizeof(ttl), INT64_FORMAT, ttl_secs);
	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_xact_begin("pgsandbox: extending a sandbox");
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox"
					 " SET expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $2::float8)"
					 " WHERE name = $1 AND status = 'ready'%s"
					 "   AND (owner_oid = $3::oid OR $4::boolean)"
					 " RETURNING expires_at", sbx_if_kinds(" AND kind = 'sandbox'")),
			SPI_OK_UPDATE_RETURNING, 4, args);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name),
				 errdetail("Only a ready sandbox can be extended.")));
	expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
												   SPI_tuptable->tupdesc, 1, &isnull));
	sbx_log_event(name, "extend", by->name,
				  psprintf("expires at %s", timestamptz_to_str(expires_at)));
	sbx_xact_commit();
	return expires_at;
}

/*
 * Protect a live sandbox from expiry until 'until', or end its protection
 * (until 0).  Its owner or an admin may; returns 'until'.
 */
TimestampTz
sbx_protect(const char *name, const SbxActor *by, TimestampTz until)
{
	char		owner[16];
	const char *args[4] = {name, until ? timestamptz_to_str(until) : NULL, owner,
	by->is_admin ? "true" : "false"};

	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_xact_begin("pgsandbox: protecting a sandbox");
	if (!sbx_catalog_has_protection())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("protection needs pgsandbox 0.6"),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
	sbx_spi("UPDATE pgsandbox.sandbox SET protected_until = $2::timestamptz"
			" WHERE name = $1 AND status = 'ready' AND kind = 'sandbox'"
			"   AND (owner_oid = $3::oid OR $4::boolean)",
			SPI_OK_UPDATE, 4, args);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name),
				 errdetail("Only a ready sandbox can be protected.")));
	if (until)
		sbx_log_event(name, "protect", by->name,
					  psprintf("protected until %s", timestamptz_to_str(until)));
	else
		sbx_log_event(name, "unprotect", by->name, "protection ended");
	sbx_xact_commit();
	return until;
}

const SbxActor sbx_worker_actor = {InvalidOid, true, SBX_WORKER_ACTOR};
