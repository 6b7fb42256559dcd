/*-------------------------------------------------------------------------
 *
 * source_conn.c
 *	  Connecting to a source database: the one way pgsandbox does it, for
 *	  a clone, for reading a source's schema and for doctor().
 *
 * A source added by a superuser is trusted: its connection string may use
 * what the server itself holds (a password file, a client certificate,
 * GSS).  One added by a non-superuser admin is not: none of the server's
 * identity is offered (sbx_conninfo_to_params), and the connection must
 * really have used the password the source gave, or it is refused.  The
 * source's password never appears in a message.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/string.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

/*
 * Connect to source 'name' with its connection string.  require_password
 * is the source's flag of that name (added by a non-superuser).  If
 * connect_timeout is above zero it is the timeout unless the connection
 * string sets one.  Returns the connection; on failure returns NULL and
 * sets *sqlerrcode, *message and *detail (one line, the password taken
 * out).
 */
PGconn *
sbx_source_try_connect(const char *name, const char *conninfo,
					   bool require_password, int connect_timeout,
					   int *sqlerrcode, char **message, char **detail)
{
	return sbx_source_try_connect_as(name, conninfo, require_password, connect_timeout,
									 false, sqlerrcode, message, detail);
}

/*
 * The same, and with 'replication' a connection of the replication
 * protocol to the source's database (replication=database), which makes
 * and drops logical slots (live_slots.c).
 */
PGconn *
sbx_source_try_connect_as(const char *name, const char *conninfo,
						  bool require_password, int connect_timeout, bool replication,
						  int *sqlerrcode, char **message, char **detail)
{
	const char **keywords;
	const char **values;
	const char **kw;
	const char **vals;
	const char *secrets[2];
	int			n = 0;
	PGconn	   *conn;
	char		password[SBX_PASSWORD_LEN + 1];

	/*
	 * A source of an administrator who is not a superuser, added before such
	 * a source had to name its user, is read as no identity of this server.
	 */
	if (require_password && !sbx_conninfo_names_user(conninfo))
	{
		*sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		*message = psprintf("the connection string of source \"%s\", added by a non-superuser, names no user",
							name);
		*detail = pstrdup("It is not read as any of the server's own identities: add the source again with a user and password of a role that may read it.");
		return NULL;
	}

	/* a source of this cluster waits for its reader's password */
	if (sbx_conninfo_local_default(conninfo, require_password) &&
		sbx_reader_login(password) == SBX_READER_WAITING)
	{
		sbx_reader_waiting_error(name, sqlerrcode, message, detail);
		return NULL;
	}
	explicit_bzero(password, sizeof(password));
	sbx_conninfo_to_params(conninfo, require_password, &keywords, &values);
	while (keywords[n] != NULL)
		n++;
	kw = palloc0(sizeof(char *) * (n + 6));
	vals = palloc0(sizeof(char *) * (n + 6));
	memcpy(kw, keywords, sizeof(char *) * n);
	memcpy(vals, values, sizeof(char *) * n);

	/*
	 * After the source's own, so that its connection string cannot take
	 * them back: a caller's bound (a short look, in the worker's loop or in
	 * doctor()), with keepalives that give up on a source gone silent
	 * mid-query; and the replication protocol.
	 */
	if (connect_timeout > 0)
	{
		kw[n] = "connect_timeout";
		vals[n++] = psprintf("%d", connect_timeout);
		kw[n] = "keepalives_idle";
		vals[n++] = psprintf("%d", connect_timeout);
		kw[n] = "keepalives_interval";
		vals[n++] = psprintf("%d", connect_timeout);
		kw[n] = "keepalives_count";
		vals[n++] = "3";
	}
	if (replication)
	{
		kw[n] = "replication";
		vals[n++] = "database";
	}

	secrets[0] = sbx_conninfo_password(conninfo);
	secrets[1] = NULL;
	if (secrets[0] == NULL)
		secrets[0] = "";

	conn = libpqsrv_connect_params(kw, vals, false, PG_WAIT_EXTENSION);
	for (int i = 0; keywords[i] != NULL; i++)
	{
		if (strcmp(keywords[i], "password") == 0)
			explicit_bzero((char *) values[i], strlen(values[i]));
	}

	if (PQstatus(conn) != CONNECTION_OK)
	{
		char	   *msg = sbx_redact(PQerrorMessage(conn), secrets);

		(void) pg_strip_crlf(msg);
		msg[strcspn(msg, "\n")] = '\0';
		libpqsrv_disconnect(conn);
		*sqlerrcode = ERRCODE_CONNECTION_FAILURE;
		*message = psprintf("could not connect to source \"%s\"", name);
		*detail = msg;

		/*
		 * The reader's login refused: most often a pg_hba.conf made before
		 * 0.12, whose lines let local roles in by peer only.  The server's
		 * refusals name the user, whatever language and quotes it uses; the
		 * advice says when it applies, since other refusals name it too.
		 */
		if (sbx_conninfo_local_default(conninfo, require_password) &&
			strstr(msg, SBX_READER_ROLE) != NULL)
			*detail = psprintf("%s. %s", msg, sbx_reader_hba_advice());
		return NULL;
	}
	if (require_password && !PQconnectionUsedPassword(conn))
	{
		libpqsrv_disconnect(conn);
		*sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		*message = psprintf("the connection to source \"%s\" did not use its password", name);
		*detail = pstrdup("The source was added by a non-superuser, so it must authenticate by password, not by the server's identity.");
		return NULL;
	}
	return conn;
}

