/*-------------------------------------------------------------------------
 *
 * source_info.c
 *	  What a clone reads from its source's catalog before it copies it: the
 *	  source's own extensions, their configuration tables, the settings of
 *	  the source database, and its encoding and locale.
 *
 * pg_dump copies objects, not the database they live in: a sandbox must be
 * given the source's encoding, locale and database settings apart from
 * the archive, and the extensions (which the sandbox role cannot own) and
 * their configuration tables (which it cannot write) are set up from the
 * admin side.  Everything here runs over one libpq connection, made by
 * sbx_source_open, and only reads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

/* Run a catalog query on the source; raise its error if it fails. */
static PGresult *
sbx_source_query(PGconn *conn, const char *source, const char *query,
				 const char *what)
{
	PGresult   *res = libpqsrv_exec(conn, query, PG_WAIT_EXTENSION);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read the %s of source \"%s\"", what, source),
				 errdetail_internal("%s", msg)));
	}
	return res;
}

/* A result that must be one row of one value that is not null. */
static void
sbx_expect_one_value(PGresult *res, const char *source, const char *what)
{
	if (PQntuples(res) != 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0))
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("source \"%s\" gave no %s", source, what)));
	}
}

/*
 * One entry of pg_db_role_setting.setconfig ("name=value") as a setting,
 * allocated in the current memory context; NULL if it has no '='.
 */
SbxSetting *
sbx_parse_setting(const char *item)
{
	const char *eq = strchr(item, '=');
	SbxSetting *setting;

	if (eq == NULL)
		return NULL;
	setting = palloc0(sizeof(SbxSetting));
	setting->name = pnstrdup(item, eq - item);
	setting->value = pstrdup(eq + 1);
	return setting;
}

/*
 * The encoding and locale of the source database.
 */
void
sbx_read_source_locale(PGconn *conn, const char *source, SbxLocale *locale)
{
	PGresult   *res;
	const char *query;
	int			source_version = PQserverVersion(conn);

	memset(locale, 0, sizeof(*locale));

	/*
	 * The source's catalog, not this server's, decides the query.  The
	 * locale provider and ICU locale are known from PostgreSQL 15 on; 17
	 * renamed daticulocale to datlocale, which also holds the locale of the
	 * builtin provider it added.
	 */
	if (source_version >= 170000)
		query = "SELECT pg_catalog.pg_encoding_to_char(encoding), datcollate, datctype,"
			"       datlocprovider, coalesce(datlocale, '')"
			"  FROM pg_catalog.pg_database"
			" WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";
	else if (source_version >= 150000)
		query = "SELECT pg_catalog.pg_encoding_to_char(encoding), datcollate, datctype,"
			"       datlocprovider, coalesce(daticulocale, '')"
			"  FROM pg_catalog.pg_database"
			" WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";
	else
		query = "SELECT pg_catalog.pg_encoding_to_char(encoding), datcollate, datctype,"
			"       'c', ''"
			"  FROM pg_catalog.pg_database"
			" WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()";
	res = sbx_source_query(conn, source, query, "encoding and locale");
	if (PQntuples(res) == 1)
	{
		strlcpy(locale->encoding, PQgetvalue(res, 0, 0), sizeof(locale->encoding));
		strlcpy(locale->collate, PQgetvalue(res, 0, 1), sizeof(locale->collate));
		strlcpy(locale->ctype, PQgetvalue(res, 0, 2), sizeof(locale->ctype));
		locale->provider = PQgetvalue(res, 0, 3)[0];
		strlcpy(locale->icu_locale, PQgetvalue(res, 0, 4), sizeof(locale->icu_locale));
	}
	PQclear(res);
}

/*
 * A sandbox host must be at least as new as its sources: pg_dump refuses
 * to dump a newer server, and what a newer server made need not restore
 * into an older one.  So a source of a newer major is refused, by its
 * version as the connection reports it, before a clone creates anything.
 */
void
sbx_check_source_version(const char *source, int source_version)
{
	int			source_major = source_version / 10000;
	int			host_major = PG_VERSION_NUM / 10000;

	if (source_major > host_major)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" runs PostgreSQL %d, which is newer than this server's PostgreSQL %d",
						source, source_major, host_major),
				 errdetail("pg_dump %d cannot dump a newer server, and a sandbox on PostgreSQL %d could not hold all a newer one makes.",
						   host_major, host_major),
				 errhint("Run pgsandbox on PostgreSQL %d or later to clone this source.",
						 source_major)));
}

/*
 * Everything a clone reads from its source before the dump.
 */
