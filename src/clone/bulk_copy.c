/*-------------------------------------------------------------------------
 *
 * bulk_copy.c
 *	  The one large table of a source, copied by the clone worker itself,
 *	  in PostgreSQL's binary COPY format where that is safe, rather than
 *	  through pg_dump's archive.
 *
 * Where one plain table holds most of a source (pgbench_accounts, an
 * events table), its rows are the clone's time, and what the clone waits
 * for is the sandbox's one backend taking them in: as text, each row is
 * scanned character by character, split and converted column by column,
 * and pg_restore sends an uncompressed archive one row per message.  In
 * binary, each value arrives in its internal shape, and the worker sends
 * 64 kB messages (copy_relay.c; bench/cold_path.sh, bench/README.md).
 *
 * When (sbx_bulk_find): a data clone that streams (no mask, no reduced
 * table, no extension, no event trigger, one job), whose source's largest
 * table holds at least half of its tables' pages and at least
 * pgsandbox.bulk_copy_min_size, and is a plain table of its own: not a
 * partition, no inheritance parent or child, not an extension's, not
 * temporary.  The rows go in binary when the source runs this server's
 * major version, every column is of a built-in type (the binary form of
 * those is this server's own) and the source's encoding is the sandbox's;
 * otherwise as text, still in large messages.
 *
 * How: the reader (clone_worker.c), in the snapshot pg_dump dumps, locks
 * the table in ACCESS SHARE mode before pg_dump starts, as pg_dump locks
 * every table it dumps, so that no TRUNCATE or rewrite can empty it under
 * the snapshot; pg_dump then runs with a lock wait timeout (a statement
 * queued for a stronger lock between the two would otherwise deadlock
 * them unseen).  The restore runs as three steps: pg_dump's pre-data
 * section; this table's rows, by COPY ... TO STDOUT on the reader into
 * COPY ... FROM STDIN over a login as the sandbox's own role; then the
 * other tables' data and the post-data section, pg_dump told to leave this
 * table's rows out.  The COPY of a relation plans no query on the source
 * (row_security is off on the reader: a policy fails the clone rather than
 * running), and the sandbox must take as many rows as the source says it
 * sent.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

/*
 * The largest table of the source, if it may be copied whole by the
 * worker: its oid, schema, name, columns (quoted, in order, the generated
 * ones left out) and whether each column's type is built in.  Only
 * catalogs are read.
 */
#define SBX_BULK_FIND_SQL \
	"WITH sizes AS (" \
	" SELECT c.oid, c.relpages::pg_catalog.int8 OPERATOR(pg_catalog.+)" \
	"        COALESCE(t.relpages, 0) AS pages" \
	"   FROM pg_catalog.pg_class c" \
	"   LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) c.reltoastrelid" \
	"  WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,m}')" \
	"    AND c.oid OPERATOR(pg_catalog.>=) 16384)," \
	" largest AS (" \
	" SELECT s.oid, s.pages FROM sizes s" \
	"  WHERE s.pages OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.>=) (SELECT pg_catalog.sum(pages) FROM sizes)" \
	"    AND s.pages OPERATOR(pg_catalog.>) 0" \
	"    AND s.pages OPERATOR(pg_catalog.*) pg_catalog.current_setting('block_size')::pg_catalog.int8" \
	"        OPERATOR(pg_catalog.>=) $1::pg_catalog.int8" \
	"  ORDER BY s.pages DESC, s.oid LIMIT 1)" \
	"SELECT c.oid, n.nspname, c.relname," \
	"       pg_catalog.bool_and(a.atttypid OPERATOR(pg_catalog.<) 16384)" \
	"  FROM largest l" \
	"  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) l.oid" \
	"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace" \
	"  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid" \
	"   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"   AND a.attgenerated OPERATOR(pg_catalog.=) ''" \
	" WHERE c.relkind OPERATOR(pg_catalog.=) 'r' AND NOT c.relispartition" \
	"   AND c.relpersistence OPERATOR(pg_catalog.<>) 't'" \
	"   AND n.nspname OPERATOR(pg_catalog.<>) ALL ('{pg_catalog,information_schema}')" \
	"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_inherits i" \
	"                    WHERE i.inhrelid OPERATOR(pg_catalog.=) c.oid" \
	"                       OR i.inhparent OPERATOR(pg_catalog.=) c.oid)" \
	"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d" \
	"                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass" \
	"                      AND d.objid OPERATOR(pg_catalog.=) c.oid" \
	"                      AND d.deptype OPERATOR(pg_catalog.=) 'e')" \
	" GROUP BY c.oid, n.nspname, c.relname"

