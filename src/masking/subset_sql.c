/*-------------------------------------------------------------------------
 *
 * subset_sql.c
 *	  The SQL a reduced clone sends its source about a foreign key (a join
 *	  of its two ends, its rows that refer to nothing) and about a seed's
 *	  rule (the WHERE clause of the rows it chooses).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgsandbox.h"
#include "sbx_conn.h"
#include "sbx_masking.h"

#include "subset_graph.h"

/* "b.r1 OPERATOR(...) a.c1 AND ..." for key k, b its table, a the referrer */
char *
sbx_key_match(const SbxKey *key, const char *b, const char *a)
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
	return buf.data;
}

/* "a.c1 IS NULL OR a.c2 IS NULL" for key k: a row that refers to nothing */
char *
sbx_key_null(const SbxKey *key, const char *a)
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

/* The WHERE clause of the rows a seed's rule chooses. */
char *
sbx_seed_where(const SbxNode *node)
{
	int64		share = sbx_subset_share(node->seed->condition);
	char	   *where;

	if (share < 0)
		where = psprintf(SBX_MASK_EXPR_FORMAT, node->seed->condition);
	else
	{
		/*
		 * A stable choice: the same rows for the same keys, whatever their
		 * order on disk, by the server's own hash of the key's text.
		 */
		where = psprintf("((pg_catalog.hashtext(%s::pg_catalog.text)::pg_catalog.int8"
						 " OPERATOR(pg_catalog.&) 4294967295) OPERATOR(pg_catalog.%%) 1000000)"
						 " OPERATOR(pg_catalog.<) " INT64_FORMAT,
						 node->pkey ? psprintf("ROW(%s)", node->pkey) : "ROW(sbx_s.*)",
						 share);
	}
	return where;
}
