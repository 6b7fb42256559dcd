/*-------------------------------------------------------------------------
 *
 * config_data.c
 *	  Copying the rows of extensions' configuration tables, and the values
 *	  of their configuration sequences, from the source into a sandbox, as
 *	  superuser.
 *
 * An extension marks some of its tables as configuration
 * (pg_extension_config_dump): PostGIS's spatial_ref_sys, pg_partman's and
 * orafce's settings tables.  pg_dump writes their rows, filtered by the
 * extension's condition, as data entries of the archive.  The tables
 * belong to the extension, created in the sandbox as superuser, so the
 * sandbox role may not write them: those entries are left out of its
 * restore (restore_list.c) and copied here instead, from the admin side as
 * the extensions themselves are.  The rows come over libpq with COPY TO
 * STDOUT, with the same filter pg_dump uses, and go into the table with an
 * in-process COPY FROM, reading while interrupts are served.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/copy.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "pgstat.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

/* the COPY stream being read, for the data source callback */
static PGconn *sbx_copy_conn = NULL;
static char *sbx_copy_buf = NULL;	/* from PQgetCopyData, not yet used */
static int	sbx_copy_len = 0;
static int	sbx_copy_pos = 0;
static bool sbx_copy_done = false;

/*
 * COPY FROM's data source: hand over what the source sends, waiting for it
 * while serving interrupts.  Returns 0 at the end of the data.
 */
static int
sbx_copy_read(void *outbuf, int minread, int maxread)
{
	int			given = 0;

	while (given < minread && !sbx_copy_done)
	{
		if (sbx_copy_buf != NULL)
		{
			int			n = Min(sbx_copy_len - sbx_copy_pos, maxread - given);

			memcpy((char *) outbuf + given, sbx_copy_buf + sbx_copy_pos, n);
			given += n;
			sbx_copy_pos += n;
			if (sbx_copy_pos == sbx_copy_len)
			{
				PQfreemem(sbx_copy_buf);
				sbx_copy_buf = NULL;
			}
			continue;
		}
		sbx_copy_len = PQgetCopyData(sbx_copy_conn, &sbx_copy_buf, 1);
		sbx_copy_pos = 0;
		if (sbx_copy_len > 0)
			continue;
		sbx_copy_buf = NULL;
		if (sbx_copy_len < 0)
		{
			sbx_copy_done = true;	/* the end, or an error PQgetResult says */
			break;
		}
		/* nothing yet: wait for the socket */
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE | WL_EXIT_ON_PM_DEATH,
								 PQsocket(sbx_copy_conn), -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (PQconsumeInput(sbx_copy_conn) == 0)
			sbx_copy_done = true;
	}
	return given;
}

static void
sbx_copy_reset(void)
{
	if (sbx_copy_buf)
		PQfreemem(sbx_copy_buf);
	sbx_copy_buf = NULL;
	sbx_copy_len = sbx_copy_pos = 0;
	sbx_copy_done = false;
	sbx_copy_conn = NULL;
}

/* Raise the error of the last result on the source connection, if any. */
static void
sbx_check_source_result(PGconn *conn, PGresult *res, ExecStatusType expect,
						const char *source, const SbxConfigRel *rel)
{
	if (PQresultStatus(res) != expect)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read configuration table \"%s.%s\" of source \"%s\"",
						rel->schema, rel->name, source),
				 errdetail_internal("%s", msg)));
	}
}

