/*-------------------------------------------------------------------------
 *
 * subset_closure.c
 *	  The rows of a reduced clone's kept tables, computed in rounds by the
 *	  clone worker from the reader's snapshot, and the kept rows' ctids cut
 *	  into the chunks that the reader's COPYs read.
 *
 * The closure starts from the rows the seeds' rules choose.  Each round
 * takes the rows found in the round before, table by table and a chunk of
 * ctids at a time, and asks the source, in one set-based query per key,
 * for what they bring in: the rows they refer to (up), and, for a followed
 * table, its rows that refer to them (follow, at most max_rows, in ctid
 * order).  It ends when a round finds nothing new.  The worker keeps every
 * kept row's (table, tableoid, ctid) in a hash table.
 *
 * The down tables (subset.c) then need the kept rows of the tables they
 * refer to: those are handed to the source as arrays, in CTEs named
 * sbx_k_<oid>.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "pgstat.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"

#include "subset_graph.h"

/* ctids in one chunk of a COPY, and in one array of a round's query */
#define SBX_KEPT_CHUNK	20000



/* ------------------------------------------------------------------------
 * Chunks of ctids, by table
 * ------------------------------------------------------------------------
 */

pg_noreturn void
sbx_kept_too_many(SbxMasking *m)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the subset rules of source \"%s\" keep more than %d rows",
					m->source, SBX_KEPT_MAX),
			 errdetail("A reduced clone holds the ctid of every row it keeps in memory."),
			 errhint("Choose a smaller share or a narrower condition, bound the followed tables with max_rows, or make a full data clone.")));
}

void
sbx_chunker_init(SbxChunker *c, SbxMasking *m)
{
	c->m = m;
	c->leaf = InvalidOid;
	c->table = NULL;
	initStringInfo(&c->buf);
	c->n = 0;
}

static void
sbx_chunker_close(SbxChunker *c)
{
	if (c->table == NULL || c->n == 0)
		return;
	appendStringInfoChar(&c->buf, '}');
	c->table->kept_chunks = lappend(c->table->kept_chunks, pstrdup(c->buf.data));
	resetStringInfo(&c->buf);
	c->n = 0;
}

/* Add the ctid (as text) of a kept row of leaf table 'leaf'. */
void
sbx_chunker_add(SbxChunker *c, Oid leaf, const char *tid)
{
	if (c->leaf != leaf)
	{
		ListCell   *lc;

		sbx_chunker_close(c);
		c->leaf = leaf;
		c->table = NULL;
		foreach(lc, c->m->masked)
		{
			SbxMaskedTable *table = lfirst(lc);

			if (table->relid == leaf && table->reduced)
				c->table = table;
		}
	}
	else if (c->n == SBX_KEPT_CHUNK)
		sbx_chunker_close(c);
	if (c->table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a partition of a reduced table of source \"%s\" (OID %u) was attached during the clone",
						c->m->source, leaf),
				 errhint("Clone again once the source's partitions stay put.")));
	appendStringInfo(&c->buf, "%s\"%s\"", c->n++ > 0 ? "," : "{", tid);
}

void
sbx_chunker_finish(SbxChunker *c)
{
	sbx_chunker_close(c);
	pfree(c->buf.data);
}

/* ------------------------------------------------------------------------
 * The closure
 * ------------------------------------------------------------------------
 */

/* a row of a kept table */
typedef struct SbxRow
{
	Oid			leaf;			/* its tableoid */
	ItemPointerData tid;
} SbxRow;

/* the hash key of a kept row: its table, then the row */
typedef struct SbxKeptKey
{
	Oid			node;
	SbxRow		row;
} SbxKeptKey;

/* rows found in a round, of one table */
typedef struct SbxRows
{
	SbxRow	   *rows;
	int			n;
	int			cap;
} SbxRows;

