/*-------------------------------------------------------------------------
 *
 * subset.c
 *	  The rows a reduced data clone keeps: the rows subset rules choose,
 *	  closed over the source's foreign keys so that every key holds in the
 *	  sandbox.
 *
 * Run by the clone worker's reader, in the snapshot that pg_dump then
 * dumps, after the masking rules are resolved (masking.c).  The source's
 * tables are sorted by how foreign keys tie them to the tables with a
 * subset rule (the seeds):
 *
 * - kept: the seeds, the tables with a follow rule, and every table a kept
 *   table refers to, transitively ("up").  Their rows are one closure,
 *   computed in rounds by subset_closure.c from the rows the seeds'
 *   conditions choose: each kept row brings the rows it refers to, and
 *   each kept row of a table a follow rule names is brought by the kept
 *   row it refers to ("follow"), at most max_rows of them.
 * - down: a table that refers to a kept or down table, and is neither.  It
 *   keeps the rows whose every reference into those tables is NULL or to a
 *   kept row.  A down table that refers to itself by one key keeps the
 *   rows reached from its roots.  In a cycle of down tables one keeps no
 *   row, and so does one with several keys into itself (the event says so).
 * - excluded: a table exclude_data() leaves empty; a down table keeps no row
 *   that refers to it.  A kept table may not refer to it: that is an error.
 * - whole: every other table, copied as it is (no key ties it to a reduced
 *   table, so no key can break).
 *
 * Rows are named by (tableoid, ctid), which the reader's repeatable-read
 * transaction keeps stable: every reduced table is locked against the
 * rewrites that would move them.  The kept tables' ctids come from the
 * rounds, the down tables' from one query, a cursor; they are kept by
 * table, in chunks.  Each reduced table is left
 * out of pg_dump's archive and filled by the reader's COPY of its kept
 * rows (TID scans, a chunk at a time), between the restore's data and
 * post-data sections, where the foreign keys are created and checked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "libpq-fe.h"
#include "pgstat.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "subset_graph.h"


static SbxNode *
sbx_node(HTAB *nodes, Oid relid)
{
	return hash_search(nodes, &relid, HASH_FIND, NULL);
}

/* The source's tables that may hold rows, by OID. */
static HTAB *
sbx_read_nodes(SbxMasking *m, List *excluded_oids)
{
	HASHCTL		ctl;
	HTAB	   *nodes;
	PGresult   *res;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(SbxNode);
	ctl.hcxt = CurrentMemoryContext;
	nodes = hash_create("pgsandbox subset tables", 256, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	res = sbx_reader_exec(m,
						  "SELECT c.oid, n.nspname, c.relname, c.relkind = 'p',"
						  "       EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
						  "                WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
						  "                  AND d.objid = c.oid AND d.deptype = 'e'),"
						  "       (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', '"
						  "                                     ORDER BY pg_catalog.array_position(i.indkey::pg_catalog.int2[], a.attnum))"
						  "          FROM pg_catalog.pg_index i"
						  "          JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid"
						  "                                        AND a.attnum = ANY (i.indkey)"
						  "         WHERE i.indrelid = c.oid AND i.indisprimary),"
						  "       (SELECT a.atttypid"
						  "          FROM pg_catalog.pg_index i"
						  "          JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid"
						  "                                        AND a.attnum = i.indkey[0]"
						  "         WHERE i.indrelid = c.oid AND i.indisprimary AND i.indnkeyatts = 1)"
						  "  FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  " WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition"
						  "   AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'",
						  0, NULL, PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
	{
		Oid			relid = atooid(PQgetvalue(res, i, 0));
		SbxNode    *node = hash_search(nodes, &relid, HASH_ENTER, NULL);
		char	   *sql_name = sbx_remote_quote_qualified(PQgetvalue(res, i, 1),
														  PQgetvalue(res, i, 2));

		node->schema = pstrdup(PQgetvalue(res, i, 1));
		node->table = pstrdup(PQgetvalue(res, i, 2));
		node->partitioned = PQgetvalue(res, i, 3)[0] == 't';
		node->from = node->partitioned ? sql_name : psprintf("ONLY %s", sql_name);
		node->extension = PQgetvalue(res, i, 4)[0] == 't';
		node->pkey = PQgetisnull(res, i, 5) ? NULL : pstrdup(PQgetvalue(res, i, 5));
		node->pkey_hash = PQgetisnull(res, i, 6) ? NULL :
			sbx_key_hash_function(atooid(PQgetvalue(res, i, 6)));
		node->cls = list_member_oid(excluded_oids, relid) ? SBX_NODE_EXCLUDED : SBX_NODE_WHOLE;
		node->seed = node->follow = NULL;
		node->masked_columns = NIL;
		node->share_columns = NULL;
		node->out = NIL;
		node->ordered = node->keeps_none = false;
	}
	PQclear(res);
	return nodes;
}

/* a partition that holds rows, and the partitioned table at its top */
typedef struct SbxPartition
{
	Oid			relid;
	Oid			root;
	bool		leaf;			/* it holds rows (not partitioned itself) */
	char	   *from;			/* ONLY the partition, for FROM */
} SbxPartition;

/*
 * The table at one end of a key, relid: the table itself, or, for a
 * partition, its partitioned table, *relid then naming the partition (else
 * InvalidOid).  A key on a partition that is itself partitioned is marked
 * unsupported.
 */
static SbxNode *
sbx_key_end(HTAB *nodes, List *partitions, Oid *relid, char **from, bool *unsupported)
{
	SbxNode    *node = sbx_node(nodes, *relid);
	ListCell   *lc;

	if (node != NULL)
	{
		*relid = InvalidOid;
		*from = node->from;
		return node;
	}
	foreach(lc, partitions)
	{
		SbxPartition *part = lfirst(lc);

		if (part->relid != *relid)
			continue;
		/* refused later, if it ties a reduced table (sbx_check_keys) */
		if (!part->leaf)
			*unsupported = true;
		*from = part->from;
		return sbx_node(nodes, part->root);
	}
	return NULL;
}

/*
 * The foreign keys between those tables, one row per column.  A key
 * declared on a partition alone ties no table here and is refused if it
 * touches a reduced one (sbx_check_partition_keys).
 */
static void
sbx_read_keys(SbxMasking *m, HTAB *nodes)
{
	PGresult   *res;
	Oid			last = InvalidOid;
	SbxKey	   *key = NULL;
	List	   *partitions = NIL;	/* SbxPartition */

	/* the partitions (that hold rows) of every partitioned table */
	res = sbx_reader_exec(m,
						  "WITH RECURSIVE up(relid, root) AS ("
						  "  SELECT c.oid, c.oid FROM pg_catalog.pg_class c"
						  "   WHERE c.relkind = 'p' AND NOT c.relispartition"
						  "  UNION ALL"
						  "  SELECT i.inhrelid, up.root FROM pg_catalog.pg_inherits i"
						  "    JOIN up ON i.inhparent = up.relid)"
						  " SELECT up.relid, up.root, c.relkind, n.nspname, c.relname FROM up"
						  "   JOIN pg_catalog.pg_class c ON c.oid = up.relid"
						  "   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  "  WHERE up.relid <> up.root",
						  0, NULL, PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
	{
		SbxPartition *part = palloc(sizeof(SbxPartition));

		part->relid = atooid(PQgetvalue(res, i, 0));
		part->root = atooid(PQgetvalue(res, i, 1));
		part->leaf = PQgetvalue(res, i, 2)[0] == 'r';
		part->from = psprintf("ONLY %s", sbx_remote_quote_qualified(PQgetvalue(res, i, 3),
																	PQgetvalue(res, i, 4)));
		partitions = lappend(partitions, part);
	}
	PQclear(res);

	res = sbx_reader_exec(m,
						  psprintf("SELECT k.oid, k.conname, k.conrelid, k.confrelid,"
						  "       pg_catalog.quote_ident(a.attname), pg_catalog.quote_ident(b.attname),"
						  "       pg_catalog.format('OPERATOR(%%I.%%s)', on_.nspname, o.oprname),"
						  "       (SELECT pg_catalog.format('COLLATE %%I.%%I ', cn.nspname, co.collname)"
						  "          FROM pg_catalog.pg_collation co"
						  "          JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace"
						  "         WHERE co.oid = b.attcollation AND a.attcollation <> b.attcollation)"
						  "  FROM pg_catalog.pg_constraint k,"
						  "       LATERAL ROWS FROM (pg_catalog.unnest(k.conkey), pg_catalog.unnest(k.confkey),"
						  "                          pg_catalog.unnest(k.conpfeqop))"
						  "               WITH ORDINALITY u(c, f, op, i)"
						  "  JOIN pg_catalog.pg_attribute a ON a.attnum = u.c"
						  "  JOIN pg_catalog.pg_attribute b ON b.attnum = u.f"
						  "  JOIN pg_catalog.pg_operator o ON o.oid = u.op"
						  "  JOIN pg_catalog.pg_namespace on_ ON on_.oid = o.oprnamespace"
						  " WHERE k.contype = 'f' AND a.attrelid = k.conrelid AND b.attrelid = k.confrelid"
						  "%s ORDER BY k.oid, u.i",
								   /* a partition's copy of its table's key is that key */
								   PQserverVersion(m->reader) >= 110000 ? " AND k.conparentid = 0" : ""),
						  0, NULL, PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
	{
		Oid			oid = atooid(PQgetvalue(res, i, 0));

		if (oid != last)
		{
			Oid			from_leaf = atooid(PQgetvalue(res, i, 2));
			Oid			to_leaf = atooid(PQgetvalue(res, i, 3));
			char	   *from_sql;
			char	   *to_sql;
			bool		unsupported = false;
			SbxNode    *from = sbx_key_end(nodes, partitions, &from_leaf, &from_sql,
										   &unsupported);
			SbxNode    *to = sbx_key_end(nodes, partitions, &to_leaf, &to_sql, &unsupported);

			last = oid;
			key = NULL;
			/* a key between tables that hold no rows of their own */
			if (from == NULL || to == NULL)
				continue;
			key = palloc0(sizeof(SbxKey));
			key->name = pstrdup(PQgetvalue(res, i, 1));
			key->from = from;
			key->to = to;
			key->from_leaf = from_leaf;
			key->to_leaf = to_leaf;
			key->from_sql = from_sql;
			key->to_sql = to_sql;
			key->unsupported = unsupported;
			from->out = lappend(from->out, key);
		}
		if (key == NULL)
			continue;
		key->cols = lappend(key->cols, pstrdup(PQgetvalue(res, i, 4)));
		key->refcols = lappend(key->refcols, pstrdup(PQgetvalue(res, i, 5)));
		/*
		 * Columns of different collations compare in the referenced
		 * column's, as the key's own checks do: "COLLATE x OPERATOR(...)"
		 */
		key->ops = lappend(key->ops, psprintf("%s%s", PQgetvalue(res, i, 7),
											  PQgetvalue(res, i, 6)));
	}
	PQclear(res);
}

/*
 * Whether a key ties its referring rows to the rows its table keeps.  A
 * relationship into a table whose rows exclude_data() leaves out does not:
 * no constraint checks it, so its references are left to dangle.
 */
static bool
sbx_key_binds(const SbxKey *key)
{
	return !(key->relation && key->to->cls == SBX_NODE_EXCLUDED);
}

/* The table of the source named schema.table, or NULL. */
static SbxNode *
sbx_named_node(HTAB *nodes, const char *schema, const char *table)
{
	HASH_SEQ_STATUS seq;
	SbxNode    *node;

	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		if (strcmp(node->schema, schema) == 0 && strcmp(node->table, table) == 0)
		{
			hash_seq_term(&seq);
			return node;
		}
	}
	return NULL;
}

/*
 * A relationship's condition, checked again as when it was set (within
 * what its author may use), and no column it uses masked.
 */
static void
sbx_check_relation(SbxMasking *m, const SbxSubsetRule *rule)
{
	ListCell   *lc;

	if (rule->condition && !rule->trusted)
		sbx_check_rule_rights(rule->condition, SBX_RELATION_CONDITION);
	foreach(lc, m->masked)
	{
		SbxMaskedTable *table = lfirst(lc);
		ListCell   *lr;

		foreach(lr, table->rules)
		{
			SbxMaskRule *mask = lfirst(lr);

			if (sbx_relation_uses(rule, mask->schema, mask->table, mask->column, mask->key))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("relationship \"%s\" of source \"%s\" uses masked column \"%s\" of %s",
								rule->target, m->source, mask->column,
								quote_qualified_identifier(mask->schema, mask->table)),
						 errdetail("Masked values would no longer match the rows that refer to them, and the rows kept would tell the values of a masked column."),
						 errhint("Remove one of the two rules.")));
		}
	}
}

/*
 * The relationships relate() declared, as keys: both tables must still be
 * there, and the referred columns still unique (sbx_resolve_relation).
 */
static void
sbx_read_relations(SbxMasking *m, HTAB *nodes, List *subsets)
{
	ListCell   *lc;

	foreach(lc, subsets)
	{
		SbxSubsetRule *rule = lfirst(lc);
		SbxNode    *from;
		SbxNode    *to;
		SbxKey	   *key;
		PGresult   *res;

		if (!rule->relation)
			continue;
		from = sbx_named_node(nodes, rule->schema, rule->table);
		to = sbx_named_node(nodes, rule->ref_schema, rule->ref_table);
		if (from == NULL || to == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relationship \"%s\" of source \"%s\" names a table the source no longer has",
							rule->target, m->source),
					 errhint("Remove the rule with unrelate(), or set it again.")));
		sbx_check_relation(m, rule);
		res = sbx_resolve_relation(m->reader, m->source, rule);
		key = palloc0(sizeof(SbxKey));
		key->name = rule->target;
		key->from = from;
		key->to = to;
		key->from_leaf = key->to_leaf = InvalidOid;
		key->from_sql = from->from;
		key->to_sql = to->from;
		key->relation = rule;
		for (int i = 0; i < PQntuples(res); i++)
		{
			key->cols = lappend(key->cols, pstrdup(PQgetvalue(res, i, 4)));
			key->refcols = lappend(key->refcols, pstrdup(PQgetvalue(res, i, 5)));
			key->ops = lappend(key->ops, psprintf("%s%s", PQgetvalue(res, i, 9),
												  PQgetvalue(res, i, 8)));
		}
		PQclear(res);
		from->out = lappend(from->out, key);
	}
}

