/*-------------------------------------------------------------------------
 *
 * live_sources.c
 *	  set_live() and unset_live(): an admin makes a source live, so that its
 *	  data snapshot follows it by logical replication from a publication
 *	  the admin made there, or stops that.
 *
 * set_live() checks, on the source, everything a live snapshot needs
 * before anything is made: wal_level, a login that may replicate, the
 * publication and what it publishes (each table with a replica identity
 * where updates and deletes are published, none that an exclude_data rule
 * empties, all of trusted owners, since the apply runs their code), and
 * no masking or subset rule on the source.  It records the publication
 * and the source's locale; the worker builds the live snapshot
 * (worker/live.c) and keeps it following.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(pgsandbox_set_live);
PG_FUNCTION_INFO_V1(pgsandbox_unset_live);

/* what set_live() reads of a source's catalog row */
typedef struct SbxLiveSource
{
	char	   *conninfo;
	bool		require_password;
	bool		allow_data;
	char	   *trusted_owners;
	List	   *exclude_patterns;
} SbxLiveSource;

static void
sbx_require_live_catalog(void)
{
	if (!sbx_catalog_has_live())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("live sources need pgsandbox 0.12"),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
}

/* In SPI: the source's row (locked by sbx_lock_source) and its rules. */
static void
sbx_live_source_row(const char *source, SbxLiveSource *row)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(source)};
	bool		isnull;

	memset(row, 0, sizeof(*row));
	if (SPI_execute_with_args("SELECT conninfo, require_password, allow_data,"
							  "       trusted_owners::text FROM pgsandbox.source WHERE name = $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read source \"%s\"", source);
	row->conninfo = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	row->require_password = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 2, &isnull));
	row->allow_data = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 3, &isnull));
	row->trusted_owners = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);

	if (SPI_execute_with_args("SELECT kind, target FROM pgsandbox.source_rule"
							  " WHERE source = $1 ORDER BY kind, target",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *kind = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *target = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

		if (strcmp(kind, "exclude_data") == 0)
			row->exclude_patterns = lappend(row->exclude_patterns, target);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("source \"%s\" has a %s rule on %s, and cannot be live", source,
							kind, target),
					 errdetail("A live snapshot is filled by the source's changes as they come, which no masking or subset rule reads: real values would be stored on this server."),
					 errhint("Remove the source's masking, subset and follow rules first.")));
	}
}

/* One value of a query on the source that must return one row. */
static char *
sbx_live_ask(PGconn *conn, const char *source, const char *sql, int nparams,
			 const char *const *params)
{
	PGresult   *res = sbx_remote_exec(conn, sql, nparams, params, PGRES_TUPLES_OK,
									  psprintf("could not read source \"%s\"", source));
	char	   *value = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)
		? pstrdup(PQgetvalue(res, 0, 0)) : NULL;

	PQclear(res);
	return value;
}

/* The server settings and the login a live snapshot needs on the source. */
static void
sbx_check_live_server(PGconn *conn, const char *source)
{
	char	   *wal_level = sbx_live_ask(conn, source,
										 "SELECT pg_catalog.current_setting('wal_level')", 0, NULL);
	char	   *senders = sbx_live_ask(conn, source,
									   "SELECT LEAST(pg_catalog.current_setting('max_wal_senders')::int,"
									   "             pg_catalog.current_setting('max_replication_slots')::int)",
									   0, NULL);
	char	   *may_replicate = sbx_live_ask(conn, source,
											 "SELECT rolreplication OR rolsuper FROM pg_catalog.pg_roles"
											 " WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER",
											 0, NULL);

	if (wal_level == NULL || strcmp(wal_level, "logical") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" runs with wal_level = %s, and a live snapshot needs logical",
						source, wal_level ? wal_level : "unknown"),
				 errhint("Set wal_level = logical on the source's server and restart it.")));
	if (senders == NULL || atoi(senders) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" takes no replication connection or slot", source),
				 errhint("Set max_wal_senders and max_replication_slots above 0 on the source's server and restart it.")));
	if (may_replicate == NULL || strcmp(may_replicate, "t") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the login of source \"%s\" may not replicate", source),
				 errdetail("A live snapshot's slot and subscription log in as the source's login, which needs the REPLICATION attribute."),
				 errhint("ALTER ROLE ... REPLICATION on the source, or name a login that has it.")));
}

/*
 * The tables publication 'publication' publishes, as OIDs on the source,
 * after checking each can be followed: a replica identity where updates
 * or deletes are published, and no exclude_data rule emptying it.
 */
