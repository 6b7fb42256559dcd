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
 * Across majors, PostgreSQL prints the same view differently: from 16 on,
 * a column of a query over one table is printed without the table's name.
 * When the source runs another major than the sandbox, a view whose two
 * definitions differ is printed again by the sandbox's server: the source's
 * text is made a temporary view on the sandbox connection, in a transaction
 * that is rolled back, and that view's definition stands for the source's.
 * A view unchanged since the clone then compares equal, since pg_restore
 * made the sandbox's view from that same text; a changed one is shown with
 * both sides printed alike.
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
#include "sbx_conn.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(pgsandbox_describe_schema);
PG_FUNCTION_INFO_V1(pgsandbox_schema_diff);

/* the catalog query, from describe_query.sql (see the Makefile) */
static const char sbx_describe_query[] =
#include "describe_query.h"
;

/*
 * Send the description query on a connection, after making the session
 * see only the system's operators and functions, whatever the database
 * says.
 */
static void
sbx_describe_send(PGconn *conn, const char *what)
{
	sbx_source_session_setup(conn, false, psprintf("could not read %s", what));
	if (!PQsendQuery(conn, sbx_describe_query))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read %s", what),
				 errdetail_internal("%s", pchomp(PQerrorMessage(conn)))));
}

/*
 * The descriptions of the databases of n connections, read at once, so that
 * schema_diff() waits for the slower side only.  Interrupts are served
 * while waiting.
 */
static void
sbx_describe_all(PGconn **conns, const char **whats, char **jsons, int n)
{
	PGresult   *results[2] = {NULL, NULL};
	bool		done[2] = {false, false};
	int			left = n;

	Assert(n <= 2);
	for (int i = 0; i < n; i++)
		sbx_describe_send(conns[i], whats[i]);

	while (left > 0)
	{
		for (int i = 0; i < n; i++)
		{
			PGresult   *res;

			if (done[i] || PQisBusy(conns[i]))
				continue;
			/* the query's one result, then the end of results */
			while ((res = PQgetResult(conns[i])) != NULL)
			{
				if (results[i] == NULL)
					results[i] = res;
				else
					PQclear(res);
			}
			done[i] = true;
			left--;
		}
		if (left == 0)
			break;

		/* wait for the first connection still busy, with a short timeout */
		for (int i = 0; i < n; i++)
		{
			int			rc;

			if (done[i])
				continue;
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								   WL_EXIT_ON_PM_DEATH,
								   PQsocket(conns[i]), 10L, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			break;
		}
		for (int i = 0; i < n; i++)
		{
			if (!done[i] && PQconsumeInput(conns[i]) == 0)
			{
				/* broken: let PQgetResult report it */
				continue;
			}
		}
	}

	for (int i = 0; i < n; i++)
	{
		PGresult   *res = results[i];

		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		{
			char	   *msg = sbx_remote_error(conns[i], res);

			for (int k = 0; k < n; k++)
				PQclear(results[k]);
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not read %s", whats[i]),
					 errdetail_internal("%s", msg)));
		}
		jsons[i] = pstrdup(PQgetvalue(res, 0, 0));
	}
	for (int i = 0; i < n; i++)
		PQclear(results[i]);
}

/*
 * Describe the databases of the given connections, and close them whatever
 * happens.
 */
static void
sbx_describe_and_close(PGconn **conns, const char **whats, char **jsons, int n)
{
	PG_TRY();
	{
		sbx_describe_all(conns, whats, jsons, n);
	}
	PG_FINALLY();
	{
		for (int i = 0; i < n; i++)
		{
			if (conns[i] != NULL)
				libpqsrv_disconnect(conns[i]);
		}
	}
	PG_END_TRY();
}

/*
 * One statement on the sandbox connection, over the extended protocol (a
 * single statement only); false if it failed.
 */
static bool
sbx_reprint_step(PGconn *conn, const char *sql, char **value)
{
	PGresult   *res = libpqsrv_exec_params(conn, sql, 0, NULL, NULL, NULL, NULL, 0,
										   PG_WAIT_EXTENSION);
	bool		ok;

	if (value != NULL)
	{
		ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
			!PQgetisnull(res, 0, 0);
		if (ok)
			*value = pstrdup(PQgetvalue(res, 0, 0));
	}
	else
		ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	return ok;
}

/*
 * Print the source's views again on the sandbox's server, where their
 * definitions differ (see the file header), and return the source's
 * description with those definitions in place.  A definition the sandbox
 * cannot take (it names an object the sandbox has dropped) is left as the
 * source printed it.  Runs as the sandbox role, in its own database, and
 * makes nothing: the transaction is rolled back.
 */