/*
 * What pg_hba.conf must say for pgsandbox_reader to log in: the words an
 * administrator reads when it does not.
 */
const char *
sbx_reader_hba_advice(void)
{
	return "If pg_hba.conf refused it: pgsandbox_reader logs in with a password over this server's "
		"socket, so pg_hba.conf needs a line \"local all pgsandbox_reader scram-sha-256\" above any "
		"line that matches every role (\"local all all peer\" on Debian), then a reload";
}

/*
 * Connect to source 'name', as sbx_source_try_connect does, or raise the
 * error.
 */
PGconn *
sbx_source_open(const char *name, const char *conninfo, bool require_password)
{
	int			code;
	char	   *message;
	char	   *detail;
	PGconn	   *conn = sbx_source_try_connect(name, conninfo, require_password, 0,
											  &code, &message, &detail);

	if (conn == NULL)
		ereport(ERROR,
				(errcode(code),
				 errmsg_internal("%s", message),
				 errdetail_internal("%s", detail)));
	return conn;
}

/*
 * Connect to a source, as the clone worker does, for reading its schema.
 */
PGconn *
sbx_source_connect(const char *source)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	char	   *conninfo;
	bool		require_password;
	PGconn	   *conn;
	MemoryContext outer = CurrentMemoryContext;

	values[0] = CStringGetTextDatum(source);
	SPI_connect();
	/* reading a source is for those who may clone it now */
	if (!sbx_may_clone(sbx_caller(), sbx_is_admin(sbx_caller()), source))
		sbx_report_source_denied(source, sbx_is_admin(sbx_caller()));
	if (SPI_execute_with_args("SELECT conninfo, require_password FROM pgsandbox.source"
							  " WHERE name = $1", 1, argtypes, values, NULL,
							  true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source \"%s\"", source);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" of the sandbox no longer exists", source)));
	conninfo = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1));
	require_password = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();

	conn = sbx_source_open(source, conninfo, require_password);
	explicit_bzero(conninfo, strlen(conninfo));
	return conn;
}

/*
 * Prepare source connection 'conn' for a short look by pgsandbox (the
 * worker's at a live source, doctor()'s): a search_path of pg_catalog
 * alone, so that no operator or function a source's role made in another
 * schema stands in for a built-in one; no row-level security policy and
 * no constraint exclusion, which would fold a table's CHECKs; at
 * most 'timeout' seconds a statement, and at most a second a lock, since a
 * table's owner can hold the lock that pg_publication_tables takes on each
 * published table.  False, with *why set, if the source refused them.
 */
bool
sbx_source_look_begin(PGconn *conn, int timeout, char **why)
{
	char		ms[16];
	const char *params[1] = {ms};
	PGresult   *res;
	bool		ok;

	snprintf(ms, sizeof(ms), "%d", Max(timeout, 1) * 1000);
	res = libpqsrv_exec_params(conn,
							   "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),"
							   "       pg_catalog.set_config('row_security', 'off', false),"
							   "       pg_catalog.set_config('constraint_exclusion', 'off', false),"
							   "       pg_catalog.set_config('statement_timeout', $1, false),"
							   "       pg_catalog.set_config('lock_timeout', '1000', false)",
							   1, NULL, params, NULL, NULL, 0, PG_WAIT_EXTENSION);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
	{
		*why = pstrdup(PQerrorMessage(conn));
		(*why)[strcspn(*why, "\n")] = '\0';
	}
	PQclear(res);
	return ok;
}
