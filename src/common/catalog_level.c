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
#include "sbx_common.h"
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

/* 0.10: reduced data clones */
bool
sbx_catalog_has_reduced(void)
{
	return sbx_catalog_has_column("sandbox", "reduced");
}

/* 0.13: key masks (key_masks.c) */
bool
sbx_catalog_has_key_masks(void)
{
	return sbx_catalog_has_column("source_rule", "key_mask");
}

/* 0.12: a source's trusted owners (source_trust.c) */
bool
sbx_catalog_has_trust(void)
{
	return sbx_catalog_has_column("source", "trusted_owners");
}

/* 0.12: a sandbox's cap of sessions (tenants.c) */
bool
sbx_catalog_has_tenants(void)
{
	return sbx_catalog_has_column("sandbox", "connection_limit");
}

/* 0.12: what each database holds, counted and hashed (verify.c) */
bool
sbx_catalog_has_digests(void)
{
	return sbx_catalog_has_column("sandbox", "objects_digest");
}

/* 0.12: the OID each database is made with, recorded first (orphans.c) */
bool
sbx_catalog_has_orphans(void)
{
	return sbx_catalog_has_column("sandbox", "planned_db_oid");
}

/* 0.12: live sources, whose data snapshot follows them (live_*.c) */
bool
sbx_catalog_has_live(void)
{
	return sbx_catalog_has_column("source", "live_publication");
}

/* 0.14: what a live snapshot's apply is doing (live.c) */
bool
sbx_catalog_has_live_state(void)
{
	return sbx_catalog_has_column("sandbox", "live_state");
}

/*
 * A condition, in SQL, that snapshot or pool member s was made of source o
 * as it is now, not of an earlier source of the same name: of the same
 * generation.  A source removed and added again, even in one transaction
 * while a snapshot of the old one was being built, is a new one.  Before
 * the catalog has generations, the times it was added and s made.
 */
const char *
sbx_same_source_sql(void)
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

/*
 * A condition on snapshot s of source o, in SQL: its rows were read under
 * the source's rules as they are (a schema-only one has no rows).  Empty
 * before the catalog has rules.
 */
static const char *
sbx_snapshot_rules_current(void)
{
	return sbx_if_rules(" AND (s.schema_only OR s.rules_version = o.rules_version)", "");
}

/*
 * The current snapshot of each source and kind, as a SQL common table
 * current_snapshot(source, schema_only, id): the newest ready one not
 * retired, made of its source as it is (a source removed and added again is
 * a new one: sbx_same_source_sql), taken under its rules as they are.  This is
 * the one definition: the worker's lookups, pool hand-outs and fills,
 * clone()'s check whether a snapshot serves, and through
 * _current_snapshots() the pools and metrics views all read it.  Needs a
 * transaction.
 */
const char *
sbx_current_snapshots_cte(void)
{
	return psprintf("current_snapshot AS ("
					" SELECT s.source, s.schema_only, max(s.id) AS id FROM pgsandbox.sandbox s"
					"   JOIN pgsandbox.source o ON o.name = s.source AND %s"
					"  WHERE s.kind = 'snapshot' AND s.status = 'ready' AND s.retired_at IS NULL%s"
					"  GROUP BY s.source, s.schema_only)",
					sbx_same_source_sql(), sbx_snapshot_rules_current());
}

/*
 * Whether the catalog has masking rules (is at least version 0.4's).  Needs
 * a transaction.
 */
bool
sbx_catalog_has_rules(void)
{
	Oid			nsp = get_namespace_oid("pgsandbox", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("source_rule", nsp));
}

/* a fragment of SQL that needs the 0.4 catalog, or another before it */
const char *
sbx_if_rules(const char *fragment, const char *otherwise)
{
	return sbx_catalog_has_rules() ? fragment : otherwise;
}
