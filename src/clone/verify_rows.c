/*-------------------------------------------------------------------------
 *
 * verify_rows.c
 *	  Whether every table that held rows where a clone was dumped from
 *	  received rows in the sandbox, in the clone worker.
 *
 * pg_restore exiting with 0 is not proof that it restored every table's
 * rows: one told to skip an entry, or handed a list written short, leaves
 * a table empty and says nothing.  Each way rows reach a sandbox checks:
 *
 *	- through an archive (a directory, one file per table's rows), every
 *	  table whose file holds rows must have received some
 *	  (sbx_verify_archive_rows);
 *	- through a stream (pg_dump's custom format piped into pg_restore, which
 *	  leaves no file to read), every table of the sandbox that has no block
 *	  is looked up in the source, in the very snapshot pg_dump dumped: one
 *	  that holds a row there fails the clone (sbx_verify_stream_rows);
 *	- the largest table, copied by the worker (bulk_copy.c), and masked and
 *	  reduced tables (masking.c) count what each COPY sent and took.
 *
 * The sandbox's side reads the catalog and the size of each table's file:
 * no query is planned on a table of the sandbox.  The source's side reads
 * only the tables the sandbox holds empty and whose file on the source is
 * not, each by COPY ... TO as pg_dump read it: that plans nothing, so no
 * index or statistics expression of an owner the clone does not trust is
 * folded, and it stands only on a table (never on a view whose query an
 * owner wrote).  The COPY is canceled at its first row.  Up to ten empty
 * tables are named.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <sys/stat.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

/* the tables looked up in the source's catalog in one statement */
#define SBX_ROWS_BATCH	100

/* Whether a table's data file in a directory archive holds no row. */
static bool
sbx_data_file_empty(const char *path, bool *known)
{
	struct stat st;
	char		head[16];
	FILE	   *f;
	size_t		n;
	bool		empty = true;

	*known = true;
	if (stat(path, &st) < 0)
	{
		/* a compressed file (.dat.gz, .lz4, .zst) is not read here */
		*known = false;
		return false;
	}
	if (st.st_size > (off_t) sizeof(head))
		return false;
	f = AllocateFile(path, PG_BINARY_R);
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	n = fread(head, 1, sizeof(head), f);
	FreeFile(f);
	/* COPY's end marker, and newlines */
	for (size_t i = 0; i < n; i++)
	{
		if (head[i] != '\\' && head[i] != '.' && head[i] != '\n')
			empty = false;
	}
	return empty;
}

/* The dumpIds of the lines of a listing, and of its TABLE DATA lines, their table. */
typedef struct SbxListed
{
	int			dump_id;		/* the hash key */
	Oid			table;			/* TABLE DATA: the table's OID in the source */
	bool		kept;			/* in the restore list */
} SbxListed;

static HTAB *
sbx_listed_entries(const char *listing)
{
	HASHCTL		ctl;
	HTAB	   *listed;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int);
	ctl.entrysize = sizeof(SbxListed);
	ctl.hcxt = CurrentMemoryContext;
	listed = hash_create("pgsandbox archive listing", 1024, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (const char *p = listing; *p;)
	{
		int			dump_id;
		unsigned int tableoid;
		unsigned int oid;
		int			len = -1;

		/* "dumpId; tableoid oid DESC SCHEMA TAG OWNER" */
		if (sscanf(p, "%d; %u %u %n", &dump_id, &tableoid, &oid, &len) == 3 && len >= 0)
		{
			SbxListed  *entry = hash_search(listed, &dump_id, HASH_ENTER, NULL);

			entry->table = strncmp(p + len, "TABLE DATA ", 11) == 0 ? oid : InvalidOid;
			entry->kept = false;
		}
		p += strcspn(p, "\n");
		if (*p == '\n')
			p++;
	}
	return listed;
}

/*
 * Through a directory archive: every file of table rows that holds some
 * must be named by the archive's table of contents as pg_restore --list
 * printed it ('listing'), and, unless the restore list ('list') left it
 * out on purpose, its table must have received rows.  The table is named
 * by the source's OID; 'reader' (in pg_dump's snapshot) gives its name.  A
 * table of the sandbox with no block has no row.
 */