static char *
sbx_reprint_source_views(PGconn *sandbox, char *source_json,
						 const char *sandbox_json, const char *what)
{
	Oid			argtypes[2] = {JSONBOID, JSONBOID};
	Datum		values[2];
	int			n;
	char	  **names;
	char	  **defs;
	int			nreprinted = 0;
	Datum	   *name_datums;
	Datum	   *def_datums;
	char	   *result;
	MemoryContext caller = CurrentMemoryContext;

	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(source_json));
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(sandbox_json));

	SPI_connect();
	if (SPI_execute_with_args("SELECT a->>'name', a->>'definition'"
							  "  FROM pg_catalog.jsonb_array_elements($1->'views') a"
							  "  JOIN pg_catalog.jsonb_array_elements($2->'views') b"
							  "    ON a->>'name' = b->>'name'"
							  " WHERE a->'definition' IS DISTINCT FROM b->'definition'"
							  "   AND a->>'definition' IS NOT NULL",
							  2, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not compare the views");
	n = (int) SPI_processed;
	names = palloc0(sizeof(char *) * Max(n, 1));
	defs = palloc0(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		names[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		defs[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
	}

	if (n > 0)
	{
		if (!sbx_reprint_step(sandbox, "BEGIN", NULL))
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not read %s", what),
					 errdetail_internal("%s", sbx_remote_error(sandbox, NULL))));
		for (int i = 0; i < n; i++)
		{
			char	   *def = defs[i];
			size_t		len = strlen(def);
			char	   *reprinted = NULL;
			bool		ok;

			/* the definition ends with a semicolon, which CREATE VIEW does not take */
			while (len > 0 && (def[len - 1] == ';' || isspace((unsigned char) def[len - 1])))
				def[--len] = '\0';

			if (!sbx_reprint_step(sandbox, "SAVEPOINT pgsandbox_reprint", NULL))
				break;
			ok = sbx_reprint_step(sandbox,
								  psprintf("CREATE TEMPORARY VIEW pgsandbox_reprint AS %s", def),
								  NULL) &&
				sbx_reprint_step(sandbox,
								 "SELECT pg_catalog.pg_get_viewdef("
								 "'pg_temp.pgsandbox_reprint'::pg_catalog.regclass)",
								 &reprinted);
			if (!sbx_reprint_step(sandbox, "ROLLBACK TO SAVEPOINT pgsandbox_reprint", NULL))
				break;
			if (ok)
			{
				names[nreprinted] = names[i];
				defs[nreprinted] = reprinted;
				nreprinted++;
			}
		}
		(void) sbx_reprint_step(sandbox, "ROLLBACK", NULL);
	}

	if (nreprinted == 0)
	{
		SPI_finish();
		return source_json;
	}

	/* put the new definitions in place, keeping the views' order */
	name_datums = palloc(sizeof(Datum) * nreprinted);
	def_datums = palloc(sizeof(Datum) * nreprinted);
	for (int i = 0; i < nreprinted; i++)
	{
		name_datums[i] = CStringGetTextDatum(names[i]);
		def_datums[i] = CStringGetTextDatum(defs[i]);
	}
	{
		Oid			patch_types[3] = {JSONBOID, TEXTARRAYOID, TEXTARRAYOID};
		Datum		patch_values[3];

		patch_values[0] = values[0];
		patch_values[1] = PointerGetDatum(construct_array(name_datums, nreprinted, TEXTOID,
														  -1, false, TYPALIGN_INT));
		patch_values[2] = PointerGetDatum(construct_array(def_datums, nreprinted, TEXTOID,
														  -1, false, TYPALIGN_INT));
		if (SPI_execute_with_args("SELECT pg_catalog.jsonb_set($1, '{views}',"
								  " (SELECT pg_catalog.jsonb_agg(CASE WHEN r.def IS NULL THEN v"
								  "   ELSE pg_catalog.jsonb_set(v, '{definition}', pg_catalog.to_jsonb(r.def)) END"
								  "   ORDER BY v.ord)"
								  "    FROM pg_catalog.jsonb_array_elements($1->'views') WITH ORDINALITY v(v, ord)"
								  "    LEFT JOIN ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) r(name, def) ON r.name = v->>'name'))::text",
								  3, patch_types, patch_values, NULL, true, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "could not compare the views");
		result = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		result = MemoryContextStrdup(caller, result);
	}
	SPI_finish();
	return result;
}

/*
 * describe_schema(name text) RETURNS jsonb
 */
Datum
pgsandbox_describe_schema(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *source;
	char	   *json;
	PGconn	   *conns[1];
	const char *whats[1];

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sandbox name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	conns[0] = sbx_sandbox_connect(name, &source);
	whats[0] = psprintf("the schema of sandbox \"%s\"", name);
	sbx_describe_and_close(conns, whats, &json, 1);
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
	PGconn	   *conns[2];
	const char *whats[2];
	char	   *jsons[2];
	Oid			argtypes[2] = {JSONBOID, JSONBOID};
	Datum		values[2];
	bool		isnull;
	Datum		result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sandbox name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	conns[0] = sbx_sandbox_connect(name, &source);
	conns[1] = NULL;
	whats[0] = psprintf("the schema of sandbox \"%s\"", name);
	whats[1] = psprintf("the schema of source \"%s\"", source);
	PG_TRY();
	{
		conns[1] = sbx_source_connect(source);
		sbx_describe_all(conns, whats, jsons, 2);
		if (PQserverVersion(conns[0]) / 10000 != PQserverVersion(conns[1]) / 10000)
			jsons[1] = sbx_reprint_source_views(conns[0], jsons[1], jsons[0], whats[0]);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conns[0]);
		if (conns[1] != NULL)
			libpqsrv_disconnect(conns[1]);
	}
	PG_END_TRY();

	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(jsons[1]));
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(jsons[0]));
	SPI_connect();
	if (SPI_execute_with_args("SELECT pgsandbox._schema_diff($1, $2)", 2, argtypes,
							  values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not compare the schemas");
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	result = SPI_datumTransfer(result, false, -1);
	SPI_finish();
	PG_RETURN_DATUM(result);
}
