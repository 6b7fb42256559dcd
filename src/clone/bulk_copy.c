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
 * When: a data clone that streams (no mask, no reduced table, no
 * extension, no event trigger, one job, not a live snapshot's build),
 * whose source's largest table holds at least half of its tables' pages
 * and at least pgsandbox.bulk_copy_min_size, and is a plain, permanent
 * table of its own: not a partition, no inheritance parent or child, not
 * an extension's.  The rows go in binary when the source runs this
 * server's major version, every column's type is built in, has a binary
 * form and is no reg* type (whose binary form is an oid, which names
 * another object in the sandbox), and the source's encoding is the
 * sandbox's; otherwise as text, still in large messages.
 *
 * How (clone_worker.c's reader): the table is found on the source's
 * catalog before the reader's transaction begins, and locked in ACCESS
 * SHARE mode as that transaction's first statement, before its snapshot is
 * taken (a LOCK takes none): no TRUNCATE, rewrite or change of its
 * columns can come between what the snapshot sees and what the COPY
 * reads.  In the snapshot, its name must still lead to it and it must
 * still qualify.  Every pg_dump then runs with a lock wait timeout: a
 * statement queued for a stronger lock on the table would otherwise make
 * pg_dump wait on it while it waits on the reader, which waits on pg_dump.
 * The restore runs as three steps: pg_dump's pre-data section; this
 * table's rows, by COPY ... TO STDOUT on the reader into COPY ... FROM
 * STDIN over a login as the sandbox's own role, in the transaction that
 * truncates the table (so that under wal_level = minimal its rows skip the
 * WAL, as in one pg_restore --single-transaction); then the other tables'
 * data and the post-data section, pg_dump told to leave this table's rows
 * out.  Just before and after the COPY, the name must still lead to the
 * table (a schema can be renamed under a lock on its table).  The COPY of
 * a relation plans no query on the source (row_security is off on the
 * reader: a policy fails the clone rather than running), and the sandbox
 * must take as many rows as the source says it sent.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

/*
 * The source's largest table or materialized view, if it is a table (LOCK
 * TABLE refuses a materialized view), holds half the pages and at least $1
 * bytes: its oid, schema and name.  Only catalogs are read.
 */
#define SBX_BULK_LARGEST_SQL \
	"WITH sizes AS (" \
	" SELECT c.oid, c.relpages::pg_catalog.int8 OPERATOR(pg_catalog.+)" \
	"        COALESCE(t.relpages, 0) AS pages" \
	"   FROM pg_catalog.pg_class c" \
	"   LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) c.reltoastrelid" \
	"  WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,m}')" \
	"    AND c.oid OPERATOR(pg_catalog.>=) 16384)" \
	"SELECT c.oid, n.nspname, c.relname FROM sizes s" \
	"  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.oid" \
	"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace" \
	" WHERE c.relkind OPERATOR(pg_catalog.=) 'r'" \
	"   AND s.pages OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.>=) (SELECT pg_catalog.sum(pages) FROM sizes)" \
	"   AND s.pages OPERATOR(pg_catalog.>) 0" \
	"   AND s.pages OPERATOR(pg_catalog.*) pg_catalog.current_setting('block_size')::pg_catalog.int8" \
	"       OPERATOR(pg_catalog.>=) $1::pg_catalog.int8" \
	" ORDER BY s.pages DESC, s.oid LIMIT 1"

/*
 * Table $1 as the snapshot sees it: whether it is one the worker may copy
 * (a plain, permanent table of its own), and whether its columns may go in
 * binary (every type built in, with a binary form, and no reg* type, nor
 * an array of one).
 */
#define SBX_BULK_DESCRIBE_SQL \
	"SELECT c.relkind OPERATOR(pg_catalog.=) 'r' AND NOT c.relispartition" \
	"       AND c.relpersistence OPERATOR(pg_catalog.=) 'p'" \
	"       AND n.nspname OPERATOR(pg_catalog.<>) ALL ('{pg_catalog,information_schema}')" \
	"       AND NOT EXISTS (SELECT FROM pg_catalog.pg_inherits i" \
	"                        WHERE i.inhrelid OPERATOR(pg_catalog.=) c.oid" \
	"                           OR i.inhparent OPERATOR(pg_catalog.=) c.oid)" \
	"       AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d" \
	"                        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass" \
	"                          AND d.objid OPERATOR(pg_catalog.=) c.oid" \
	"                          AND d.deptype OPERATOR(pg_catalog.=) 'e')," \
	"       NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a" \
	"                     JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid" \
	"                    WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid" \
	"                      AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"                      AND a.attgenerated OPERATOR(pg_catalog.=) ''" \
	"                      AND (t.oid OPERATOR(pg_catalog.>=) 16384" \
	"                           OR t.typsend::pg_catalog.oid OPERATOR(pg_catalog.=) 0" \
	"                           OR t.typreceive::pg_catalog.oid OPERATOR(pg_catalog.=) 0" \
	"                           OR (CASE WHEN t.typcategory OPERATOR(pg_catalog.=) 'A' THEN t.typelem ELSE t.oid END)" \
	"                              OPERATOR(pg_catalog.=) ANY ('{24,2202,2203,2204,2205,2206,3734,3769,4089,4096,4191}')))" \
	"  FROM pg_catalog.pg_class c" \
	"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace" \
	" WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid"

/* its columns' names, in order, but the generated ones */
#define SBX_BULK_COLUMNS_SQL \
	"SELECT a.attname FROM pg_catalog.pg_attribute a" \
	" WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"   AND a.attgenerated OPERATOR(pg_catalog.=) ''" \
	" ORDER BY a.attnum"

static char *
sbx_bulk_what(const char *source)
{
	return psprintf("could not read source \"%s\"", source);
}

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
						  1, params, PGRES_TUPLES_OK, sbx_bulk_what(source));
	was = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return was;
}