/* its columns' names, in order, but the generated ones */
#define SBX_BULK_COLUMNS_SQL \
	"SELECT a.attname FROM pg_catalog.pg_attribute a" \
	" WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"   AND a.attgenerated OPERATOR(pg_catalog.=) ''" \
	" ORDER BY a.attnum"

/*
 * Set the client encoding of source connection 'conn' to 'encoding'; the
 * one it had is returned.
 */
static char *
sbx_bulk_set_encoding(PGconn *conn, const char *encoding, const char *source)
{
	const char *params[1] = {encoding};
	PGresult   *res;
	char	   *was;

	res = sbx_remote_exec(conn,
						  "SELECT pg_catalog.current_setting('client_encoding'),"
						  " pg_catalog.set_config('client_encoding', $1, false)",
						  1, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	was = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return was;
}

/*
 * The table the worker copies itself, if the source has one (above), locked
 * by 'reader' in ACCESS SHARE mode; NULL if not, if the setting is -1, or
 * if the clone is of the schema only.
 * 'reader' is in the transaction whose snapshot pg_dump dumps.
 */
SbxBulkTable *
sbx_bulk_find(PGconn *reader, const char *source, bool schema_only)
{
	const char *what = psprintf("could not read source \"%s\"", source);
	char		min_size[32];
	const char *params[2];
	PGresult   *res;
	SbxBulkTable *bulk;
	Oid			locked;

	const char *encoding = PQparameterStatus(reader, "server_encoding");
	char	   *was;
	StringInfoData columns;

	/* a rows-only clone, or a source before generated columns: pg_dump */
	if (sbx_bulk_copy_min_size < 0 || schema_only || encoding == NULL ||
		PQserverVersion(reader) < 120000)
		return NULL;
	snprintf(min_size, sizeof(min_size), INT64_FORMAT,
			 (int64) sbx_bulk_copy_min_size * 1024 * 1024);
	params[0] = min_size;
	res = sbx_remote_exec(reader, SBX_BULK_FIND_SQL, 1, params, PGRES_TUPLES_OK, what);
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		return NULL;
	}
	bulk = palloc0(sizeof(SbxBulkTable));
	bulk->relid = atooid(PQgetvalue(res, 0, 0));
	bulk->builtin_types = strcmp(PQgetvalue(res, 0, 3), "t") == 0;
	bulk->encoding = pstrdup(encoding);
	bulk->same_major = PQserverVersion(reader) / 10000 == PG_VERSION_NUM / 10000;
	PQclear(res);

	/*
	 * Names in the source's own encoding, as pg_dump is told (--encoding)
	 * and the sandbox's COPY reads them; each quoted here, as a keyword of
	 * this server may be none of the source's.
	 */
	was = sbx_bulk_set_encoding(reader, bulk->encoding, source);
	params[0] = psprintf("%u", bulk->relid);
	res = sbx_remote_exec(reader,
						  "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
						  " WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
						  1, params, PGRES_TUPLES_OK, what);
	if (PQntuples(res) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a table of source \"%s\" was dropped during the clone", source),
				 errhint("Clone it again.")));
	bulk->schema = pstrdup(PQgetvalue(res, 0, 0));
	bulk->name = pstrdup(PQgetvalue(res, 0, 1));
	bulk->sql_name = sbx_remote_quote_qualified(bulk->schema, bulk->name);
	PQclear(res);
	res = sbx_remote_exec(reader, SBX_BULK_COLUMNS_SQL, 1, params, PGRES_TUPLES_OK, what);
	initStringInfo(&columns);
	for (int i = 0; i < PQntuples(res); i++)
		appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "",
						 sbx_remote_quote_ident(PQgetvalue(res, i, 0)));
	bulk->columns = columns.data;
	PQclear(res);

	/*
	 * Locked as pg_dump locks what it dumps; then its name must still be
	 * the table found, which no one can rename from here on.
	 */
	PQclear(sbx_remote_exec(reader,
							psprintf("LOCK TABLE ONLY %s IN ACCESS SHARE MODE", bulk->sql_name),
							0, NULL, PGRES_COMMAND_OK, what));
	params[0] = bulk->sql_name;
	res = sbx_remote_exec(reader, "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
						  1, params, PGRES_TUPLES_OK, what);
	locked = PQgetisnull(res, 0, 0) ? InvalidOid : atooid(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (locked != bulk->relid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of source \"%s\" was replaced during the clone",
						bulk->sql_name, source),
				 errhint("Clone it again.")));
	(void) sbx_bulk_set_encoding(reader, was, source);
	return bulk;
}

