/*-------------------------------------------------------------------------
 *
 * catalog_level.c
 *	  Which version of pgsandbox's catalog a database holds, and the SQL
 *	  fragments that differ between versions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "pgsandbox.h"
#include "utils/lsyscache.h"

/*
 * Whether pgsandbox's catalog table 'table' has column 'column'.  Between a
 * restart with a new library and ALTER EXTENSION pgsandbox UPDATE the
 * catalog is an older version's: clones, drops and the reaper then use the
 * statements that version knows, and what it lacks waits for the update.
 * Each version's catalog is told by a column it added.  Needs a
 * transaction.
 */
static bool
sbx_catalog_has_column(const char *table, const char *column)
{
	Oid			nsp = get_namespace_oid("pgsandbox", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, column) != InvalidAttrNumber;
}

/* 0.3: snapshots and pools (the sandbox table's kind column) */
bool
sbx_catalog_has_kinds(void)
{
	return sbx_catalog_has_column("sandbox", "kind");
}

/* 0.5: sources have generations */
bool
sbx_catalog_has_generations(void)
{
	return sbx_catalog_has_column("source", "generation");
}

/* 0.6: sandboxes can be protected */
bool
sbx_catalog_has_protection(void)
{
	return sbx_catalog_has_column("sandbox", "protected_until");
}

/* 0.7: the use and size of sandboxes, for idle expiry, budget and metrics */
bool
sbx_catalog_has_usage(void)
{
	return sbx_catalog_has_column("sandbox", "read_only_at");
}

/* 0.8: resets and saves */
bool
sbx_catalog_has_saves(void)
{
	return sbx_catalog_has_column("sandbox", "reset_started_at");
}

/* 0.9: drops under way are marked 'dropping', blocked steps recorded */
bool
sbx_catalog_has_dropping(void)
{
	return sbx_catalog_has_column("sandbox", "drop_started_at");
}

/*
 * A condition, in SQL, that snapshot or pool member s was made of source o
 * as it is now, not of an earlier source of the same name: of the same
 * generation.  A source removed and added again, even in one transaction
 * while a snapshot of the old one was being built, is a new one.  Before
 * the catalog has generations, the times it was added and s made.
 */
const char *
sbx_same_source(void)
{
	return sbx_catalog_has_generations() ? "o.generation = s.source_generation"
		: "o.added_at <= s.created_at";
}

/* a fragment of SQL that needs the 0.3 catalog, or "" before it */
const char *
sbx_if_kinds(const char *fragment)
{
	return sbx_catalog_has_kinds() ? fragment : "";
}
