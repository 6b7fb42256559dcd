/*-------------------------------------------------------------------------
 *
 * describe.c
 *	  pgsandbox.describe_schema() and pgsandbox.schema_diff(): the shape of
 *	  a sandbox as compact JSON, and what differs between it and its source.
 *
 * One catalog query, run in the database described (the sandbox, logged in
 * as its role, or the source, with the source's connection), builds the
 * whole description there.  It leaves out the system schemas and whatever
 * belongs to an extension, and orders everything by name, so that two
 * descriptions of the same schema are equal.  It uses only catalog columns
 * that PostgreSQL 12 and later all have.  The comparison itself is SQL, in
 * pgsandbox._schema_diff().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "pgsandbox.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(pgsandbox_describe_schema);
PG_FUNCTION_INFO_V1(pgsandbox_schema_diff);

static const char sbx_describe_query[] =
"WITH nsp AS ("
"  SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n"
"   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
"     AND n.nspname !~ '^pg_(toast_)?temp_'"
"     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
"                      WHERE d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass"
"                        AND d.objid = n.oid AND d.deptype = 'e')),"
" rel AS ("
"  SELECT c.oid, n.nspname || '.' || c.relname AS name, c.relkind"
"    FROM pg_catalog.pg_class c JOIN nsp n ON n.oid = c.relnamespace"
"   WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')"
"     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
"                      WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
"                        AND d.objid = c.oid AND d.deptype = 'e')),"
" col AS ("
"  SELECT a.attrelid, pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object("
"           'name', a.attname,"
"           'type', pg_catalog.format_type(a.atttypid, a.atttypmod),"
"           'not_null', CASE WHEN a.attnotnull THEN true END,"
"           'default', pg_catalog.pg_get_expr(ad.adbin, ad.adrelid))) ORDER BY a.attnum) AS columns"
"    FROM pg_catalog.pg_attribute a"
"    LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum"
"   WHERE a.attrelid IN (SELECT oid FROM rel) AND a.attnum > 0 AND NOT a.attisdropped"
"   GROUP BY a.attrelid)"
" SELECT pg_catalog.jsonb_build_object("
"  'schemas', (SELECT COALESCE(pg_catalog.jsonb_agg(nspname ORDER BY nspname), '[]') FROM nsp),"
"  'tables', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object("
"      'name', r.name,"
"      'kind', CASE r.relkind WHEN 'p' THEN 'partitioned' WHEN 'f' THEN 'foreign' END,"
"      'columns', col.columns,"
"      'constraints', (SELECT pg_catalog.jsonb_agg(co.conname || ' ' || pg_catalog.pg_get_constraintdef(co.oid) ORDER BY co.conname)"
"                        FROM pg_catalog.pg_constraint co WHERE co.conrelid = r.oid),"
"      'indexes', (SELECT pg_catalog.jsonb_agg(pg_catalog.pg_get_indexdef(i.indexrelid) ORDER BY ic.relname)"
"                    FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid"
"                   WHERE i.indrelid = r.oid"
"                     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint co"
"                                      WHERE co.conindid = i.indexrelid AND co.conrelid = r.oid)),"
"      'comment', pg_catalog.obj_description(r.oid, 'pg_class'))) ORDER BY r.name), '[]')"
"     FROM rel r LEFT JOIN col ON col.attrelid = r.oid WHERE r.relkind IN ('r', 'p', 'f')),"
"  'views', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object("
"      'name', r.name,"
"      'kind', CASE r.relkind WHEN 'm' THEN 'materialized' END,"
"      'columns', (SELECT pg_catalog.jsonb_agg((c->>'name') || ' ' || (c->>'type'))"
"                    FROM pg_catalog.jsonb_array_elements(col.columns) c),"
"      'hash', pg_catalog.left(pg_catalog.md5(pg_catalog.pg_get_viewdef(r.oid)), 12))) ORDER BY r.name), '[]')"
"     FROM rel r LEFT JOIN col ON col.attrelid = r.oid WHERE r.relkind IN ('v', 'm')),"
"  'sequences', (SELECT COALESCE(pg_catalog.jsonb_agg(r.name ORDER BY r.name), '[]')"
"     FROM rel r WHERE r.relkind = 'S'),"
"  'functions', (SELECT COALESCE(pg_catalog.jsonb_agg(f.obj ORDER BY f.obj->>'name'), '[]') FROM ("
"     SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object("
"        'name', n.nspname || '.' || p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',"
"        'kind', CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window' END,"
"        'returns', CASE WHEN p.prokind IN ('f', 'w') THEN pg_catalog.pg_get_function_result(p.oid) END,"
"        'language', l.lanname,"
"        'hash', pg_catalog.left(pg_catalog.md5(p.prosrc), 12))) AS obj"
"       FROM pg_catalog.pg_proc p JOIN nsp n ON n.oid = p.pronamespace"
"       JOIN pg_catalog.pg_language l ON l.oid = p.prolang"
"      WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
"                         WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass"
"                           AND d.objid = p.oid AND d.deptype = 'e')) f),"
"  'extensions', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object("
"      'name', e.extname, 'version', e.extversion, 'schema', n.nspname) ORDER BY e.extname), '[]')"
"     FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace)"
" )::text";

/* The description of the database conn is connected to. */
static char *
sbx_describe_remote(PGconn *conn, const char *what)
{
	/* only the system's operators and functions, whatever the database says */
	(void) sbx_remote_value(conn,
							"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)",
							what);
	return sbx_remote_value(conn, sbx_describe_query, what);
}

/* Describe the database of a connection, and close it whatever happens. */
static char *
sbx_describe_and_close(PGconn *conn, const char *what)
{
	char	   *volatile json = NULL;

	PG_TRY();
	{
		json = sbx_describe_remote(conn, what);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
	return json;
}

static char *
sbx_describe_sandbox(const char *name, char **source)
{
	PGconn	   *conn = sbx_sandbox_connect(name, source);

	return sbx_describe_and_close(conn, psprintf("the schema of sandbox \"%s\"", name));
}

/*
 * describe_schema(name text) RETURNS jsonb
 */
Datum
pgsandbox_describe_schema(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *json;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sandbox name must not be null")));
	json = sbx_describe_sandbox(text_to_cstring(PG_GETARG_TEXT_PP(0)), &source);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}

/*
 * schema_diff(name text) RETURNS jsonb
 */
Datum
pgsandbox_schema_diff(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *source;
	char	   *sandbox_json;
	char	   *source_json;
	Oid			argtypes[2] = {JSONBOID, JSONBOID};
	Datum		values[2];
	bool		isnull;
	Datum		result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sandbox name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sandbox_json = sbx_describe_sandbox(name, &source);
	source_json = sbx_describe_and_close(sbx_source_connect(source),
										 psprintf("the schema of source \"%s\"", source));

	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(source_json));
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(sandbox_json));
	SPI_connect();
	if (SPI_execute_with_args("SELECT pgsandbox._schema_diff($1, $2)", 2, argtypes,
							  values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not compare the schemas");
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	result = SPI_datumTransfer(result, false, -1);
	SPI_finish();
	PG_RETURN_DATUM(result);
}