/* pg_dump's options for one of the two dumps around the table's rows */
List *
sbx_bulk_dump_options(const SbxBulkTable *bulk, bool before)
{
	List	   *options = NIL;

	options = lappend(options, psprintf("--lock-wait-timeout=%d", sbx_lock_timeout));
	/* the names are the reader's, in the source's encoding */
	if (bulk->encoding[0] != '\0')
		options = lappend(options, psprintf("--encoding=%s", bulk->encoding));
	if (before)
		options = lappend(options, "--section=pre-data");
	else
	{
		options = lappend(options, "--section=data");
		options = lappend(options, "--section=post-data");
		options = lappend(options, psprintf("--exclude-table-data=%s",
											sbx_exact_pattern(bulk->schema, bulk->name)));
	}
	return options;
}

/* The COPY failed on the source or in the sandbox: say which, and why. */
static void
sbx_bulk_failed(PGconn *conn, PGresult *res, const SbxBulkTable *bulk, const char *source,
				bool reading)
{
	char	   *why = sbx_remote_error(conn, res);

	if (res)
		PQclear(res);
	ereport(ERROR,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 reading ? errmsg("could not read the rows of table %s of source \"%s\"",
							  bulk->sql_name, source)
			 : errmsg("could not write the rows of table %s into the sandbox",
					  bulk->sql_name),
			 errdetail_internal("%s", why)));
}

/*
 * Copy the table's rows from 'reader' into the sandbox, over 'sandbox', a
 * login as its role; the pre-data section is restored, nothing else.
 * Returns the rows copied, which the sandbox took as many as the source
 * sent, or the clone fails.
 */
int64
sbx_bulk_copy(PGconn *reader, PGconn *sandbox, SbxBulkTable *bulk, const char *source)
{
	const char *format;
	const char *params[1];
	char	   *reader_encoding;
	PGresult   *res;
	int64		sent;
	int64		rows;

	/* the same encoding on both ends: nothing converts it on the way */
	res = sbx_remote_exec(sandbox, "SELECT pg_catalog.current_setting('server_encoding')",
						  0, NULL, PGRES_TUPLES_OK,
						  "could not prepare the sandbox for the rows of its largest table");
	bulk->binary = bulk->same_major && bulk->builtin_types &&
		strcmp(PQgetvalue(res, 0, 0), bulk->encoding) == 0;
	format = bulk->binary ? "binary" : "text";
	PQclear(res);
	params[0] = bulk->encoding;
	PQclear(sbx_remote_exec(sandbox,
							"SELECT pg_catalog.set_config('client_encoding', $1, false),"
							" pg_catalog.set_config('datestyle', 'ISO', false)",
							1, params, PGRES_TUPLES_OK,
							"could not prepare the sandbox for the rows of its largest table"));
	/* the reader's own encoding comes back once the rows are read */
	reader_encoding = sbx_bulk_set_encoding(reader, bulk->encoding, source);
	PQclear(sbx_remote_exec(reader,
							"SELECT pg_catalog.set_config('datestyle', 'ISO', false),"
							" pg_catalog.set_config('intervalstyle', 'postgres', false),"
							" pg_catalog.set_config('extra_float_digits', '3', false)",
							0, NULL, PGRES_TUPLES_OK,
							psprintf("could not read source \"%s\"", source)));

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying the largest table's rows");
	res = libpqsrv_exec(reader, psprintf("COPY %s (%s) TO STDOUT (FORMAT %s)",
										 bulk->sql_name, bulk->columns, format),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		sbx_bulk_failed(reader, res, bulk, source, true);
	PQclear(res);
	res = libpqsrv_exec(sandbox, psprintf("COPY %s (%s) FROM STDIN (FORMAT %s)",
										  bulk->sql_name, bulk->columns, format),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_IN)
		sbx_bulk_failed(sandbox, res, bulk, source, false);
	PQclear(res);

	/* rows come one to a message: they leave in messages of 64 kB */
	if (!sbx_copy_relay(reader, sandbox))
		sbx_bulk_failed(sandbox, NULL, bulk, source, false);
	res = libpqsrv_get_result_last(reader, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		(void) PQputCopyEnd(sandbox, "the source failed");
		sbx_bulk_failed(reader, res, bulk, source, true);
	}
	sent = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	(void) sbx_bulk_set_encoding(reader, reader_encoding, source);

	if (PQputCopyEnd(sandbox, NULL) != 1)
		sbx_bulk_failed(sandbox, NULL, bulk, source, false);
	res = libpqsrv_get_result_last(sandbox, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sbx_bulk_failed(sandbox, res, bulk, source, false);
	rows = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	if (rows != sent)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("table %s of source \"%s\" sent " INT64_FORMAT " rows, and the sandbox took " INT64_FORMAT,
						bulk->sql_name, source, sent, rows)));
	pgstat_report_activity(STATE_IDLE, NULL);
	return rows;
}
