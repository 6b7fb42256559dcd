/*-------------------------------------------------------------------------
 *
 * sandbox_conn.c
 *	  Logging into a sandbox as its own role, and into a sandbox's source,
 *	  from the caller's backend, for run_sql, describe_schema and
 *	  schema_diff.
 *
 * Task SQL never runs through SET ROLE or SET SESSION AUTHORIZATION of a
 * privileged session: it goes over a real libpq login as the sandbox role,
 * whose password the lifecycle worker stored in pgsandbox.sandbox_secret,
 * a table only the extension's owner can read.  The functions that use it
 * are SECURITY DEFINER and check first that the caller owns the sandbox or
 * is an admin.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "utils/builtins.h"

/*
 * Find a ready sandbox the caller may use: its password and its source's
 * name.  A sandbox of someone else is, for a caller who is not an admin,
 * one that does not exist.
 */
static void
sbx_sandbox_lookup(const char *name, char **password, char **source)
{
	Oid			argtypes[3] = {TEXTOID, OIDOID, BOOLOID};
	Datum		values[3];
	MemoryContext outer = CurrentMemoryContext;
	Oid			caller = sbx_caller();
	int			rc;

	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox does not exist"),
				 errdetail("No sandbox has a name that long.")));

	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(caller);
	values[2] = BoolGetDatum(sbx_is_admin(caller));
	SPI_connect();
	rc = SPI_execute_with_args(psprintf("SELECT k.password, s.source"
										"  FROM pgsandbox.sandbox s"
										"  JOIN pgsandbox.sandbox_secret k ON k.sandbox_id = s.id"
										" WHERE s.name = $1 AND s.status = 'ready'%s"
										"   AND (s.owner_oid = $2 OR $3)",
										sbx_if_kinds(" AND s.kind = 'sandbox'")),
							   3, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up sandbox \"%s\"", name);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name),
				 errdetail("Only a ready sandbox can be used.")));
	*password = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1));
	*source = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 2));
	SPI_finish();
}

/*
 * Log into database 'dbname' as sandbox role 'name', with its password: the
 * sandbox's database, or the one a reset fills.  The password never appears
 * in a message.
 */
PGconn *
sbx_sandbox_login(const char *dbname, const char *name, const char *password)
{
	const char *keywords[7];
	const char *values[7];
	const char *secrets[2];
	char		portstr[16];
	PGconn	   *conn;

	snprintf(portstr, sizeof(portstr), "%d", sbx_effective_port());
	keywords[0] = "host";
	values[0] = sbx_effective_host();
	keywords[1] = "port";
	values[1] = portstr;
	keywords[2] = "dbname";
	values[2] = dbname;
	keywords[3] = "user";
	values[3] = name;
	keywords[4] = "password";
	values[4] = password;
	keywords[5] = "application_name";
	values[5] = "pgsandbox";
	keywords[6] = NULL;
	values[6] = NULL;

	conn = libpqsrv_connect_params(keywords, values, false, PG_WAIT_EXTENSION);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		char	   *msg;

		secrets[0] = password;
		secrets[1] = NULL;
		msg = sbx_redact(PQerrorMessage(conn), secrets);
		msg[strcspn(msg, "\n")] = '\0';
		libpqsrv_disconnect(conn);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not log into sandbox \"%s\"", name),
				 errdetail_internal("%s", msg)));
	}
	return conn;
}

/*
 * Log into a sandbox the caller may use, as its role.  Returns the
 * connection; *source is set to the name of the sandbox's source.
 */
PGconn *
sbx_sandbox_connect(const char *name, char **source)
{
	char	   *password;
	PGconn	   *volatile conn = NULL;

	sbx_sandbox_lookup(name, &password, source);
	PG_TRY();
	{
		conn = sbx_sandbox_login(name, name, password);
	}
	PG_FINALLY();
	{
		explicit_bzero(password, strlen(password));
	}
	PG_END_TRY();
	return conn;
}

/*
 * The first line of the error of a remote command: its result's, or the
 * connection's when there is no result.
 */
char *
sbx_remote_error(PGconn *conn, const PGresult *res)
{
	char	   *msg = pstrdup(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));

	msg[strcspn(msg, "\n")] = '\0';
	return msg;
}

/*
 * The SQLSTATE of a remote error as an error code: connection_failure if
 * there is no result or it names none.
 */
int
sbx_remote_sqlstate(const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (state == NULL || strlen(state) != 5)
		return ERRCODE_CONNECTION_FAILURE;
	return MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
}