/* The table a rule names, which must still be one of those above. */
static SbxNode *
sbx_rule_node(SbxMasking *m, HTAB *nodes, const SbxSubsetRule *rule)
{
	SbxNode    *node = sbx_named_node(nodes, rule->schema, rule->table);

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s rule \"%s\" of source \"%s\" names a table the source no longer has",
						rule->follow ? "follow" : "subset", rule->target, m->source),
				 errhint("Remove the rule with %s(), or set it again.",
						 rule->follow ? "unfollow" : "unsubset")));
	return node;
}

/*
 * A subset condition, checked again as when it was set: within what its
 * author may use, and naming no masked column.
 */
static void
sbx_check_condition(SbxMasking *m, const SbxSubsetRule *rule)
{
	ListCell   *lc;

	if (sbx_subset_share(rule->condition, NULL) >= 0)
		return;
	if (!rule->trusted)
		sbx_check_rule_rights(rule->condition, "subset condition");
	foreach(lc, m->masked)
	{
		SbxMaskedTable *table = lfirst(lc);
		ListCell   *lr;

		foreach(lr, table->rules)
		{
			SbxMaskRule *mask = lfirst(lr);
			ListCell   *lcol;

			if (strcmp(mask->schema, rule->schema) != 0 || strcmp(mask->table, rule->table) != 0)
				continue;
			foreach(lcol, sbx_condition_columns(rule->condition))
			{
				if (sbx_condition_name_reads(lfirst(lcol), rule->table, mask->column))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("subset condition of \"%s\" of source \"%s\" names masked column \"%s\"",
									rule->target, m->source, mask->column),
							 errdetail("The rows a condition keeps would tell the values of a masked column."),
							 errhint("Remove one of the two rules.")));
			}
		}
	}
}