void
sbx_verify_archive_rows(PGconn *reader, const char *source, const char *dir,
						const char *listing, const char *list)
{
	HTAB	   *listed = sbx_listed_entries(listing);
	FILE	   *in;
	char		line[8192];
	DIR		   *d;
	struct dirent *de;
	StringInfoData oids;
	StringInfoData empty;
	int			nempty = 0;
	PGresult   *res;
	MemoryContext outer = CurrentMemoryContext;

	/* what the restore list kept */
	in = AllocateFile(list, "r");
	if (in == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", list)));
	while (fgets(line, sizeof(line), in) != NULL)
	{
		int			dump_id;
		SbxListed  *entry;

		if (sscanf(line, "%d;", &dump_id) == 1 &&
			(entry = hash_search(listed, &dump_id, HASH_FIND, NULL)) != NULL)
			entry->kept = true;
	}
	FreeFile(in);

	/* the files of rows, and their tables */
	initStringInfo(&oids);
	d = AllocateDir(dir);
	while ((de = ReadDir(d, dir)) != NULL)
	{
		int			dump_id;
		int			len = -1;
		SbxListed  *entry;
		bool		known;

		if (sscanf(de->d_name, "%d.dat%n", &dump_id, &len) != 1 || len < 0)
			continue;
		entry = hash_search(listed, &dump_id, HASH_FIND, NULL);
		if (entry == NULL || !OidIsValid(entry->table))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the archive of source \"%s\" holds rows that its table of contents does not list",
							source),
					 errdetail("File \"%s\" is listed as no table's rows: the listing is short.",
							   de->d_name)));
		if (!entry->kept)
			continue;			/* left out on purpose (restore_list.c) */
		if (!sbx_data_file_empty(psprintf("%s/%s", dir, de->d_name), &known) &&
			de->d_name[len] == '\0')
			appendStringInfo(&oids, "%s%u", oids.len > 0 ? "," : "", entry->table);
	}
	FreeDir(d);
	hash_destroy(listed);
	if (oids.len == 0)
		return;

	/* the sandbox's tables of those names, by the source's catalog */
	res = sbx_remote_exec(reader,
						  psprintf("SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)"
								   "  FROM pg_catalog.pg_class c"
								   "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
								   " WHERE c.oid = ANY ('{%s}'::pg_catalog.oid[])", oids.data),
						  0, NULL, PGRES_TUPLES_OK,
						  psprintf("could not read the tables of source \"%s\"", source));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	initStringInfo(&empty);
	for (int i = 0; i < PQntuples(res); i++)
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(PQgetvalue(res, i, 0))};
		bool		isnull;
		bool		has_rows;

		/*
		 * Its size, from the catalog and the files: nothing is planned.  A
		 * table the sandbox lacks is sbx_verify_restore's to name.
		 */
		if (SPI_execute_with_args("SELECT pg_catalog.to_regclass($1) IS NULL"
								  "    OR pg_catalog.pg_relation_size(pg_catalog.to_regclass($1)) > 0",
								  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not measure a table of the sandbox");
		has_rows = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											  &isnull));
		if (!isnull && has_rows)
			continue;
		if (nempty++ < 10)
			appendStringInfo(&empty, "%s%s", empty.len > 0 ? ", " : "", PQgetvalue(res, i, 0));
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);
	PQclear(res);
	if (nempty > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%d table%s of the sandbox received no row, though the archive of source \"%s\" holds rows for %s",
						nempty, nempty == 1 ? "" : "s", source, nempty == 1 ? "it" : "them"),
				 errdetail("Empty: %s%s.", empty.data, nempty > 10 ? ", ..." : ""),
				 errhint("pg_dump and pg_restore reported success; see the server log for what they said.")));
}