SbxSourceInfo *
sbx_read_source_info(PGconn *conn, const char *source)
{
	SbxSourceInfo *info = palloc0(sizeof(SbxSourceInfo));
	PGresult   *res;

	sbx_check_source_version(source, PQserverVersion(conn));

	/*
	 * The source's own extensions (not those built into the server), in the
	 * order they were created, so that dependencies come first.
	 */
	res = sbx_source_query(conn, source,
						   "SELECT e.oid, e.extname, n.nspname, n.oid"
						   "  FROM pg_catalog.pg_extension e"
						   "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
						   " WHERE e.oid OPERATOR(pg_catalog.>=) 16384"
						   " ORDER BY e.oid",
						   "extensions");
	for (int i = 0; i < PQntuples(res); i++)
	{
		SbxExtension *ext = palloc0(sizeof(SbxExtension));

		ext->oid = atooid(PQgetvalue(res, i, 0));
		ext->name = pstrdup(PQgetvalue(res, i, 1));
		ext->schema = pstrdup(PQgetvalue(res, i, 2));
		ext->schema_oid = atooid(PQgetvalue(res, i, 3));
		info->extensions = lappend(info->extensions, ext);
	}
	PQclear(res);

	/* their configuration tables and sequences, with pg_dump's filters */
	res = sbx_source_query(conn, source,
						   "SELECT c.oid, n.nspname, c.relname, c.relkind,"
						   "       coalesce(e.extcondition[x.i], ''),"
						   "       coalesce((SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', '"
						   "                                              ORDER BY a.attnum)"
						   "                   FROM pg_catalog.pg_attribute a"
						   "                  WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid"
						   "                    AND a.attnum OPERATOR(pg_catalog.>) 0"
						   "                    AND NOT a.attisdropped"
						   "                    AND a.attgenerated OPERATOR(pg_catalog.=) ''), '')"
						   "  FROM pg_catalog.pg_extension e"
						   " CROSS JOIN LATERAL pg_catalog.unnest(e.extconfig) WITH ORDINALITY AS x(reloid, i)"
						   "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) x.reloid"
						   "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
						   " WHERE e.oid OPERATOR(pg_catalog.>=) 16384"
						   " ORDER BY e.oid, x.i",
						   "extension configuration tables");
	for (int i = 0; i < PQntuples(res); i++)
	{
		SbxConfigRel *rel = palloc0(sizeof(SbxConfigRel));

		rel->oid = atooid(PQgetvalue(res, i, 0));
		rel->schema = pstrdup(PQgetvalue(res, i, 1));
		rel->name = pstrdup(PQgetvalue(res, i, 2));
		rel->relkind = PQgetvalue(res, i, 3)[0];
		rel->condition = pstrdup(PQgetvalue(res, i, 4));
		rel->columns = pstrdup(PQgetvalue(res, i, 5));
		info->config_rels = lappend(info->config_rels, rel);
	}
	PQclear(res);

	/* settings of the source database for every role */
	res = sbx_source_query(conn, source,
						   "SELECT pg_catalog.unnest(s.setconfig)"
						   "  FROM pg_catalog.pg_db_role_setting s"
						   "  JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) s.setdatabase"
						   " WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()"
						   "   AND s.setrole OPERATOR(pg_catalog.=) 0",
						   "database settings");
	for (int i = 0; i < PQntuples(res); i++)
	{
		SbxSetting *setting = sbx_parse_setting(PQgetvalue(res, i, 0));

		if (setting != NULL)
			info->settings = lappend(info->settings, setting);
	}
	PQclear(res);

	/* event triggers, which the sandbox role can never own */
	res = sbx_source_query(conn, source,
						   "SELECT oid, evtname FROM pg_catalog.pg_event_trigger ORDER BY evtname",
						   "event triggers");
	for (int i = 0; i < PQntuples(res); i++)
	{
		SbxEventTrigger *evt = palloc0(sizeof(SbxEventTrigger));

		evt->oid = atooid(PQgetvalue(res, i, 0));
		evt->name = pstrdup(PQgetvalue(res, i, 1));
		info->event_triggers = lappend(info->event_triggers, evt);
	}
	PQclear(res);

	/* its size, for the progress view */
	res = sbx_source_query(conn, source,
						   "SELECT pg_catalog.pg_database_size(pg_catalog.current_database())",
						   "size");
	sbx_expect_one_value(res, source, "size");
	info->size_bytes = pg_strtoint64(PQgetvalue(res, 0, 0));
	PQclear(res);

	/* how much of the data its largest table holds, as last measured */
	res = sbx_source_query(conn, source,
						   SBX_LARGEST_SHARE_SQL,
						   "size of the largest table");
	sbx_expect_one_value(res, source, "size of the largest table");
	info->largest_share = strtod(PQgetvalue(res, 0, 0), NULL);
	PQclear(res);

	sbx_read_source_locale(conn, source, &info->locale);
	return info;
}