/*
 * Sort the tables: the seeds and followed tables are kept, and every table
 * a kept table refers to; then the tables that refer to reduced ones go
 * down.  Returns whether there is a seed.
 */
static bool
sbx_classify(SbxMasking *m, HTAB *nodes, List *subsets)
{
	List	   *queue = NIL;
	bool		seeded = false;
	bool		changed = true;
	ListCell   *lc;
	HASH_SEQ_STATUS seq;
	SbxNode    *node;

	foreach(lc, subsets)
	{
		SbxSubsetRule *rule = lfirst(lc);

		if (rule->relation)
			continue;
		node = sbx_rule_node(m, nodes, rule);
		if (node->cls == SBX_NODE_EXCLUDED)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("table \"%s\" of source \"%s\" has a %s rule, and exclude_data leaves its rows out",
							rule->target, m->source, rule->follow ? "follow" : "subset"),
					 errhint("Remove one of the two rules.")));
		if (rule->follow)
			node->follow = rule;
		else
		{
			sbx_check_condition(m, rule);
			node->seed = rule;
			seeded = true;
		}
		if (node->cls != SBX_NODE_KEPT)
			queue = lappend(queue, node);
		node->cls = SBX_NODE_KEPT;
	}
	if (!seeded)
		return false;

	/* up: what kept rows refer to is kept */
	while (queue != NIL)
	{
		node = linitial(queue);
		queue = list_delete_first(queue);
		foreach(lc, node->out)
		{
			SbxKey	   *key = lfirst(lc);

			if (!sbx_key_binds(key))
				continue;
			if (key->to->cls == SBX_NODE_EXCLUDED)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("rows kept of table %s of source \"%s\" refer to table %s, whose rows exclude_data leaves out",
								quote_qualified_identifier(node->schema, node->table), m->source,
								quote_qualified_identifier(key->to->schema, key->to->table)),
						 errdetail("Foreign key \"%s\" would not hold.", key->name),
						 errhint("Remove the exclude_data rule, or the subset or follow rule.")));
			/* an extension's rows are copied as it keeps them, all of them */
			if (key->to->cls == SBX_NODE_WHOLE && !key->to->extension)
			{
				key->to->cls = SBX_NODE_KEPT;
				queue = lappend(queue, key->to);
			}
		}
	}

	/* down: what refers to reduced tables is reduced */
	while (changed)
	{
		changed = false;
		hash_seq_init(&seq, nodes);
		while ((node = hash_seq_search(&seq)) != NULL)
		{
			if (node->cls != SBX_NODE_WHOLE || node->extension)
				continue;
			foreach(lc, node->out)
			{
				SbxKey	   *key = lfirst(lc);

				if (key->to->cls != SBX_NODE_WHOLE && sbx_key_binds(key))
				{
					node->cls = SBX_NODE_DOWN;
					changed = true;
					break;
				}
			}
		}
	}
	return true;
}