/*
 * Does table 'bulk' still go by its name on the reader?  Fails the clone
 * if not.
 */
static void
sbx_bulk_check_name(PGconn *reader, const SbxBulkTable *bulk, const char *source)
{
	const char *params[1] = {bulk->sql_name};
	PGresult   *res;
	Oid			found;

	res = sbx_remote_exec(reader, "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid",
						  1, params, PGRES_TUPLES_OK, sbx_bulk_what(source));
	found = PQgetisnull(res, 0, 0) ? InvalidOid : atooid(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (found != bulk->relid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s of source \"%s\" was renamed or replaced during the clone",
						bulk->display, source),
				 errhint("Clone it again.")));
}

/*
 * The table the worker may copy itself, if the source has one, found on
 * the source's catalog by 'reader' outside any transaction, before the
 * reader's transaction takes its snapshot; NULL if none, if the setting is
 * -1, if the clone is of the schema only, or if the source is older than
 * PostgreSQL 12 (no generated columns to leave out).  The reader is made
 * to wait for no timeout of the source's from then on: it holds its
 * transaction open across the whole restore.
 */
SbxBulkTable *
sbx_bulk_candidate(PGconn *reader, const char *source, bool schema_only)
{
	const char *encoding = PQparameterStatus(reader, "server_encoding");
	char		min_size[32];
	const char *params[1] = {min_size};
	PGresult   *res;
	SbxBulkTable *bulk;

	if (sbx_bulk_copy_min_size < 0 || schema_only || encoding == NULL ||
		PQserverVersion(reader) < 120000)
		return NULL;
	snprintf(min_size, sizeof(min_size), INT64_FORMAT,
			 (int64) sbx_bulk_copy_min_size * 1024 * 1024);
	bulk = palloc0(sizeof(SbxBulkTable));
	bulk->encoding = pstrdup(encoding);
	/* names in the source's own encoding, as pg_dump is told (--encoding) */
	bulk->reader_encoding = sbx_bulk_set_encoding(reader, bulk->encoding, source);
	res = sbx_remote_exec(reader, SBX_BULK_LARGEST_SQL, 1, params, PGRES_TUPLES_OK,
						  sbx_bulk_what(source));
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		(void) sbx_bulk_set_encoding(reader, bulk->reader_encoding, source);
		return NULL;
	}
	bulk->relid = atooid(PQgetvalue(res, 0, 0));
	bulk->schema = pstrdup(PQgetvalue(res, 0, 1));
	bulk->name = pstrdup(PQgetvalue(res, 0, 2));
	/* each name quoted here: a keyword of this server may be none of the source's */
	bulk->sql_name = sbx_remote_quote_qualified(bulk->schema, bulk->name);
	PQclear(res);
	/* in notes and errors, only a name this database's encoding holds as is */
	bulk->display = pg_char_to_encoding(bulk->encoding) == GetDatabaseEncoding() ?
		psprintf("table %s", bulk->sql_name) : psprintf("the table of oid %u", bulk->relid);
	bulk->same_major = PQserverVersion(reader) / 10000 == PG_VERSION_NUM / 10000;

	PQclear(sbx_remote_exec(reader,
							PQserverVersion(reader) >= 170000 ?
							"SELECT pg_catalog.set_config('statement_timeout', '0', false),"
							" pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false),"
							" pg_catalog.set_config('transaction_timeout', '0', false)" :
							"SELECT pg_catalog.set_config('statement_timeout', '0', false),"
							" pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false)",
							0, NULL, PGRES_TUPLES_OK, sbx_bulk_what(source)));
	return bulk;
}

