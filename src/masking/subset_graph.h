/*-------------------------------------------------------------------------
 *
 * subset_graph.h
 *	  Inside the masking layer: the source's tables and foreign keys as a
 *	  reduced clone sees them (subset.c), and the closure of the kept rows
 *	  computed over them (subset_closure.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SUBSET_GRAPH_H
#define SUBSET_GRAPH_H

#include "sbx_masking.h"
#include "utils/hsearch.h"

typedef enum SbxNodeClass
{
	SBX_NODE_WHOLE,
	SBX_NODE_KEPT,
	SBX_NODE_DOWN,
	SBX_NODE_EXCLUDED
} SbxNodeClass;

/* a table of the source, as the foreign keys see it */
typedef struct SbxNode
{
	Oid			relid;			/* the hash key */
	char	   *schema;
	char	   *table;
	char	   *from;			/* what FROM names it by: ONLY for a table */
	bool		partitioned;
	bool		extension;		/* an extension's: never reduced */
	SbxNodeClass cls;
	const SbxSubsetRule *seed;	/* its subset rule, if any */
	const SbxSubsetRule *follow;	/* its follow rule, if any */
	char	   *pkey;			/* its primary key's columns, or NULL */
	const char *pkey_hash;		/* a one-column key's hash function, or NULL */
	List	   *masked_columns; /* seed: the names its masks cover, any leaf */
	char	   *share_columns;	/* seed: what a share of rows hashes when the
								 * key is masked or missing: its unmasked
								 * columns, quoted; NULL for the key */
	List	   *out;			/* SbxKey from it */
	bool		ordered;		/* down: its CTE is written */
	bool		keeps_none;		/* down: in a cycle, keeps no row */
} SbxNode;

/*
 * A foreign key between two tables.  One declared on a partition (or into
 * one) is a key of its partitioned table that holds only for the rows of
 * that partition: from_leaf (to_leaf) is the partition, InvalidOid if the
 * key is the table's own.  A relationship relate() declared is followed as
 * a key is, but for what no constraint checks: a row refers through it
 * only where its condition holds, and a reference to no row of the source
 * (dangling) is kept as it is.
 */
typedef struct SbxKey
{
	char	   *name;
	SbxNode    *from;
	SbxNode    *to;
	Oid			from_leaf;
	Oid			to_leaf;
	char	   *from_sql;		/* what FROM names each end by: the */
	char	   *to_sql;			/* partition itself for a partition's key */
	bool		unsupported;	/* on a partition that is partitioned itself */
	List	   *cols;			/* of 'from', quoted */
	List	   *refcols;		/* of 'to', quoted */
	List	   *ops;			/* to's column [COLLATE x] OPERATOR from's column */
	const SbxSubsetRule *relation;	/* a relationship relate() declared, not
									 * a foreign key; NULL for a key */
	int64		dangling;		/* a relationship from a kept table: its
								 * kept rows whose reference dangles, counted
								 * by the closure's rounds */
} SbxKey;

/* SQL over a key and a seed (subset_sql.c) */
extern char *sbx_key_match(const SbxKey *key, const char *b, const char *a);
extern char *sbx_key_match_plain(const SbxKey *key, const char *b, const char *a);
extern char *sbx_key_refers(const SbxKey *key, const char *a);
extern char *sbx_key_null(const SbxKey *key, const char *a);
extern char *sbx_key_nulls(const SbxKey *key, const char *a);
extern char *sbx_key_dangles(const SbxKey *key, const char *a);
extern char *sbx_key_dangling_rows(const SbxKey *key, const char *a);
extern const char *sbx_key_hash_function(Oid typid);
extern char *sbx_seed_from(const SbxNode *node);
extern char *sbx_seed_where(const SbxNode *node);

/*
 * The most rows one reduced clone keeps of its kept and down tables: the
 * clone worker holds each ctid in memory (about 100 bytes with its chunk's
 * text).
 */
#define SBX_KEPT_MAX	5000000

pg_noreturn extern void sbx_kept_too_many(SbxMasking *m);

/* the kept rows' ctids, a chunk of tid[] at a time, by table (subset_closure.c) */
typedef struct SbxChunker
{
	SbxMasking *m;
	Oid			leaf;			/* the leaf table of the last row */
	SbxMaskedTable *table;		/* its entry, NULL if it is not copied */
	StringInfoData buf;			/* its open chunk */
	int			n;				/* ctids in it */
} SbxChunker;

extern void sbx_chunker_init(SbxChunker *c, SbxMasking *m);
extern void sbx_chunker_add(SbxChunker *c, Oid leaf, const char *tid);
extern void sbx_chunker_finish(SbxChunker *c);

/* the closure of the kept tables, in rounds (subset_closure.c) */
extern void sbx_closure_compute(SbxMasking *m, HTAB *nodes, StringInfo with);

#endif							/* SUBSET_GRAPH_H */
