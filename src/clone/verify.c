/*-------------------------------------------------------------------------
 *
 * verify.c
 *	  What a clone must hold before it is served, checked against what it
 *	  was made from, in the clone worker.
 *
 * pg_dump and pg_restore exiting with 0 is not proof: a table of contents
 * written short, or a pg_restore that skips entries, leaves a sandbox that
 * lacks what the source holds, and used to be served as ready.  So:
 *
 *	- a dump is compared with its source, read in the very snapshot pg_dump
 *	  dumped (the reader exports it; pg_dump --snapshot): every table, view,
 *	  materialized view, sequence, index, constraint (primary key, unique,
 *	  exclusion, foreign key) and function of the source that pgsandbox
 *	  restores must be in the sandbox, by name;
 *	- through an archive (a directory, one file per table's rows), every
 *	  table whose file holds rows must have received some;
 *	- masked and reduced tables: each COPY must bring as many rows as the
 *	  source sent (masking.c);
 *	- a copy of a snapshot or a save is compared with the inventory recorded
 *	  for it when it was made: its count of objects and a digest of their
 *	  names.
 *
 * The inventory reads catalogs only, on both sides: no query is planned on
 * a table of the source or of the sandbox.  What pgsandbox leaves out on
 * purpose (the extensions' members, which CREATE EXTENSION makes; event
 * triggers; publications and subscriptions) is not in it.  A failed check
 * fails the clone, naming up to ten objects missing, and the clone is
 * cleaned up as any failed clone is: it is never served, and never becomes
 * a snapshot that others copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <sys/stat.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"

/*
 * The objects a restore must bring, one row each: its kind and its
 * qualified name.  From PostgreSQL 11, with conparentid and prokind; a
 * partition's copy of its table's constraint is its table's, and made with
 * it.
 */
#define SBX_INVENTORY_SELECT(constraint_parent, function_kinds) \
	"SELECT kind, name FROM (" \
	" SELECT CASE WHEN c.relkind IN ('r', 'p', 'f') THEN 'table'" \
	"             WHEN c.relkind = 'v' THEN 'view'" \
	"             WHEN c.relkind = 'm' THEN 'materialized view'" \
	"             WHEN c.relkind = 'S' THEN 'sequence'" \
	"             ELSE 'index' END AS kind," \
	"        pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) AS name," \
	"        c.oid AS objid, 'pg_catalog.pg_class'::pg_catalog.regclass AS classid, n.nspname" \
	"   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace" \
	"  WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S', 'i', 'I')" \
	" UNION ALL" \
	" SELECT 'constraint', pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)" \
	"        || '.' || pg_catalog.quote_ident(k.conname), k.oid," \
	"        'pg_catalog.pg_constraint'::pg_catalog.regclass, n.nspname" \
	"   FROM pg_catalog.pg_constraint k" \
	"   JOIN pg_catalog.pg_class c ON c.oid = k.conrelid" \
	"   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace" \
	"  WHERE k.contype IN ('p', 'u', 'x', 'f')" constraint_parent \
	" UNION ALL" \
	" SELECT 'function', pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(p.proname)" \
	"        || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', p.oid," \
	"        'pg_catalog.pg_proc'::pg_catalog.regclass, n.nspname" \
	"   FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace" \
	"  WHERE " function_kinds \
	") o" \
	" WHERE o.nspname NOT IN ('pg_catalog', 'information_schema')" \
	"   AND o.nspname !~ '^pg_(toast|temp_|toast_temp_)'" \
	"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d" \
	"                    WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype = 'e')"

#define SBX_INVENTORY_SQL \
	SBX_INVENTORY_SELECT(" AND k.conparentid = 0", "p.prokind IN ('f', 'p', 'a', 'w')")
#define SBX_INVENTORY_SQL_BEFORE_11 \
	SBX_INVENTORY_SELECT("", "true")