/* A down table's condition on its keys into other reduced tables. */
static char *
sbx_down_condition(const SbxNode *node)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoString(&buf, node->keeps_none ? "false" : "true");
	foreach(lc, node->out)
	{
		SbxKey	   *key = lfirst(lc);

		if (key->to == node || key->to->cls == SBX_NODE_WHOLE || !sbx_key_binds(key))
			continue;
		if (key->to->cls == SBX_NODE_EXCLUDED)
			appendStringInfo(&buf, " AND (%s)", sbx_key_null(key, "x"));
		else

			/*
			 * A row whose references are NULL, to a kept row, or, for a
			 * relationship, to no row of the source (it dangles, or its
			 * condition does not hold): that last probe is made only for
			 * the rows the first finds no kept row for.  (One probe for
			 * both, "no referred row but a kept one", plans as an anti-join
			 * against the kept rows that the server may rescan whole for
			 * every row.)
			 */
			appendStringInfo(&buf, " AND (%s OR EXISTS (SELECT FROM %s p WHERE %s"
							 " AND (p.tableoid, p.ctid) IN (SELECT leaf, tid FROM sbx_k_%u))"
							 "%s%s)",
							 sbx_key_nulls(key, "x"), key->to_sql,
							 sbx_key_match(key, "p", "x"), key->to->relid,
							 key->relation ? " OR " : "",
							 key->relation ? sbx_key_dangles(key, "x") : "");
	}
	return buf.data;
}