/*
 * In a transaction of the clone worker, connected to the sandbox: the
 * qualified names of its ordinary tables that have no block, those of
 * extensions aside (CREATE EXTENSION made them, and config_data.c fills
 * their configuration's rows as the extension's filter says).
 */
static List *
sbx_sandbox_empty_tables(void)
{
	List	   *names = NIL;

	if (SPI_execute("SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
					"       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname)"
					"  FROM pg_catalog.pg_class c"
					"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
					" WHERE c.relkind OPERATOR(pg_catalog.=) 'r'"
					"   AND c.relpersistence OPERATOR(pg_catalog.<>) 't'"
					"   AND n.nspname OPERATOR(pg_catalog.<>) ALL ('{pg_catalog,information_schema}'::pg_catalog.name[])"
					"   AND n.nspname OPERATOR(pg_catalog.!~) '^pg_(toast|temp_|toast_temp_)'"
					"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
					"                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
					"                      AND d.objid OPERATOR(pg_catalog.=) c.oid"
					"                      AND d.deptype OPERATOR(pg_catalog.=) 'e')"
					"   AND pg_catalog.pg_relation_size(c.oid) OPERATOR(pg_catalog.=) 0"
					" ORDER BY 1",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the sandbox's tables");
	for (uint64 i = 0; i < SPI_processed; i++)
		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	return names;
}

/* A statement of the source's rows check failed: 'what', and the source's words. */
pg_noreturn static void
sbx_rows_read_failed(PGconn *reader, const PGresult *res, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("%s", what),
			 errdetail_internal("%s", sbx_remote_error(reader, res))));
}

/*
 * Whether table 'name' of the source holds a row in the reader's snapshot.
 * Read by COPY ... TO, which plans nothing: no index or statistics
 * expression of the table's owner is folded, and what runs is what
 * pg_dump ran on the same table as the same login (its columns' output
 * functions).  At the first row the COPY is canceled; a savepoint keeps
 * the reader's transaction, and its snapshot, for what follows.
 */
static bool
sbx_source_table_has_row(PGconn *reader, const char *name, const char *what)
{
	PGresult   *res;
	bool		has_row = false;

	PQclear(sbx_remote_exec(reader, "SAVEPOINT sbx_rows", 0, NULL, PGRES_COMMAND_OK, what));
	res = libpqsrv_exec(reader, psprintf("COPY %s TO STDOUT", name), PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		sbx_rows_read_failed(reader, res, what);
	PQclear(res);
	for (;;)
	{
		char	   *row;
		int			n = PQgetCopyData(reader, &row, 1);

		if (n > 0)
		{
			PQfreemem(row);
			if (!has_row)
			{
				PGcancel   *cancel = PQgetCancel(reader);
				char		errbuf[256];

				has_row = true;
				/* a cancel that comes too late finds the COPY done: the same */
				if (cancel != NULL)
				{
					(void) PQcancel(cancel, errbuf, sizeof(errbuf));
					PQfreeCancel(cancel);
				}
			}
			continue;
		}
		if (n < 0)
			break;				/* the end of the COPY, or its error */
		(void) WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_SOCKET_READABLE | WL_EXIT_ON_PM_DEATH,
								 PQsocket(reader), -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (PQconsumeInput(reader) == 0)
			sbx_rows_read_failed(reader, NULL, what);
	}
	res = libpqsrv_get_result_last(reader, PG_WAIT_EXTENSION);
	/* only the cancel of a table that holds rows may end it in an error */
	if (PQresultStatus(res) != PGRES_COMMAND_OK && !has_row)
		sbx_rows_read_failed(reader, res, what);
	PQclear(res);

	/*
	 * A cancel that came once the COPY was done is dropped by a backend
	 * waiting for its next command; should it meet this one instead, the
	 * same again.
	 */
	res = libpqsrv_exec(reader, "ROLLBACK TO SAVEPOINT sbx_rows", PG_WAIT_EXTENSION);
	if (has_row && PQresultStatus(res) == PGRES_FATAL_ERROR &&
		strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE) ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : "",
			   "57014") == 0)
	{
		PQclear(res);
		res = libpqsrv_exec(reader, "ROLLBACK TO SAVEPOINT sbx_rows", PG_WAIT_EXTENSION);
	}
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sbx_rows_read_failed(reader, res, what);
	PQclear(res);
	PQclear(sbx_remote_exec(reader, "RELEASE SAVEPOINT sbx_rows", 0, NULL,
							PGRES_COMMAND_OK, what));
	return has_row;
}

