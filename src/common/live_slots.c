/*-------------------------------------------------------------------------
 *
 * live_slots.c
 *	  What a live snapshot needs of its source: the logical replication
 *	  slot pgsandbox makes there, with the snapshot its first contents are
 *	  dumped in; dropping that slot; and how far the source is now, to
 *	  tell how far behind the live snapshot is.
 *
 * A slot is made by a replication connection that exports the snapshot of
 * the slot's consistent point: every change after it comes through the
 * slot, and the dump of the snapshot holds every change before it, so
 * the live snapshot misses none and applies none twice.  The exported
 * snapshot lives only while that connection stays open and idle: the
 * clone worker keeps it until the dump is done.  Nothing else on the
 * source is made or changed: the publication is the admin's.
 *
 * The slot's name is pgsandbox's, recorded in the snapshot's catalog row
 * before it is made, so that a build that fails or is killed leaves no slot
 * behind unseen (sbx_live_slot_drop).
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

/*
 * Make logical slot 'slot' on source 'name' (pgoutput), and return the
 * replication connection that made it, which holds the exported snapshot
 * *snapshot until it is closed or used again.
 */
PGconn *
sbx_live_slot_create(const char *name, const char *conninfo, bool require_password,
					 const char *slot, char **snapshot)
{
	int			code;
	char	   *message;
	char	   *detail;
	PGconn	   *conn = sbx_source_try_connect_as(name, conninfo, require_password, 0, true,
												 &code, &message, &detail);
	PGresult   *res;

	if (conn == NULL)
		ereport(ERROR,
				(errcode(code),
				 errmsg_internal("%s", message),
				 errdetail_internal("%s", detail)));
	/* the form every major since 10 takes */
	res = libpqsrv_exec(conn,
						psprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput EXPORT_SNAPSHOT",
								 quote_identifier(slot)),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		PQgetisnull(res, 0, 2))
	{
		char	   *msg = pstrdup(PQerrorMessage(conn));

		PQclear(res);
		libpqsrv_disconnect(conn);
		msg[strcspn(msg, "\n")] = '\0';
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not make the replication slot \"%s\" on source \"%s\"", slot, name),
				 errdetail_internal("%s", msg)));
	}
	*snapshot = pstrdup(PQgetvalue(res, 0, 2));
	PQclear(res);
	return conn;
}

/*
 * Drop slot 'slot' of source 'name' if it is there, over a connection of
 * at most 'timeout' seconds to make.  Returns true if it is gone; false,
 * with *why set, if the source could not be reached or the slot is in use
 * (its subscription's apply still reads it), to be tried again later.
 */
bool
sbx_live_slot_drop(const char *name, const char *conninfo, bool require_password,
				   const char *slot, int timeout, char **why)
{
	int			code;
	char	   *message;
	char	   *detail;
	PGconn	   *conn = sbx_source_try_connect_as(name, conninfo, require_password, timeout,
												 false, &code, &message, &detail);
	const char *params[1] = {slot};
	PGresult   *res;
	bool		ok;

	if (conn == NULL)
	{
		*why = psprintf("%s: %s", message, detail);
		return false;
	}
	if (!sbx_source_look_begin(conn, timeout, why))
	{
		libpqsrv_disconnect(conn);
		return false;
	}
	res = libpqsrv_exec_params(conn,
							   "SELECT pg_catalog.pg_drop_replication_slot(slot_name)"
							   "  FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
							   1, NULL, params, NULL, NULL, 0, PG_WAIT_EXTENSION);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
	{
		*why = pstrdup(PQerrorMessage(conn));
		(*why)[strcspn(*why, "\n")] = '\0';
	}
	PQclear(res);
	libpqsrv_disconnect(conn);
	return ok;
}

/*
 * How far source 'name' is now, over a connection of at most 'timeout'
 * seconds to make: its WAL position (where it inserts: a commit is visible
 * only once its record is in, and may be before it is written) and time
 * (in ISO form, whatever the source's DateStyle), how many bytes of WAL slot
 * 'slot' keeps for its subscription (-1 if the slot is gone), the position
 * up to which its subscriber has confirmed applying (NULL if not known), and the
 * tables 'publication' publishes, counted and hashed by name as
 * sbx_live_subscribe hashes those it subscribed (NULL if it is gone, or
 * not asked for: "").  False, with
 * probe->why set, if it cannot be reached.
 */
bool
sbx_live_probe(const char *name, const char *conninfo, bool require_password,
			   const char *slot, const char *publication, int timeout,
			   SbxLiveProbe *probe)
{
	int			code;
	char	   *message;
	char	   *detail;
	PGconn	   *conn = sbx_source_try_connect_as(name, conninfo, require_password, timeout,
												 false, &code, &message, &detail);
	const char *params[2] = {slot, publication};
	PGresult   *res;
	bool		ok;

	memset(probe, 0, sizeof(*probe));
	if (conn == NULL)
	{
		probe->why = psprintf("%s: %s", message, detail);
		return false;
	}
	if (!sbx_source_look_begin(conn, timeout, &probe->why))
	{
		libpqsrv_disconnect(conn);
		return false;
	}
	res = libpqsrv_exec_params(conn,
							   "SELECT pg_catalog.pg_current_wal_insert_lsn()::text,"
							   "       pg_catalog.to_char(pg_catalog.now() AT TIME ZONE 'UTC',"
							   "                          'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00\"'),"
							   "       (SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(),"
							   "                                          s.restart_lsn)::int8"
							   "          FROM pg_catalog.pg_replication_slots s"
							   "         WHERE s.slot_name = $1),"
							   "       (SELECT s.confirmed_flush_lsn::text"
							   "          FROM pg_catalog.pg_replication_slots s"
							   "         WHERE s.slot_name = $1),"
							   "       CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_publication"
							   "                          WHERE pubname = $2)"
							   "            THEN (SELECT pg_catalog.count(*) || ':' || pg_catalog.md5(COALESCE("
							   "                         pg_catalog.string_agg(pg_catalog.format('%I.%I', schemaname, tablename),"
							   "                                               ',' ORDER BY schemaname, tablename), ''))"
							   "                    FROM pg_catalog.pg_publication_tables WHERE pubname = $2) END",
							   2, NULL, params, NULL, NULL, 0, PG_WAIT_EXTENSION);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
	if (ok)
	{
		probe->lsn = pstrdup(PQgetvalue(res, 0, 0));
		probe->now = pstrdup(PQgetvalue(res, 0, 1));
		probe->retained = PQgetisnull(res, 0, 2) ? -1 : strtoi64(PQgetvalue(res, 0, 2), NULL, 10);
		probe->confirmed = PQgetisnull(res, 0, 3) ? NULL : pstrdup(PQgetvalue(res, 0, 3));
		probe->tables = PQgetisnull(res, 0, 4) ? NULL : pstrdup(PQgetvalue(res, 0, 4));
	}
	else
	{
		probe->why = pstrdup(PQerrorMessage(conn));
		probe->why[strcspn(probe->why, "\n")] = '\0';
	}
	PQclear(res);
	libpqsrv_disconnect(conn);
	return ok;
}