/*
 * Whether down table 'node' can be written now: every down table it
 * refers to, but itself, is.
 */
static bool
sbx_down_ready(const SbxNode *node)
{
	ListCell   *lc;

	foreach(lc, node->out)
	{
		SbxKey	   *key = lfirst(lc);

		if (key->to != node && key->to->cls == SBX_NODE_DOWN && !key->to->ordered)
			return false;
	}
	return true;
}

/* Write one down table's CTE: recursive over its one key into itself. */
static void
sbx_write_down(SbxMasking *m, StringInfo with, SbxNode *node)
{
	SbxKey	   *self = NULL;
	int			nself = 0;
	ListCell   *lc;
	char	   *cond;

	foreach(lc, node->out)
	{
		if (((SbxKey *) lfirst(lc))->to == node)
		{
			self = lfirst(lc);
			nself++;
		}
	}
	if (nself > 1 && !node->keeps_none)
	{
		node->keeps_none = true;
		m->notes = lappend(m->notes,
						   psprintf("%s keeps no row (several keys into itself)",
									quote_qualified_identifier(node->schema, node->table)));
	}
	cond = sbx_down_condition(node);
	if (self == NULL || node->keeps_none)
		appendStringInfo(with, ", sbx_k_%u(leaf, tid) AS (SELECT x.tableoid, x.ctid FROM %s x WHERE %s)",
						 node->relid, node->from, cond);
	else
		appendStringInfo(with, ", sbx_k_%u(leaf, tid) AS ("
						 "SELECT x.tableoid, x.ctid FROM %s x WHERE %s AND (%s)"
						 " UNION SELECT x.tableoid, x.ctid FROM sbx_k_%u r"
						 " JOIN %s p ON p.tableoid = r.leaf AND p.ctid = r.tid"
						 " JOIN %s x ON %s WHERE %s)",
						 node->relid, node->from, cond, sbx_key_null(self, "x"),
						 node->relid, node->from, node->from,
						 sbx_key_match(self, "p", "x"), cond);
	node->ordered = true;
}

/* A down table in a cycle, found by walking from 'node' along what it waits for. */
static SbxNode *
sbx_down_in_cycle(SbxNode *node)
{
	List	   *walked = NIL;

	while (!list_member_ptr(walked, node))
	{
		ListCell   *lc;

		walked = lappend(walked, node);
		foreach(lc, node->out)
		{
			SbxKey	   *key = lfirst(lc);

			if (key->to != node && key->to->cls == SBX_NODE_DOWN && !key->to->ordered)
			{
				node = key->to;
				break;
			}
		}
	}
	list_free(walked);
	return node;
}

/*
 * The down tables' CTEs, each after those it refers to.  Tables in a cycle
 * of down tables keep no row: whatever refers to them then waits for none.
 */
static void
sbx_write_down_tables(SbxMasking *m, StringInfo with, HTAB *nodes)
{
	for (;;)
	{
		HASH_SEQ_STATUS seq;
		SbxNode    *node;
		bool		progress = false;
		bool		left = false;

		hash_seq_init(&seq, nodes);
		while ((node = hash_seq_search(&seq)) != NULL)
		{
			if (node->cls != SBX_NODE_DOWN || node->ordered)
				continue;
			if (sbx_down_ready(node))
			{
				sbx_write_down(m, with, node);
				progress = true;
			}
			else
				left = true;
		}
		if (!left)
			return;
		if (progress)
			continue;
		/*
		 * Every table left waits for another: walk from one along what it
		 * waits for until a table comes back, which is in a cycle.  It keeps
		 * no row, and the rest can follow.
		 */
		hash_seq_init(&seq, nodes);
		while ((node = hash_seq_search(&seq)) != NULL)
		{
			if (node->cls == SBX_NODE_DOWN && !node->ordered)
			{
				hash_seq_term(&seq);
				break;
			}
		}
		node = sbx_down_in_cycle(node);
		node->keeps_none = true;
		m->notes = lappend(m->notes,
						   psprintf("%s keeps no row (in a cycle of keys that no rule reaches)",
									quote_qualified_identifier(node->schema, node->table)));
		/* written with no condition on the others, which may then follow */
		appendStringInfo(with, ", sbx_k_%u(leaf, tid) AS (SELECT x.tableoid, x.ctid FROM %s x WHERE false)",
						 node->relid, node->from);
		node->ordered = true;
	}
}

