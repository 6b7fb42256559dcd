/*-------------------------------------------------------------------------
 *
 * describe.c
 *	  pgsandbox.describe_schema() and pgsandbox.schema_diff(): the shape of
 *	  a sandbox as compact JSON, and what differs between it and its source.
 *
 * One catalog query (describe_query.sql), run in the database described
 * (the sandbox, logged in as its role, or the source, with the source's
 * connection), builds the whole description there: every kind of object a
 * migration changes, each with its definition as PostgreSQL prints it.  It
 * leaves out the system schemas and whatever belongs to an extension, and
 * orders everything by name, so that two descriptions of the same schema
 * are equal.  It uses only catalog columns that PostgreSQL 12 and later all
 * have.  The comparison itself is SQL, in pgsandbox._schema_diff().
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

/* the catalog query, from describe_query.sql (see the Makefile) */
static const char sbx_describe_query[] =
#include "describe_query.h"
;

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
