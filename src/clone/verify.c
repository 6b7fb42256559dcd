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
 *	- every table that held rows must have received some (verify_rows.c);
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

#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
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