/* the digest of an inventory: "<objects>:<md5 of its sorted lines>" */
#define SBX_DIGEST_SQL(inventory) \
	"SELECT pg_catalog.count(*) || ':' ||" \
	"       pg_catalog.md5(COALESCE(pg_catalog.string_agg(kind || ' ' || name, E'\\n'" \
	"                                                  ORDER BY kind, name), ''))" \
	"  FROM (" inventory ") i"

/* an entry of the sandbox's inventory, by "kind name" */
typedef struct SbxHave
{
	char		key[2 * NAMEDATALEN * 3 + 64];
} SbxHave;

/*
 * In a transaction of the clone worker, connected to the sandbox: its
 * inventory, as a hash table of "kind name".
 */
static HTAB *
sbx_sandbox_inventory(void)
{
	HASHCTL		ctl;
	HTAB	   *have;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(((SbxHave *) 0)->key);
	ctl.entrysize = sizeof(SbxHave);
	ctl.hcxt = CurrentMemoryContext;
	have = hash_create("pgsandbox sandbox inventory", 1024, &ctl,
					   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	if (SPI_execute(SBX_INVENTORY_SQL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the sandbox's inventory");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char		key[sizeof(((SbxHave *) 0)->key)];

		snprintf(key, sizeof(key), "%s %s",
				 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		(void) hash_search(have, key, HASH_ENTER, NULL);
	}
	return have;
}

/*
 * Compare the sandbox this worker is connected to with the source read by
 * 'reader', still in the snapshot pg_dump dumped: every object of the
 * source's inventory must be in the sandbox.  Raises an error naming what
 * is missing.
 */
void
sbx_verify_restore(PGconn *reader, const char *source, const char *sandbox)
{
	PGresult   *res;
	HTAB	   *have;
	StringInfoData missing;
	int			nmissing = 0;
	int			total;
	MemoryContext outer = CurrentMemoryContext;

	res = sbx_remote_exec(reader,
						  PQserverVersion(reader) >= 110000 ? SBX_INVENTORY_SQL
						  : SBX_INVENTORY_SQL_BEFORE_11,
						  0, NULL, PGRES_TUPLES_OK,
						  psprintf("could not read the inventory of source \"%s\"", source));
	total = PQntuples(res);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	have = sbx_sandbox_inventory();
	initStringInfo(&missing);
	for (int i = 0; i < total; i++)
	{
		char		key[sizeof(((SbxHave *) 0)->key)];

		snprintf(key, sizeof(key), "%s %s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
		if (hash_search(have, key, HASH_FIND, NULL) != NULL)
			continue;
		if (nmissing++ < 10)
			appendStringInfo(&missing, "%s%s", missing.len > 0 ? ", " : "", key);
	}
	hash_destroy(have);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);
	PQclear(res);

	if (nmissing > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sandbox \"%s\" lacks %d of the %d objects of source \"%s\" it was restored from",
						sandbox, nmissing, total, source),
				 errdetail("Missing: %s%s.", missing.data, nmissing > 10 ? ", ..." : ""),
				 errhint("pg_dump and pg_restore reported success; see the server log for what they said.")));
}

/*
 * In a transaction of the clone worker: the digest of the inventory of the
 * database it is connected to, "<objects>:<md5>", palloc'd in the caller's
 * memory.
 */
char *
sbx_inventory_digest(void)
{
	char	   *digest;

	if (SPI_execute(SBX_DIGEST_SQL(SBX_INVENTORY_SQL), true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the database's inventory");
	digest = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	return digest;
}

/*
 * A copy of a snapshot or a save: its inventory ('got', a digest) must be
 * the one recorded for what it copies ('expected'); none was recorded for a
 * snapshot made before 0.12, which is not checked.
 */
void
sbx_verify_copy(const char *expected, const char *got, const char *copy, const char *of)
{
	if (expected == NULL || expected[0] == '\0' || strcmp(expected, got) == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the copy \"%s\" of \"%s\" does not hold what it copies", copy, of),
			 errdetail("Its objects, counted and hashed by name, are %s; \"%s\" recorded %s when it was made.",
					   got, of, expected)));
}

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