/* No key that ties a reduced table may be one this file cannot follow. */
static void
sbx_check_keys(SbxMasking *m, HTAB *nodes)
{
	HASH_SEQ_STATUS seq;
	SbxNode    *node;

	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		ListCell   *lc;

		foreach(lc, node->out)
		{
			SbxKey	   *key = lfirst(lc);

			if (key->unsupported &&
				(key->from->cls != SBX_NODE_WHOLE || key->to->cls != SBX_NODE_WHOLE))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("foreign key \"%s\" of source \"%s\" is declared on a partition that is partitioned itself, and ties a reduced table",
								key->name, m->source),
						 errdetail("A reduced clone follows keys of tables, and of partitions that hold rows.")));
		}
	}
}

/*
 * A seed's condition may read no column that a mask covers in one of its
 * leaves, whichever table (the leaf, a parent) the mask was set on.
 */
static void
sbx_check_leaf_masks(SbxMasking *m, SbxNode *node, const SbxMaskedTable *leaf)
{
	ListCell   *lr;

	foreach(lr, leaf->rules)
		node->masked_columns = list_append_unique(node->masked_columns,
												  makeString(((SbxMaskRule *) lfirst(lr))->column));
	if (sbx_subset_share(node->seed->condition, NULL) >= 0)
		return;
	foreach(lr, leaf->rules)
	{
		SbxMaskRule *mask = lfirst(lr);
		ListCell   *lc;

		foreach(lc, sbx_condition_columns(node->seed->condition))
		{
			if (sbx_condition_name_reads(lfirst(lc), node->table, mask->column))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("subset condition of \"%s\" of source \"%s\" reads masked column \"%s\" of %s",
								node->seed->target, m->source, mask->column, leaf->qualified),
						 errdetail("The rows a condition keeps would tell the values of a masked column."),
						 errhint("Remove one of the two rules.")));
		}
	}
}

/*
 * A share of rows chooses them by a hash of their key, or of the whole
 * row without one.  The rows kept would then tell something of the values
 * hashed: where a mask covers a column of the key, or the table has no
 * key and a mask, the share hashes the columns no mask covers, and is
 * refused if there is none.  Changing a masked value on the source then
 * changes no choice.
 */
static void
sbx_share_columns(SbxMasking *m, SbxNode *node)
{
	bool		of_pages;
	bool		key_masked = (node->pkey == NULL);
	char		relid[16];
	const char *params[1] = {relid};
	PGresult   *res;
	StringInfoData cols;
	ListCell   *lc;

	if (node->masked_columns == NIL ||
		sbx_subset_share(node->seed->condition, &of_pages) < 0 || of_pages)
		return;
	snprintf(relid, sizeof(relid), "%u", node->relid);
	res = sbx_reader_exec(m,
						  "SELECT a.attname, a.attnum = ANY (COALESCE(i.indkey::pg_catalog.int2[], '{}'))"
						  "  FROM pg_catalog.pg_attribute a"
						  "  LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary"
						  " WHERE a.attrelid = $1::pg_catalog.oid AND a.attnum > 0 AND NOT a.attisdropped"
						  " ORDER BY a.attnum",
						  1, params, PGRES_TUPLES_OK);
	initStringInfo(&cols);
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *column = PQgetvalue(res, i, 0);
		bool		masked = false;

		foreach(lc, node->masked_columns)
			masked |= strcmp(strVal(lfirst(lc)), column) == 0;
		if (masked)
		{
			key_masked |= PQgetvalue(res, i, 1)[0] == 't';
			continue;
		}
		appendStringInfo(&cols, "%ssbx_s.%s", cols.len > 0 ? ", " : "",
						 sbx_remote_quote_ident(column));
	}
	PQclear(res);
	if (!key_masked)
	{
		pfree(cols.data);
		return;
	}
	if (cols.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a share of the rows of table %s of source \"%s\" would read masked columns only",
						quote_qualified_identifier(node->schema, node->table), m->source),
				 errdetail("A share of rows hashes the table's key, or its columns without one; here masks cover every column it could hash."),
				 errhint("Use a share of pages (\'1%% of pages\') or a condition on an unmasked column.")));
	node->share_columns = cols.data;
}

/*
 * The reduced tables' leaves: the table itself, or a partitioned table's
 * partitions, each copied by the reader with the rows its CTE keeps.  Each
 * is locked, so that no rewrite moves its rows during the clone.
 */
