/*-------------------------------------------------------------------------
 *
 * subset_sql.c
 *	  The SQL a reduced clone sends its source about a foreign key or a
 *	  declared relationship (a join of its two ends, its rows that refer to
 *	  nothing, its dangling references) and about a seed's rule (the FROM
 *	  item and WHERE clause of the rows it chooses).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"

#include "subset_graph.h"

/*
 * "b.r1 OPERATOR(...) a.c1 AND ..." for key k, b its table, a the referrer;
 * for a relationship with a condition, only where it holds of a, if
 * with_condition.
 */
static char *
sbx_key_match_ext(const SbxKey *key, const char *b, const char *a, bool with_condition)
{
	StringInfoData buf;
	ListCell   *lc1,
			   *lc2,
			   *lc3;

	initStringInfo(&buf);
	forthree(lc1, key->cols, lc2, key->refcols, lc3, key->ops)
		appendStringInfo(&buf, "%s%s.%s %s %s.%s", buf.len > 0 ? " AND " : "",
						 b, (char *) lfirst(lc2), (char *) lfirst(lc3), a, (char *) lfirst(lc1));
	/* a key of one partition joins that partition's rows only */
	if (OidIsValid(key->from_leaf))
		appendStringInfo(&buf, " AND %s.tableoid = %u", a, key->from_leaf);
	if (OidIsValid(key->to_leaf))
		appendStringInfo(&buf, " AND %s.tableoid = %u", b, key->to_leaf);
	if (with_condition && key->relation && key->relation->condition)
		appendStringInfo(&buf, " AND %s",
						 sbx_relation_condition(key->relation->condition,
												key->relation->table, a));
	return buf.data;
}

char *
sbx_key_match(const SbxKey *key, const char *b, const char *a)
{
	return sbx_key_match_ext(key, b, a, true);
}

/* The same, without a relationship's condition. */
char *
sbx_key_match_plain(const SbxKey *key, const char *b, const char *a)
{
	return sbx_key_match_ext(key, b, a, false);
}

/*
 * For a relationship: row a refers through it (no column is NULL, and
 * its condition holds), to a row or to none (dangling).
 */
char *
sbx_key_refers(const SbxKey *key, const char *a)
{
	if (key->relation->condition == NULL)
		return psprintf("NOT (%s)", sbx_key_nulls(key, a));
	return psprintf("NOT (%s) AND %s", sbx_key_nulls(key, a),
					sbx_relation_condition(key->relation->condition,
										   key->relation->table, a));
}

/* "a.c1 IS NULL OR a.c2 IS NULL" for key k */
char *
sbx_key_nulls(const SbxKey *key, const char *a)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	/* a key of one partition says nothing of the other partitions' rows */
	if (OidIsValid(key->from_leaf))
		appendStringInfo(&buf, "%s.tableoid <> %u", a, key->from_leaf);
	foreach(lc, key->cols)
		appendStringInfo(&buf, "%s%s.%s IS NULL", buf.len > 0 ? " OR " : "", a, (char *) lfirst(lc));
	return buf.data;
}

/*
 * For a relationship: row a refers to no row of the source through it
 * (its condition does not hold, or its reference dangles); "false" for a
 * key, which the source checks.
 */
char *
sbx_key_dangles(const SbxKey *key, const char *a)
{
	if (key->relation == NULL)
		return pstrdup("false");
	return psprintf("NOT EXISTS (SELECT FROM %s sbx_d WHERE %s)", key->to_sql,
					sbx_key_match(key, "sbx_d", a));
}

/* A row a that refers to nothing through key k. */
char *
sbx_key_null(const SbxKey *key, const char *a)
{
	if (key->relation == NULL)
		return sbx_key_nulls(key, a);
	return psprintf("%s OR %s", sbx_key_nulls(key, a), sbx_key_dangles(key, a));
}

/*
 * For a relationship: row a refers through it, and to no row of the
 * source: a dangling reference.
 */
char *
sbx_key_dangling_rows(const SbxKey *key, const char *a)
{
	return psprintf("%s AND NOT EXISTS (SELECT FROM %s sbx_d WHERE %s)",
					sbx_key_refers(key, a), key->to_sql,
					sbx_key_match_ext(key, "sbx_d", a, false));
}

/*
 * The hash function of the default hash operator class of a one-column
 * primary key's type, for the types whose function is the server's own
 * and hashes the value itself; NULL for others (the key's text is hashed).
 * The OIDs of built-in types are the same on every server.
 */
const char *
sbx_key_hash_function(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return "pg_catalog.hashint2";
		case INT4OID:
			return "pg_catalog.hashint4";
		case INT8OID:
			return "pg_catalog.hashint8";
		case TEXTOID:
		case VARCHAROID:
			return "pg_catalog.hashtext";
		case UUIDOID:
			return "pg_catalog.uuid_hash";
		default:
			return NULL;
	}
}

/*
 * The FROM item of a seed's rows.  A condition reads the table by its own
 * name; a share reads it as sbx_s.  A share of pages samples the table's
 * pages, the same pages for the same table on disk.
 */
char *
sbx_seed_from(const SbxNode *node)
{
	bool		of_pages;
	int64		share = sbx_subset_share(node->seed->condition, &of_pages);

	if (share < 0)
		return node->from;
	if (of_pages)
		return psprintf("%s sbx_s TABLESAMPLE SYSTEM (" INT64_FORMAT ".%04d) REPEATABLE (0)",
						node->from, share / 10000, (int) (share % 10000));
	return psprintf("%s sbx_s", node->from);
}

/* The WHERE clause of the rows a seed's rule chooses, from sbx_seed_from. */
char *
sbx_seed_where(const SbxNode *node)
{
	bool		of_pages;
	int64		share = sbx_subset_share(node->seed->condition, &of_pages);
	char	   *hashed;

	if (share < 0)
		return psprintf(SBX_MASK_EXPR_FORMAT, node->seed->condition);
	if (of_pages)
		return pstrdup("true");

	/*
	 * A stable choice: the same rows for the same keys, whatever their order
	 * on disk, by the server's own hash of a one-column key's value, or of
	 * the key's text (of the whole row without a key; of the unmasked
	 * columns where a mask covers the key's, see sbx_share_columns).
	 */
	if (node->share_columns)
		hashed = psprintf("pg_catalog.hashtext(ROW(%s)::pg_catalog.text)", node->share_columns);
	else if (node->pkey && node->pkey_hash)
		hashed = psprintf("%s(sbx_s.%s)", node->pkey_hash, node->pkey);
	else
		hashed = psprintf("pg_catalog.hashtext(%s::pg_catalog.text)",
						  node->pkey ? psprintf("ROW(%s)", node->pkey) : "ROW(sbx_s.*)");
	return psprintf("((%s::pg_catalog.int8 OPERATOR(pg_catalog.&) 4294967295)"
					" OPERATOR(pg_catalog.%%) 1000000) OPERATOR(pg_catalog.<) " INT64_FORMAT,
					hashed, share);
}