typedef struct SbxClosure
{
	SbxMasking *m;
	HTAB	   *kept;			/* SbxKeptKey, the rows kept */
	int			nnodes;
	SbxNode   **nodes;			/* the kept tables, by OID */
	SbxRows    *found;			/* by table: rows found this round */
	SbxRows    *next;			/* by table: rows found for the next round */
	int64	   *nfollowed;		/* by table: rows kept by following */
} SbxClosure;

static int
sbx_node_index(const SbxClosure *c, const SbxNode *node)
{
	for (int i = 0; i < c->nnodes; i++)
		if (c->nodes[i] == node)
			return i;
	elog(ERROR, "table %u is not kept", node->relid);
	return -1;					/* keep compiler quiet */
}

static int
sbx_row_cmp(const void *a, const void *b)
{
	const SbxRow *ra = a;
	const SbxRow *rb = b;

	if (ra->leaf != rb->leaf)
		return ra->leaf < rb->leaf ? -1 : 1;
	return ItemPointerCompare((ItemPointer) &ra->tid, (ItemPointer) &rb->tid);
}

static int
sbx_node_cmp(const void *a, const void *b)
{
	Oid			oa = (*(SbxNode *const *) a)->relid;
	Oid			ob = (*(SbxNode *const *) b)->relid;

	return oa < ob ? -1 : (oa > ob ? 1 : 0);
}

/*
 * Keep a row of table i, read as (tableoid, ctid) text; a new one is found
 * for the next round.  A followed row is kept only within its table's bound.
 */
static void
sbx_keep_row(SbxClosure *c, int i, const char *leaf, const char *tid, bool followed)
{
	SbxKeptKey	key;
	bool		found;
	unsigned int blk;
	unsigned int off;
	SbxRows    *next = &c->next[i];
	int64		max_rows = c->nodes[i]->follow ? c->nodes[i]->follow->max_rows : 0;

	if (followed && max_rows > 0 && c->nfollowed[i] >= max_rows)
		return;
	if (sscanf(tid, "(%u,%u)", &blk, &off) != 2)
		elog(ERROR, "unexpected ctid \"%s\" from the source", tid);
	memset(&key, 0, sizeof(key));
	key.node = c->nodes[i]->relid;
	key.row.leaf = atooid(leaf);
	ItemPointerSet(&key.row.tid, blk, off);
	(void) hash_search(c->kept, &key, HASH_ENTER, &found);
	if (found)
		return;
	if (hash_get_num_entries(c->kept) > SBX_KEPT_MAX)
		sbx_kept_too_many(c->m);
	if (followed)
		c->nfollowed[i]++;
	if (next->n == next->cap)
	{
		next->cap = Max(1024, next->cap * 2);
		next->rows = next->rows ? repalloc(next->rows, sizeof(SbxRow) * next->cap)
			: palloc(sizeof(SbxRow) * next->cap);
	}
	next->rows[next->n++] = key.row;
}

/* The rows of a query, (tableoid, ctid), kept as rows of table i; the query is freed. */
static void
sbx_keep_result(SbxClosure *c, int i, char *sql, bool followed)
{
	PGresult   *res = sbx_reader_exec(c->m, sql, 0, NULL, PGRES_TUPLES_OK);

	pfree(sql);
	for (int r = 0; r < PQntuples(res); r++)
		sbx_keep_row(c, i, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), followed);
	PQclear(res);
}