static List *
sbx_check_published_tables(PGconn *conn, const char *source, const char *publication,
						   List *exclude_patterns)
{
	const char *params[1] = {publication};
	PGresult   *res;
	List	   *relids = NIL;
	ListCell   *lc;

	if (sbx_live_ask(conn, source, "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1",
					 1, params) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("publication \"%s\" does not exist on source \"%s\"", publication, source),
				 errhint("Create it on the source (CREATE PUBLICATION ... FOR TABLE ... or FOR ALL TABLES): what it publishes is the admin's choice.")));
	res = sbx_remote_exec(conn,
						  "SELECT c.oid, pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname),"
						  "       n.nspname, c.relname,"
						  "       (p.pubupdate OR p.pubdelete) AND (c.relreplident = 'n'"
						  "        OR (c.relreplident = 'd' AND NOT EXISTS"
						  "            (SELECT 1 FROM pg_catalog.pg_index i"
						  "              WHERE i.indrelid = c.oid AND i.indisprimary)))"
						  "  FROM pg_catalog.pg_publication p"
						  "  JOIN pg_catalog.pg_publication_tables t ON t.pubname = p.pubname"
						  "  JOIN pg_catalog.pg_namespace n ON n.nspname = t.schemaname"
						  "  JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename"
						  " WHERE p.pubname = $1 ORDER BY 2",
						  1, params, PGRES_TUPLES_OK,
						  psprintf("could not read publication \"%s\" of source \"%s\"",
								   publication, source));
	if (PQntuples(res) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("publication \"%s\" of source \"%s\" publishes no table", publication, source)));
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *name = PQgetvalue(res, i, 1);

		if (strcmp(PQgetvalue(res, i, 4), "t") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table %s of source \"%s\" has no replica identity, and its updates and deletes cannot be followed",
							name, source),
					 errhint("Give it a primary key or ALTER TABLE ... REPLICA IDENTITY, or leave it out of publication \"%s\".",
							 publication)));
		foreach(lc, exclude_patterns)
		{
			char	   *schema_re;
			char	   *table_re;
			const char *match[4];

			sbx_table_pattern_regex(lfirst(lc), &schema_re, &table_re);
			match[0] = schema_re;
			match[1] = PQgetvalue(res, i, 2);
			match[2] = PQgetvalue(res, i, 3);
			match[3] = table_re;
			if (sbx_live_ask(conn, source,
							 "SELECT 1 WHERE ($1::text IS NULL OR $2 ~ $1) AND $3 ~ $4", 4,
							 match) != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("publication \"%s\" of source \"%s\" publishes table %s, whose rows exclude_data rule \"%s\" leaves out",
								publication, source, name, (char *) lfirst(lc)),
						 errhint("Leave the table out of the publication, or remove the rule.")));
		}
		relids = lappend_oid(relids, atooid(PQgetvalue(res, i, 0)));
	}
	PQclear(res);
	return relids;
}

/*
 * set_live(source text, publication text)
 */
Datum
pgsandbox_set_live(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *publication;
	char	   *password;
	SbxLiveSource row;
	SbxLocale	locale;
	PGconn	   *volatile conn;
	List	   *relids = NIL;
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[7];

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "publication");
	sbx_check_database();
	sbx_require_admin();
	sbx_require_live_catalog();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	publication = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (publication[0] == '\0' || strlen(publication) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid publication name"),
				 errdetail("A publication name has 1 to %d bytes.", NAMEDATALEN - 1)));

	SPI_connect();
	sbx_lock_source(source);
	sbx_live_source_row(source, &row);
	if (!row.allow_data)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("source \"%s\" is not approved for data clones", source),
				 errhint("A live snapshot holds the source's rows: add the source with allow_data => true.")));
	password = sbx_conninfo_password(row.conninfo);
	if (password == NULL || sbx_conninfo_local_default(row.conninfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the connection string of source \"%s\" must name a user and give its password to be live",
						source),
				 errdetail("The live snapshot's subscription logs in with it as the snapshot's own role, which no identity of this server backs.")));
	explicit_bzero(password, strlen(password));

	conn = sbx_source_open(source, row.conninfo, row.require_password);
	PG_TRY();
	{
		sbx_source_read_begin(conn, psprintf("could not read source \"%s\"", source));
		sbx_check_live_server(conn, source);
		relids = sbx_check_published_tables(conn, source, publication, row.exclude_patterns);
		/* the apply runs the code of these tables' owners, as the snapshot's role */
		sbx_check_tables_trusted(conn, source, row.trusted_owners, relids,
								 "to apply its changes in a live snapshot");
		sbx_read_source_locale(conn, source, &locale);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
	explicit_bzero(row.conninfo, strlen(row.conninfo));

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(publication);
	values[2] = CStringGetTextDatum(locale.encoding);
	values[3] = CStringGetTextDatum(locale.collate);
	values[4] = CStringGetTextDatum(locale.ctype);
	values[5] = CStringGetTextDatum(psprintf("%c", locale.provider ? locale.provider : 'c'));
	values[6] = CStringGetTextDatum(locale.icu_locale);
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET live_publication = $2 WHERE name = $1",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not make source \"%s\" live", source);
	/* the worker builds the live snapshot as it builds a planned one */
	if (SPI_execute_with_args("INSERT INTO pgsandbox.snapshot_plan AS p (source, schema_only, source_locale)"
							  " VALUES ($1, false, ARRAY[$3, $4, $5, $6, $7])"
							  " ON CONFLICT (source, schema_only) DO UPDATE"
							  " SET source_locale = excluded.source_locale",
							  7, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not plan the live snapshot of source \"%s\"", source);
	SPI_finish();
	sbx_queue_wake_worker();
	PG_RETURN_VOID();
}

/*
 * unset_live(source text)
 */
Datum
pgsandbox_unset_live(PG_FUNCTION_ARGS)
{
	char	   *source;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_check_database();
	sbx_require_admin();
	sbx_require_live_catalog();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	values[0] = CStringGetTextDatum(source);

	SPI_connect();
	sbx_lock_source(source);
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET live_publication = NULL"
							  " WHERE name = $1 AND live_publication IS NOT NULL",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not stop following source \"%s\"", source);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" is not live", source)));
	SPI_finish();
	sbx_queue_wake_worker();
	PG_RETURN_VOID();
}