/*
 * The primary message of a remote error, without its severity; or the
 * first line of the connection's when there is no result.
 */
char *
sbx_remote_message(PGconn *conn, const PGresult *res)
{
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	return primary ? pstrdup(primary) : sbx_remote_error(conn, res);
}

/*
 * Run one statement, with parameters in text form, over the extended
 * protocol (which takes a single statement), and check that its result has
 * status 'expect'; otherwise raise 'failure' with the remote error's
 * SQLSTATE, its message as detail.  Interrupts are served while waiting.
 */
PGresult *
sbx_remote_exec(PGconn *conn, const char *sql, int nparams, const char *const *params,
				int expect, const char *failure)
{
	PGresult   *res = libpqsrv_exec_params(conn, sql, nparams, NULL, params, NULL,
										   NULL, 0, PG_WAIT_EXTENSION);

	if (PQresultStatus(res) != (ExecStatusType) expect)
	{
		int			code = sbx_remote_sqlstate(res);
		char	   *msg = sbx_remote_message(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(code),
				 errmsg_internal("%s", failure),
				 errdetail_internal("%s", msg)));
	}
	return res;
}

/*
 * Run one query that returns one row with one column, and return that
 * value; raise the server's error otherwise.
 */
char *
sbx_remote_value(PGconn *conn, const char *query, const char *what)
{
	PGresult   *res = libpqsrv_exec(conn, query, PG_WAIT_EXTENSION);
	char	   *result;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not read %s", what),
				 errdetail_internal("%s", msg)));
	}
	result = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return result;
}

/*
 * A name quoted for a statement sent to another server, always: whether a
 * bare name is read as a keyword there depends on that server's version
 * (system_user is one from PostgreSQL 16), not this one's.
 */
char *
sbx_remote_quote_ident(const char *name)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '"');
	for (const char *p = name; *p; p++)
	{
		if (*p == '"')
			appendStringInfoChar(&buf, '"');
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '"');
	return buf.data;
}

/* schema.name, each quoted as sbx_remote_quote_ident quotes it */
char *
sbx_remote_quote_qualified(const char *schema, const char *name)
{
	return psprintf("%s.%s", sbx_remote_quote_ident(schema), sbx_remote_quote_ident(name));
}

/*
 * Prepare a session on a source before pgsandbox reads from it: the
 * system's operators and functions come first, string literals are read
 * as the standard says, and no row-level security policy runs (a policy's
 * expression is its author's code; a table one would filter fails the
 * read instead), and the planner folds no table's CHECK constraint
 * (constraint_exclusion off; source_trust.c checks them as well), whatever
 * the source's settings.  A session that
 * copies rows ('copies_rows') also waits as long as the clone takes,
 * whatever timeouts the source's role has; writes values in forms any
 * server reads back the same (ISO dates, exact floats), in the source's
 * encoding.  'what' prefixes the error.
 */
void
sbx_source_session_setup(PGconn *conn, bool copies_rows, const char *what)
{
	PQclear(sbx_remote_exec(conn,
							copies_rows ?
							"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),"
							" pg_catalog.set_config('standard_conforming_strings', 'on', false),"
							" pg_catalog.set_config('statement_timeout', '0', false),"
							" pg_catalog.set_config('lock_timeout', '0', false),"
							" pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false),"
							" pg_catalog.set_config('datestyle', 'ISO', false),"
							" pg_catalog.set_config('intervalstyle', 'postgres', false),"
							" pg_catalog.set_config('extra_float_digits', '3', false),"
							" pg_catalog.set_config('row_security', 'off', false),"
							" pg_catalog.set_config('constraint_exclusion', 'off', false),"
							" pg_catalog.set_config('client_encoding',"
							"                       pg_catalog.current_setting('server_encoding'), false)" :
							"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),"
							" pg_catalog.set_config('standard_conforming_strings', 'on', false),"
							" pg_catalog.set_config('row_security', 'off', false),"
							" pg_catalog.set_config('constraint_exclusion', 'off', false)",
							0, NULL, PGRES_TUPLES_OK, what));
}

/*
 * Begin reading source conn as it is now: a prepared session (above) in a
 * repeatable-read, read-only transaction.  'what' prefixes the error.
 */
void
sbx_source_read_begin(PGconn *conn, const char *what)
{
	sbx_source_session_setup(conn, false, what);
	PQclear(sbx_remote_exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
							0, NULL, PGRES_COMMAND_OK, what));
}