/*
 * Lock the candidate as the first statement of the reader's transaction,
 * then, in the snapshot the next statement takes, check that its name
 * still leads to it and read it: bulk->copy says whether it still
 * qualifies.  The lock is held either way, so every pg_dump of the clone
 * runs with a lock wait timeout (sbx_bulk_dump_options).
 */
void
sbx_bulk_lock(PGconn *reader, SbxBulkTable *bulk, const char *source)
{
	const char *what = sbx_bulk_what(source);
	const char *params[1];
	PGresult   *res;
	StringInfoData columns;

	PQclear(sbx_remote_exec(reader,
							psprintf("LOCK TABLE ONLY %s IN ACCESS SHARE MODE", bulk->sql_name),
							0, NULL, PGRES_COMMAND_OK, what));
	sbx_bulk_check_name(reader, bulk, source);

	params[0] = psprintf("%u", bulk->relid);
	res = sbx_remote_exec(reader, SBX_BULK_DESCRIBE_SQL, 1, params, PGRES_TUPLES_OK, what);
	bulk->copy = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	bulk->builtin_types = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	PQclear(res);

	res = sbx_remote_exec(reader, SBX_BULK_COLUMNS_SQL, 1, params, PGRES_TUPLES_OK, what);
	initStringInfo(&columns);
	for (int i = 0; i < PQntuples(res); i++)
		appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "",
						 sbx_remote_quote_ident(PQgetvalue(res, i, 0)));
	bulk->columns = columns.data;
	PQclear(res);
	if (columns.len == 0)
		bulk->copy = false;
	(void) sbx_bulk_set_encoding(reader, bulk->reader_encoding, source);
}

/*
 * pg_dump's options while the reader holds its lock: a lock wait timeout;
 * and for the dumps around the copied table's rows, the pre-data section
 * ('part' SBX_BULK_BEFORE), or the rest without those rows
 * (SBX_BULK_AFTER).
 */