/* A tid[] literal of rows [from, to) of a sorted array, all of one leaf. */
static char *
sbx_tid_array(const SbxRow *rows, int from, int to)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int r = from; r < to; r++)
		appendStringInfo(&buf, "%s\"(%u,%u)\"", r > from ? "," : "",
						 ItemPointerGetBlockNumberNoCheck(&rows[r].tid),
						 ItemPointerGetOffsetNumberNoCheck(&rows[r].tid));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * What a step's FROM names the rows of partitioned table 'node' in leaf
 * 'leaf' by: the partition itself, since a TID scan of the table would probe
 * every partition for the chunk's ctids.  NULL for a table that is not
 * partitioned (its key's end names it).
 */
static char *
sbx_leaf_from(SbxClosure *c, const SbxNode *node, Oid leaf)
{
	ListCell   *lc;

	if (!node->partitioned)
		return NULL;
	foreach(lc, c->m->masked)
	{
		SbxMaskedTable *table = lfirst(lc);

		if (table->relid == leaf && table->reduced)
			return psprintf("ONLY %s", table->sql_name);
	}
	return NULL;
}

/*
 * The up step along a relationship, from a chunk of kept rows of one leaf:
 * the rows they refer to, and how many refer through it to no row of the
 * source (dangling), counted here, in the same scan, for the ready event.
 */
static void
sbx_step_relation(SbxClosure *c, SbxKey *key, const char *leaf_from, Oid leaf,
				  const char *tids)
{
	int			i = sbx_node_index(c, key->to);
	PGresult   *res;

	res = sbx_reader_exec(c->m,
						  psprintf("SELECT b.tableoid, b.ctid, pg_catalog.count(*)"
								   " FROM %s a LEFT JOIN %s b ON %s"
								   " WHERE a.tableoid = %u AND a.ctid = ANY ('%s'::pg_catalog.tid[])"
								   " AND %s GROUP BY 1, 2",
								   leaf_from ? leaf_from : key->from_sql, key->to_sql,
								   sbx_key_match_plain(key, "b", "a"), leaf, tids,
								   sbx_key_refers(key, "a")),
						  0, NULL, PGRES_TUPLES_OK);
	for (int r = 0; r < PQntuples(res); r++)
	{
		if (PQgetisnull(res, r, 1))
			key->dangling += strtoi64(PQgetvalue(res, r, 2), NULL, 10);
		else
			sbx_keep_row(c, i, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), false);
	}
	PQclear(res);
}

/*
 * One round's step from the rows found of table i, a chunk of one leaf:
 * what they refer to, and the followed rows that refer to them.
 */
static void
sbx_step(SbxClosure *c, int i, Oid leaf, const char *tids)
{
	SbxNode    *node = c->nodes[i];
	char	   *leaf_from = sbx_leaf_from(c, node, leaf);
	ListCell   *lc;

	/* up: the rows they refer to */
	foreach(lc, node->out)
	{
		SbxKey	   *key = lfirst(lc);

		if (key->to->cls != SBX_NODE_KEPT)
			continue;
		if (key->relation)
		{
			sbx_step_relation(c, key, leaf_from, leaf, tids);
			continue;
		}
		sbx_keep_result(c, sbx_node_index(c, key->to),
						psprintf("SELECT DISTINCT b.tableoid, b.ctid FROM %s a JOIN %s b ON %s"
								 " WHERE a.tableoid = %u AND a.ctid = ANY ('%s'::pg_catalog.tid[])",
								 leaf_from ? leaf_from : key->from_sql, key->to_sql,
								 sbx_key_match(key, "b", "a"), leaf, tids),
						false);
	}

	/*
	 * follow: the rows of followed tables that refer to them, along keys
	 * into seeds and followed tables only (a table kept because kept rows
	 * refer to it, a store or a staff member, would bring in every row
	 * that refers to it)
	 */
	for (int f = 0; f < c->nnodes && (node->seed || node->follow); f++)
	{
		SbxNode    *followed = c->nodes[f];

		if (!followed->follow)
			continue;
		foreach(lc, followed->out)
		{
			SbxKey	   *key = lfirst(lc);

			if (key->to != node)
				continue;
			sbx_keep_result(c, f,
							psprintf("SELECT a.tableoid, a.ctid FROM %s b JOIN %s a ON %s"
									 " WHERE b.tableoid = %u AND b.ctid = ANY ('%s'::pg_catalog.tid[])"
									 " ORDER BY a.tableoid, a.ctid",
									 leaf_from ? leaf_from : key->to_sql, key->from_sql,
									 sbx_key_match(key, "b", "a"), leaf, tids),
							true);
		}
	}
	if (leaf_from)
		pfree(leaf_from);
}