static void
sbx_add_reduced_leaves(SbxMasking *m, HTAB *nodes, List *excluded_oids)
{
	HASH_SEQ_STATUS seq;
	SbxNode    *node;
	StringInfoData lock;

	initStringInfo(&lock);
	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		char		relid[16];
		const char *params[1] = {relid};
		PGresult   *res;

		if (node->cls != SBX_NODE_KEPT && node->cls != SBX_NODE_DOWN)
			continue;
		m->reduced_relids = lappend_oid(m->reduced_relids, node->relid);
		appendStringInfo(&lock, "%s%s", lock.len > 0 ? ", " : "LOCK TABLE ",
						 sbx_remote_quote_qualified(node->schema, node->table));
		snprintf(relid, sizeof(relid), "%u", node->relid);
		res = sbx_reader_exec(m,
							  "WITH RECURSIVE tree(relid) AS ("
							  "  VALUES ($1::pg_catalog.oid)"
							  "  UNION"
							  "  SELECT i.inhrelid FROM pg_catalog.pg_inherits i"
							  "    JOIN tree ON i.inhparent = tree.relid)"
							  " SELECT c.oid, n.nspname, c.relname, c.reltuples FROM tree"
							  "   JOIN pg_catalog.pg_class c ON c.oid = tree.relid"
							  "   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							  "  WHERE c.relkind = 'r'"
							  "    AND (c.oid = $1::pg_catalog.oid OR c.relispartition)",
							  1, params, PGRES_TUPLES_OK);
		for (int i = 0; i < PQntuples(res); i++)
		{
			SbxMaskedTable *table;

			/* kept rows may be there, or rows of down tables refer to them */
			if (list_member_oid(excluded_oids, atooid(PQgetvalue(res, i, 0))))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("exclude_data leaves out the rows of partition %s of table %s of source \"%s\", which subset rules reduce",
								quote_qualified_identifier(PQgetvalue(res, i, 1), PQgetvalue(res, i, 2)),
								quote_qualified_identifier(node->schema, node->table), m->source),
						 errhint("Remove the exclude_data rule, or the subset or follow rule.")));
			table = sbx_masked_table(m, atooid(PQgetvalue(res, i, 0)),
									 PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
			/* the masks of a seed's partitions, or of its parents, too */
			if (node->seed)
				sbx_check_leaf_masks(m, node, table);
			table->reduced = true;
			table->reduced_of = node->relid;
			table->estimate = strtod(PQgetvalue(res, i, 3), NULL);
			m->nreduced++;
		}
		PQclear(res);
		if (node->seed)
			sbx_share_columns(m, node);
	}
	if (lock.len > 0)
	{
		appendStringInfoString(&lock, " IN ACCESS SHARE MODE");
		PQclear(sbx_reader_exec(m, lock.data, 0, NULL, PGRES_COMMAND_OK));
	}
}

/*
 * Compute the down tables' kept rows, in the reader's snapshot, and keep
 * their ctids by table, in chunks (subset_closure.c's chunker).  The query
 * runs as a cursor, so that neither side holds every row at once; each
 * table's rows come in the order of their ctids.
 */
#define SBX_KEPT_FETCH	"50000"

static void
sbx_fetch_down_rows(SbxMasking *m, HTAB *nodes, const char *with)
{
	StringInfoData sql;
	HASH_SEQ_STATUS seq;
	SbxNode    *node;
	SbxChunker	chunker;
	bool		any = false;

	initStringInfo(&sql);
	appendStringInfo(&sql, "DECLARE sbx_kept_rows NO SCROLL CURSOR FOR %s SELECT k.leaf, k.tid FROM (", with);
	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		if (node->cls != SBX_NODE_DOWN)
			continue;
		appendStringInfo(&sql, "%sSELECT leaf, tid FROM sbx_k_%u", any ? " UNION ALL " : "",
						 node->relid);
		any = true;
	}
	if (!any)
		return;
	appendStringInfoString(&sql, ") k ORDER BY k.leaf, k.tid");
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: computing the rows a subset keeps");

	/*
	 * The query's estimates are high and its plan has many branches: JIT
	 * would spend a second compiling what runs in less.
	 */
	if (PQserverVersion(m->reader) >= 110000)
		PQclear(sbx_reader_exec(m, "SELECT pg_catalog.set_config('jit', 'off', true)",
								0, NULL, PGRES_TUPLES_OK));
	PQclear(sbx_reader_exec(m, sql.data, 0, NULL, PGRES_COMMAND_OK));
	sbx_chunker_init(&chunker, m);
	for (int64 total = 0;;)
	{
		PGresult   *res = sbx_reader_exec(m, "FETCH FORWARD " SBX_KEPT_FETCH " FROM sbx_kept_rows",
										  0, NULL, PGRES_TUPLES_OK);
		int			n = PQntuples(res);

		total += n;
		if (total > SBX_KEPT_MAX)
			sbx_kept_too_many(m);
		for (int i = 0; i < n; i++)
			sbx_chunker_add(&chunker, atooid(PQgetvalue(res, i, 0)), PQgetvalue(res, i, 1));
		PQclear(res);
		CHECK_FOR_INTERRUPTS();
		if (n == 0)
			break;
	}
	sbx_chunker_finish(&chunker);
	PQclear(sbx_reader_exec(m, "CLOSE sbx_kept_rows", 0, NULL, PGRES_COMMAND_OK));
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: dumping and restoring");
}