/* Copy the filtered rows of one configuration table. */
static void
sbx_copy_config_table(PGconn *conn, const char *source, const SbxConfigRel *rel)
{
	char	   *qualified = quote_qualified_identifier(rel->schema, rel->name);
	PGresult   *res;
	Relation	target;
	ParseState *pstate;
	CopyFromState cstate;
	List	   *attnames = NIL;
	List	   *columns;
	ListCell   *lc;
	uint64		rows;

	if (rel->columns[0] == '\0')
		return;
	res = libpqsrv_exec(conn,
						psprintf("COPY (SELECT %s FROM ONLY %s %s) TO STDOUT",
								 rel->columns,
								 sbx_remote_quote_qualified(rel->schema, rel->name),
								 rel->condition),
						PG_WAIT_EXTENSION);
	sbx_check_source_result(conn, res, PGRES_COPY_OUT, source, rel);
	PQclear(res);

	if (!SplitIdentifierString(pstrdup(rel->columns), ',', &columns))
		elog(ERROR, "could not read the column list of \"%s\"", qualified);
	foreach(lc, columns)
		attnames = lappend(attnames, makeString(pstrdup(lfirst(lc))));

	target = table_openrv(makeRangeVar(rel->schema, rel->name, -1), RowExclusiveLock);
	/* COPY FROM finds its target in the range table */
	pstate = make_parsestate(NULL);
	(void) addRangeTableEntryForRelation(pstate, target, RowExclusiveLock,
										 NULL, false, false);
	sbx_copy_reset();
	sbx_copy_conn = conn;
	PG_TRY();
	{
		cstate = BeginCopyFrom(pstate, target, NULL, NULL, false, sbx_copy_read,
							   attnames, NIL);
		rows = CopyFrom(cstate);
		EndCopyFrom(cstate);
	}
	PG_FINALLY();
	{
		sbx_copy_reset();
	}
	PG_END_TRY();
	free_parsestate(pstate);
	table_close(target, NoLock);

	/* how the COPY ended on the source's side */
	res = PQgetResult(conn);
	sbx_check_source_result(conn, res, PGRES_COMMAND_OK, source, rel);
	PQclear(res);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
	if (rows > 0)
		ereport(DEBUG1,
				(errmsg_internal("copied " UINT64_FORMAT " rows into configuration table %s",
								 rows, qualified)));
}

/* Set a configuration sequence to the source's value. */
static void
sbx_copy_config_sequence(PGconn *conn, const char *source, const SbxConfigRel *rel)
{
	char	   *qualified = quote_qualified_identifier(rel->schema, rel->name);
	PGresult   *res;
	char	   *sql;

	res = libpqsrv_exec(conn,
						psprintf("SELECT last_value, is_called FROM %s",
								 sbx_remote_quote_qualified(rel->schema, rel->name)),
						PG_WAIT_EXTENSION);
	sbx_check_source_result(conn, res, PGRES_TUPLES_OK, source, rel);
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		return;
	}
	sql = psprintf("SELECT pg_catalog.setval(%s, %s, %s)",
				   quote_literal_cstr(qualified),
				   quote_literal_cstr(PQgetvalue(res, 0, 0)),
				   strcmp(PQgetvalue(res, 0, 1), "t") == 0 ? "true" : "false");
	PQclear(res);
	if (SPI_execute(sql, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not set configuration sequence %s", qualified);
}

/*
 * Copy what the source holds in its extensions' configuration tables and
 * sequences into the sandbox this process is connected to, in one
 * transaction, trusting the owners the source names ('trusted_owners').
 */
void
sbx_copy_config_data(PGconn *conn, const char *source, const char *trusted_owners,
					 List *config_rels)
{
	List	   *tables = NIL;
	ListCell   *lc;

	if (config_rels == NIL)
		return;

	/*
	 * The rows are read by a query, which the source plans: its tables and
	 * their owners' code must be trusted, as for any table pgsandbox reads
	 * with a query (source_trust.c).
	 */
	sbx_source_session_setup(conn, false,
							 psprintf("could not read the configuration tables of source \"%s\"",
									  source));
	foreach(lc, config_rels)
	{
		SbxConfigRel *rel = lfirst(lc);

		if (rel->relkind != RELKIND_SEQUENCE)
			tables = lappend_oid(tables, rel->oid);
	}
	sbx_check_tables_trusted(conn, source, trusted_owners, tables,
							 "to copy an extension's configuration rows");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying extension configuration");
	foreach(lc, config_rels)
	{
		SbxConfigRel *rel = lfirst(lc);

		if (rel->relkind == RELKIND_SEQUENCE)
			sbx_copy_config_sequence(conn, source, rel);
		else if (rel->relkind == RELKIND_RELATION ||
				 rel->relkind == RELKIND_PARTITIONED_TABLE)
			sbx_copy_config_table(conn, source, rel);
		CommandCounterIncrement();
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}