/* The rows a seed's rule chooses, read through a cursor. */
static void
sbx_seed(SbxClosure *c, int i)
{
	SbxNode    *node = c->nodes[i];

	PQclear(sbx_reader_exec(c->m,
							psprintf("DECLARE sbx_seed_rows NO SCROLL CURSOR FOR"
									 " SELECT tableoid, ctid FROM %s WHERE %s",
									 sbx_seed_from(node), sbx_seed_where(node)),
							0, NULL, PGRES_COMMAND_OK));
	for (;;)
	{
		PGresult   *res = libpqsrv_exec(c->m->reader, "FETCH FORWARD 50000 FROM sbx_seed_rows",
										PG_WAIT_EXTENSION);
		int			n;

		/* the source's message may quote the value of the row it failed on */
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			int			code = sbx_remote_sqlstate(res);

			PQclear(res);
			ereport(ERROR,
					(errcode(code),
					 errmsg("the subset condition of table %s fails on a row of source \"%s\"",
							quote_qualified_identifier(node->schema, node->table), c->m->source),
					 errdetail("SQLSTATE %s; the source's message is not shown, as it may quote the row's values.",
							   unpack_sql_state(code))));
		}
		n = PQntuples(res);

		for (int r = 0; r < n; r++)
			sbx_keep_row(c, i, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), false);
		PQclear(res);
		CHECK_FOR_INTERRUPTS();
		if (n == 0)
			break;
	}
	PQclear(sbx_reader_exec(c->m, "CLOSE sbx_seed_rows", 0, NULL, PGRES_COMMAND_OK));
}

/* Run rounds until one finds nothing new. */
static void
sbx_rounds(SbxClosure *c)
{
	for (;;)
	{
		bool		any = false;
		SbxRows    *swap = c->found;

		/* what the last round found is this round's to step from */
		c->found = c->next;
		c->next = swap;
		for (int i = 0; i < c->nnodes; i++)
			c->next[i].n = 0;
		for (int i = 0; i < c->nnodes; i++)
		{
			SbxRows    *rows = &c->found[i];
			int			from = 0;

			if (rows->n == 0)
				continue;
			any = true;
			qsort(rows->rows, rows->n, sizeof(SbxRow), sbx_row_cmp);
			while (from < rows->n)
			{
				int			to = from;
				char	   *tids;

				while (to < rows->n && to - from < SBX_KEPT_CHUNK &&
					   rows->rows[to].leaf == rows->rows[from].leaf)
					to++;
				tids = sbx_tid_array(rows->rows, from, to);
				sbx_step(c, i, rows->rows[from].leaf, tids);
				pfree(tids);
				from = to;
				CHECK_FOR_INTERRUPTS();
			}
		}
		if (!any)
			return;
	}
}

/*
 * The kept rows of each kept table, sorted: into the chunks its leaves'
 * COPYs read, and, for a table a down table refers to, into a CTE.
 */