/*
 * Count the dangling references of the kept rows: through a relationship,
 * to no row of the source.  No constraint in the sandbox checks them, so
 * they are kept as they are, and the 'ready' event says how many.  Those
 * of kept tables were counted by the closure's rounds; a down table's kept
 * rows are read again here, a chunk at a time.
 */
static void
sbx_count_dangling(SbxMasking *m, HTAB *nodes)
{
	HASH_SEQ_STATUS seq;
	SbxNode    *node;

	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		ListCell   *lk;

		if (node->cls != SBX_NODE_KEPT && node->cls != SBX_NODE_DOWN)
			continue;
		foreach(lk, node->out)
		{
			SbxKey	   *key = lfirst(lk);
			char	   *dangling;
			int64		count;
			ListCell   *lt;

			/*
			 * Only into a reduced table, whose owner was checked before any
			 * query planned on it: a whole or excluded table is not.
			 */
			if (key->relation == NULL ||
				(key->to->cls != SBX_NODE_KEPT && key->to->cls != SBX_NODE_DOWN))
				continue;
			/* a kept table's, counted by the closure's rounds */
			count = key->dangling;
			dangling = sbx_key_dangling_rows(key, "a");
			foreach(lt, m->masked)
			{
				SbxMaskedTable *table = lfirst(lt);
				ListCell   *lc;

				if (node->cls != SBX_NODE_DOWN || !table->reduced ||
					table->reduced_of != node->relid)
					continue;
				foreach(lc, table->kept_chunks)
				{
					PGresult   *res;

					CHECK_FOR_INTERRUPTS();
					res = sbx_reader_exec(m,
										  psprintf("SELECT pg_catalog.count(*) FROM %s a"
												   " WHERE a.tableoid = %u"
												   "   AND a.ctid = ANY ('%s'::pg_catalog.tid[]) AND %s",
												   node->from, table->relid,
												   (char *) lfirst(lc), dangling),
										  0, NULL, PGRES_TUPLES_OK);
					count += strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
					PQclear(res);
				}
			}
			if (count > 0)
				m->notes = lappend(m->notes,
								   psprintf("relationship %s: " INT64_FORMAT " kept row%s refer%s to no row of the source",
											key->name, count, count == 1 ? "" : "s",
											count == 1 ? "s" : ""));
			pfree(dangling);
		}
	}
}

/*
 * Resolve the subset rules in the reader's snapshot: sort the source's
 * tables and have the reader copy every reduced table, whose rows
 * sbx_subset_compute then finds.  Without a subset rule (follow rules
 * alone), nothing is reduced.
 */
void
sbx_subset_resolve(SbxMasking *m, List *subsets, List *excluded_oids)
{
	HTAB	   *nodes = sbx_read_nodes(m, excluded_oids);

	sbx_read_keys(m, nodes);
	sbx_read_relations(m, nodes, subsets);
	if (!sbx_classify(m, nodes, subsets))
	{
		hash_destroy(nodes);
		return;
	}
	sbx_check_keys(m, nodes);
	/* locked before any row is read */
	sbx_add_reduced_leaves(m, nodes, excluded_oids);
	m->subset_nodes = nodes;
}

/*
 * Find the rows a reduced clone keeps, in the reader's snapshot: the kept
 * tables' closure, then the down tables' rows.  The clone worker calls it
 * while pg_dump runs, in the same snapshot, on its own connection.
 */
void
sbx_subset_compute(SbxMasking *m)
{
	HTAB	   *nodes = m->subset_nodes;
	StringInfoData with;

	if (nodes == NULL)
		return;
	initStringInfo(&with);
	appendStringInfoString(&with, "WITH RECURSIVE sbx_start AS (SELECT)");
	sbx_closure_compute(m, nodes, &with);
	sbx_write_down_tables(m, &with, nodes);
	sbx_fetch_down_rows(m, nodes, with.data);
	sbx_count_dangling(m, nodes);
	pfree(with.data);
	hash_destroy(nodes);
	m->subset_nodes = NULL;
}

/* What the subset did, for the 'ready' event: rows kept of each table. */
char *
sbx_subset_summary(const SbxMasking *m)
{
	StringInfoData buf;
	ListCell   *lc;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfo(&buf, "reduced %d table%s (rows kept of the source's estimate):",
					 m->nreduced, m->nreduced == 1 ? "" : "s");
	foreach(lc, m->masked)
	{
		SbxMaskedTable *table = lfirst(lc);

		if (table->reduced)
			appendStringInfo(&buf, "%s %s " INT64_FORMAT " of ~%.0f", first ? "" : ",",
							 table->qualified, table->rows, Max(table->estimate, 0));
		first &= !table->reduced;
	}
	foreach(lc, m->notes)
		appendStringInfo(&buf, "; %s", (char *) lfirst(lc));
	return buf.data;
}
