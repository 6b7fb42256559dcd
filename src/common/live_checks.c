/*-------------------------------------------------------------------------
 *
 * live_checks.c
 *	  What a source must offer to be followed by a live snapshot, checked
 *	  on it by set_live() and again by every live build, whose source may
 *	  have changed since: its settings, its login, the publication and
 *	  what it publishes.
 *
 * The apply of a live snapshot runs the code of the published tables
 * (index expressions, constraints, defaults and generated columns, triggers
 * enabled for replicas) as pgsandbox_live, so every published table must be
 * of a trusted owner, in a trusted owner's schema, and call only functions
 * of trusted owners, as a table pgsandbox plans a query on must
 * (source_trust.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "sbx_conn.h"
#include "utils/builtins.h"

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
 * or deletes are published.
 */
static List *
sbx_check_published_tables(PGconn *conn, const char *source, const char *publication)
{
	const char *params[1] = {publication};
	PGresult   *res;
	List	   *relids = NIL;

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
		relids = lappend_oid(relids, atooid(PQgetvalue(res, i, 0)));
	}
	PQclear(res);
	return relids;
}

/*
 * Check, over connection 'conn' to source 'source' (whose trusted owners
 * are 'trusted_owners', as text[]), that it can be followed from
 * publication 'publication'.  An error says what is missing.
 */
void
sbx_check_live_source(PGconn *conn, const char *source, const char *publication,
					  const char *trusted_owners)
{
	List	   *relids;

	sbx_check_live_server(conn, source);
	relids = sbx_check_published_tables(conn, source, publication);
	sbx_check_tables_trusted_ext(conn, source, trusted_owners, relids, true,
								 "to apply its changes in a live snapshot");
	list_free(relids);
}