/*
 * Of 'names' (qualified, as the sandbox has them), those of ordinary
 * tables of the source that hold a row in the reader's snapshot, appended
 * to 'full'.  A name that leads to no table of the source (the restore's
 * own code may have made it) is no row the dump held; a table with no
 * block holds none, which the catalog and its file's size say.
 */
static List *
sbx_source_tables_with_rows(PGconn *reader, const char *source, List *names, List *full)
{
	StringInfoData array;
	const char *params[1];
	const char *what = psprintf("could not read the tables of source \"%s\"", source);
	PGresult   *res;
	ListCell   *lc;

	initStringInfo(&array);
	appendStringInfoChar(&array, '{');
	foreach(lc, names)
	{
		appendStringInfo(&array, "%s\"", foreach_current_index(lc) > 0 ? "," : "");
		for (const char *p = lfirst(lc); *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&array, '\\');
			appendStringInfoChar(&array, *p);
		}
		appendStringInfoChar(&array, '"');
	}
	appendStringInfoChar(&array, '}');
	params[0] = array.data;
	res = sbx_remote_exec(reader,
						  "SELECT t.name FROM pg_catalog.unnest($1::pg_catalog.text[]) AS t(name)"
						  "  JOIN pg_catalog.pg_class c"
						  "    ON c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(t.name)"
						  " WHERE c.relkind OPERATOR(pg_catalog.=) 'r'"
						  "   AND pg_catalog.pg_relation_size(c.oid) OPERATOR(pg_catalog.>) 0",
						  1, params, PGRES_TUPLES_OK, what);
	for (int i = 0; i < PQntuples(res); i++)
	{
		if (sbx_source_table_has_row(reader, PQgetvalue(res, i, 0), what))
			full = lappend(full, pstrdup(PQgetvalue(res, i, 0)));
	}
	PQclear(res);
	return full;
}

/*
 * Through a stream: every table of the sandbox with no block must hold no
 * row in the source either, as 'reader' sees it, still in the snapshot
 * pg_dump dumped.  Raises an error naming the tables that received none.
 */
void
sbx_verify_stream_rows(PGconn *reader, const char *source)
{
	MemoryContext outer = CurrentMemoryContext;
	List	   *empty = NIL;
	List	   *full = NIL;
	List	   *batch = NIL;
	ListCell   *lc;
	StringInfoData named;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		List	   *names = sbx_sandbox_empty_tables();
		MemoryContext spi = MemoryContextSwitchTo(outer);

		foreach(lc, names)
			empty = lappend(empty, pstrdup(lfirst(lc)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);

	foreach(lc, empty)
	{
		batch = lappend(batch, lfirst(lc));
		if (list_length(batch) == SBX_ROWS_BATCH || lnext(empty, lc) == NULL)
		{
			full = sbx_source_tables_with_rows(reader, source, batch, full);
			list_free(batch);
			batch = NIL;
		}
	}
	if (full == NIL)
		return;
	initStringInfo(&named);
	foreach(lc, full)
	{
		if (foreach_current_index(lc) < 10)
			appendStringInfo(&named, "%s%s", named.len > 0 ? ", " : "", (char *) lfirst(lc));
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%d table%s of the sandbox received no row, though source \"%s\" held rows for %s in the snapshot it was dumped in",
					list_length(full), list_length(full) == 1 ? "" : "s", source,
					list_length(full) == 1 ? "it" : "them"),
			 errdetail("Empty: %s%s.", named.data, list_length(full) > 10 ? ", ..." : ""),
			 errhint("pg_dump and pg_restore reported success; see the server log for what they said.")));
}