static void
sbx_closure_output(SbxClosure *c, StringInfo with, HTAB *nodes)
{
	SbxRows    *all = palloc0(sizeof(SbxRows) * c->nnodes);
	HASH_SEQ_STATUS seq;
	SbxKeptKey *key;
	SbxChunker	chunker;
	SbxNode    *node;

	hash_seq_init(&seq, c->kept);
	while ((key = hash_seq_search(&seq)) != NULL)
	{
		int			i;

		for (i = 0; c->nodes[i]->relid != key->node; i++)
			;
		if (all[i].n == all[i].cap)
		{
			all[i].cap = Max(1024, all[i].cap * 2);
			all[i].rows = all[i].rows ? repalloc(all[i].rows, sizeof(SbxRow) * all[i].cap)
				: palloc(sizeof(SbxRow) * all[i].cap);
		}
		all[i].rows[all[i].n++] = key->row;
	}
	sbx_chunker_init(&chunker, c->m);
	for (int i = 0; i < c->nnodes; i++)
	{
		bool		referred = false;
		StringInfoData leaves;
		StringInfoData tids;

		if (all[i].n > 0)
			qsort(all[i].rows, all[i].n, sizeof(SbxRow), sbx_row_cmp);
		for (int r = 0; r < all[i].n; r++)
		{
			char		tid[32];

			snprintf(tid, sizeof(tid), "(%u,%u)",
					 ItemPointerGetBlockNumberNoCheck(&all[i].rows[r].tid),
					 ItemPointerGetOffsetNumberNoCheck(&all[i].rows[r].tid));
			sbx_chunker_add(&chunker, all[i].rows[r].leaf, tid);
		}

		/* a down table refers to this one: its kept rows as arrays */
		hash_seq_init(&seq, nodes);
		while ((node = hash_seq_search(&seq)) != NULL)
		{
			ListCell   *lc;

			if (node->cls != SBX_NODE_DOWN)
				continue;
			foreach(lc, node->out)
				referred |= ((SbxKey *) lfirst(lc))->to == c->nodes[i];
		}
		if (!referred)
			continue;
		initStringInfo(&leaves);
		initStringInfo(&tids);
		for (int r = 0; r < all[i].n; r++)
		{
			appendStringInfo(&leaves, "%s%u", r > 0 ? "," : "", all[i].rows[r].leaf);
			appendStringInfo(&tids, "%s\"(%u,%u)\"", r > 0 ? "," : "",
							 ItemPointerGetBlockNumberNoCheck(&all[i].rows[r].tid),
							 ItemPointerGetOffsetNumberNoCheck(&all[i].rows[r].tid));
		}
		appendStringInfo(with, ", sbx_k_%u(leaf, tid) AS (SELECT * FROM ROWS FROM ("
						 "pg_catalog.unnest('{%s}'::pg_catalog.oid[]),"
						 " pg_catalog.unnest('{%s}'::pg_catalog.tid[])))",
						 c->nodes[i]->relid, leaves.data, tids.data);
		pfree(leaves.data);
		pfree(tids.data);
	}
	sbx_chunker_finish(&chunker);
}

/*
 * Compute the kept tables' rows, in rounds from the seeds' rows, and add
 * to 'with' the CTEs of those that down tables refer to.
 */
void
sbx_closure_compute(SbxMasking *m, HTAB *nodes, StringInfo with)
{
	SbxClosure	c;
	HASHCTL		ctl;
	HASH_SEQ_STATUS seq;
	SbxNode    *node;
	int			n = 0;

	memset(&c, 0, sizeof(c));
	c.m = m;
	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
		n += node->cls == SBX_NODE_KEPT;
	c.nodes = palloc(sizeof(SbxNode *) * Max(n, 1));
	hash_seq_init(&seq, nodes);
	while ((node = hash_seq_search(&seq)) != NULL)
	{
		if (node->cls == SBX_NODE_KEPT)
			c.nodes[c.nnodes++] = node;
	}
	/* in the order of their OIDs: the same rounds, the same followed rows */
	qsort(c.nodes, c.nnodes, sizeof(SbxNode *), sbx_node_cmp);
	c.found = palloc0(sizeof(SbxRows) * Max(n, 1));
	c.next = palloc0(sizeof(SbxRows) * Max(n, 1));
	c.nfollowed = palloc0(sizeof(int64) * Max(n, 1));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(SbxKeptKey);
	ctl.entrysize = sizeof(SbxKeptKey);
	ctl.hcxt = CurrentMemoryContext;
	c.kept = hash_create("pgsandbox kept rows", 1024, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: computing the rows a subset keeps");
	for (int i = 0; i < c.nnodes; i++)
	{
		if (c.nodes[i]->seed)
			sbx_seed(&c, i);
	}
	sbx_rounds(&c);
	sbx_closure_output(&c, with, nodes);
	hash_destroy(c.kept);
}