List *
sbx_bulk_dump_options(const SbxBulkTable *bulk, SbxBulkPart part)
{
	List	   *options = NIL;

	options = lappend(options, psprintf("--lock-wait-timeout=%d", sbx_lock_timeout));
	if (part == SBX_BULK_BEFORE)
		options = lappend(options, "--section=pre-data");
	else if (part == SBX_BULK_AFTER)
	{
		/* the name is the reader's, in the source's encoding */
		options = lappend(options, psprintf("--encoding=%s", bulk->encoding));
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
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	int			sqlerrcode = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;

	/* a full disk, or memory, of the sandbox's server: say so, as it did */
	if (!reading && state != NULL && strlen(state) == 5 && strncmp(state, "53", 2) == 0)
		sqlerrcode = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
	if (res)
		PQclear(res);
	ereport(ERROR,
			(errcode(sqlerrcode),
			 reading ? errmsg("could not read the rows of %s of source \"%s\"",
							  bulk->display, source)
			 : errmsg("could not write the rows of %s into the sandbox", bulk->display),
			 errdetail_internal("%s", why)));
}

/*
 * The sandbox's session, for its COPY: the source's encoding, what
 * pg_restore sets, no timeout, and no message but an error (copy_relay.c).
 */
static void
sbx_bulk_prepare_sandbox(PGconn *sandbox, const SbxBulkTable *bulk)
{
	const char *params[1] = {bulk->encoding};

	PQclear(sbx_remote_exec(sandbox,
							"SELECT pg_catalog.set_config('client_encoding', $1, false),"
							" pg_catalog.set_config('datestyle', 'ISO', false),"
							" pg_catalog.set_config('intervalstyle', 'postgres', false),"
							" pg_catalog.set_config('xmloption', 'content', false),"
							" pg_catalog.set_config('search_path', '', false),"
							" pg_catalog.set_config('client_min_messages', 'error', false),"
							" pg_catalog.set_config('statement_timeout', '0', false),"
							" pg_catalog.set_config('lock_timeout', '0', false),"
							" pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false)"
#if PG_VERSION_NUM >= 170000
							", pg_catalog.set_config('transaction_timeout', '0', false)"
#endif
							, 1, params, PGRES_TUPLES_OK,
							"could not prepare the sandbox for the rows of its largest table"));
}

/*
 * Copy the table's rows from 'reader' into the sandbox, over 'sandbox', a
 * login as its role; the pre-data section is restored, nothing else.
 * Returns the rows copied: the sandbox took as many as the source sent,
 * or the clone fails.
 */
int64
sbx_bulk_copy(PGconn *reader, PGconn *sandbox, SbxBulkTable *bulk, const char *source)
{
	const char *format;
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
	sbx_bulk_prepare_sandbox(sandbox, bulk);
	/* the reader's own encoding comes back once the rows are read */
	reader_encoding = sbx_bulk_set_encoding(reader, bulk->encoding, source);
	PQclear(sbx_remote_exec(reader,
							"SELECT pg_catalog.set_config('datestyle', 'ISO', false),"
							" pg_catalog.set_config('intervalstyle', 'postgres', false),"
							" pg_catalog.set_config('extra_float_digits', '3', false)",
							0, NULL, PGRES_TUPLES_OK, sbx_bulk_what(source)));

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying the largest table's rows");
	sbx_bulk_check_name(reader, bulk, source);
	res = libpqsrv_exec(reader, psprintf("COPY %s (%s) TO STDOUT (FORMAT %s)",
										 bulk->sql_name, bulk->columns, format),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		sbx_bulk_failed(reader, res, bulk, source, true);
	PQclear(res);
	/*
	 * Loaded in the transaction that truncates it (the table is empty and
	 * has no trigger yet: those come with the post-data section), the rows
	 * skip the WAL under wal_level = minimal, as pg_restore --jobs does: a
	 * full disk then fails the COPY, not the server's next WAL segment.
	 * And frozen as they are written (FREEZE, which that truncation
	 * allows): the post-data section's index builds, in a later
	 * transaction, then set no hint bit on them, which with data checksums
	 * (initdb's default from 18) would write every page to the WAL again.
	 */
	PQclear(sbx_remote_exec(sandbox, "BEGIN", 0, NULL, PGRES_COMMAND_OK,
							"could not prepare the sandbox for the rows of its largest table"));
	PQclear(sbx_remote_exec(sandbox, psprintf("TRUNCATE ONLY %s", bulk->sql_name),
							0, NULL, PGRES_COMMAND_OK,
							"could not prepare the sandbox for the rows of its largest table"));
	res = libpqsrv_exec(sandbox, psprintf("COPY %s (%s) FROM STDIN (FORMAT %s, FREEZE)",
										  bulk->sql_name, bulk->columns, format),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_IN)
		sbx_bulk_failed(sandbox, res, bulk, source, false);
	PQclear(res);

	/* rows come one to a message: they leave in messages of 64 kB */
	if (!sbx_copy_relay(reader, sandbox))
	{
		/* a failure, never a success of what went in so far */
		(void) PQputCopyEnd(sandbox, "the relay of the rows failed");
		sbx_bulk_failed(sandbox, libpqsrv_get_result_last(sandbox, PG_WAIT_EXTENSION),
						bulk, source, false);
	}
	res = libpqsrv_get_result_last(reader, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		(void) PQputCopyEnd(sandbox, "the source failed");
		sbx_bulk_failed(reader, res, bulk, source, true);
	}
	sent = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);

	if (PQputCopyEnd(sandbox, NULL) != 1)
		sbx_bulk_failed(sandbox, NULL, bulk, source, false);
	res = libpqsrv_get_result_last(sandbox, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sbx_bulk_failed(sandbox, res, bulk, source, false);
	rows = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	PQclear(sbx_remote_exec(sandbox, "COMMIT", 0, NULL, PGRES_COMMAND_OK,
							psprintf("could not write the rows of %s into the sandbox",
									 bulk->display)));
	/* a schema renamed under the lock would have led the COPY elsewhere */
	sbx_bulk_check_name(reader, bulk, source);
	(void) sbx_bulk_set_encoding(reader, reader_encoding, source);
	if (rows != sent)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s of source \"%s\" sent " INT64_FORMAT " rows, and the sandbox took " INT64_FORMAT,
						bulk->display, source, sent, rows)));
	pgstat_report_activity(STATE_IDLE, NULL);
	return rows;
}
