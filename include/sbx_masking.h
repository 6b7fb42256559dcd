/*-------------------------------------------------------------------------
 *
 * sbx_masking.h
 *	  Masking rules: reading and packing them for a clone job, checking
 *	  what a rule may use, and applying them to a data clone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_MASKING_H
#define SBX_MASKING_H

#include "sbx_shmem.h"

/* masking rules (rules.c) and applying them to a data clone (masking.c) */
typedef struct SbxMaskRule
{
	char	   *target;			/* schema.table.column, quoted where needed */
	char	   *schema;
	char	   *table;
	char	   *column;
	char	   *expression;
	bool		trusted;		/* its author is a superuser: not checked */
	bool		key;			/* a key mask (key_masks.c) */
	const char *key_of;			/* the key mask it comes from, where
								 * sbx_expand_key_masks added it */
} SbxMaskRule;

/*
 * A subset, follow or relate rule (subset_rules.c, relations.c, subset.c).
 * A relate rule declares a relationship the source's schema does not: from
 * the referring columns of schema.table to the referred columns of
 * ref_schema.ref_table, where the condition (if any) holds of the
 * referring row.
 */
typedef struct SbxSubsetRule
{
	char	   *target;			/* schema.table, quoted where needed; for a
								 * relationship "a.b(c) -> d.e(f)" */
	char	   *schema;
	char	   *table;
	char	   *condition;		/* subset: an expression, or a share ('1%');
								 * relate: an expression, or NULL */
	int64		max_rows;		/* follow: the most rows kept, 0 for no bound */
	bool		follow;
	bool		relation;		/* a relate rule */
	char	   *ref_schema;		/* relate: the referred table */
	char	   *ref_table;
	List	   *columns;		/* relate: the referring columns (names) */
	List	   *ref_columns;	/* relate: the referred columns (names) */
	bool		trusted;		/* its author is a superuser: not checked */
} SbxSubsetRule;

/* a table whose rows the reader copies: masked, reduced, or both */
typedef struct SbxMaskedTable
{
	Oid			relid;			/* in the source */
	char	   *qualified;		/* schema.table, quoted where needed */
	char	   *sql_name;		/* schema.table, quoted for the source */
	char	   *sql_refname;	/* table, quoted: how a query names its row */
	Oid			reltype;		/* its row type, in the source */
	List	   *rules;			/* SbxMaskRule that cover it */
	char	   *select_list;	/* its columns, masked ones as expressions */
	char	   *column_list;
	bool		reduced;		/* only the rows subset rules keep */
	List	   *kept_chunks;	/* reduced: its kept rows' ctids, as tid[] literals */
	double		estimate;		/* reduced: the source's estimate of its rows */
	Oid			reduced_of;		/* reduced: its table among the source's
								 * (itself, or its partitioned table) */
	int64		rows;			/* rows copied */
} SbxMaskedTable;

typedef struct SbxMasking
{
	PGconn	   *reader;
	const char *source;
	const char *trusted_owners;	/* the source's, as text[] */
	char	   *snapshot;		/* exported by the reader (a live build's:
								 * its slot's) */
	char	   *encoding;		/* the source's, in which rows travel */
	List	   *excluded;		/* exact pg_dump patterns of tables whose
								 * rows are left out or copied here */
	List	   *left_out;		/* SbxLeftOut: the same tables, by OID */
	int			nexcluded;		/* of those, excluded by a pattern */
	List	   *masked;			/* SbxMaskedTable */
	int			ncolumns;		/* mask rules */
	int			nreduced;		/* tables reduced */
	List	   *notes;			/* what the subset left out, for the event */
	struct HTAB *subset_nodes;	/* a reduced clone's tables, until
								 * sbx_subset_compute finds their rows */
	List	   *reduced_relids; /* the reduced tables, partitioned ones too */
} SbxMasking;

/* a table whose rows pg_dump must not copy, and the rules that say so */
typedef struct SbxLeftOut
{
	Oid			relid;
	const char *pattern;		/* of exclude_data, or NULL */
	const SbxMaskedTable *masked;	/* or the masked table */
} SbxLeftOut;

/* the reader's queries and the tables it copies (reader_tables.c) */
extern void sbx_leave_out(SbxMasking *m, Oid relid, const char *schema, const char *table,
						  const char *pattern, const SbxMaskedTable *masked);
extern char *sbx_exact_pattern(const char *schema, const char *table);

extern bool sbx_read_rules(const char *source, SbxCloneJob *job);
extern bool sbx_rules_reduce(const SbxCloneJob *job);
extern void sbx_unpack_rules(const SbxCloneJob *job, List **masks, List **patterns,
							 List **subsets);
extern void sbx_table_pattern_regex(const char *pattern, char **schema_re,
									char **table_re);
extern SbxMasking *sbx_masking_begin(PGconn *reader, const char *source,
									 const char *trusted_owners, List *masks,
									 List *patterns, List *subsets,
									 int rules_encoding, const char *live_snapshot);
extern PGresult *sbx_reader_exec(SbxMasking *m, const char *sql, int nparams,
								 const char *const *params, int expect);
extern SbxMaskedTable *sbx_masked_table(SbxMasking *m, Oid relid, const char *schema,
										const char *table);
extern List *sbx_masking_dump_options(const SbxMasking *masking);
extern void sbx_masking_copy(SbxMasking *masking, PGconn *sandbox);
extern char *sbx_masking_summary(const SbxMasking *masking);
extern const char *sbx_masking_rules_of(const SbxMasking *masking, Oid relid);

/* what rules.c shares with subset_rules.c */
struct SelectStmt;
extern List *sbx_raw_parse_expression(const char *expression);
extern struct SelectStmt *sbx_parse_expression(const char *expression, const char *what);
extern void sbx_check_expression_syntax(const char *expression, const char *what);
extern void sbx_check_rule_rights(const char *expression, const char *what);
extern void sbx_begin_rule_check(PGconn *conn, const char *source);
extern void sbx_lock_source(const char *source);
extern void sbx_rules_changed(const char *source);
extern void sbx_refuse_rule_if_live(const char *source, const char *kind);
extern void sbx_check_rules_size(const char *source, const char *kind, const char *target,
								 int more);
extern void sbx_remove_rule(const char *source, const char *kind, const char *target,
							const char *shown);
extern PGresult *sbx_plan_rule(PGconn *conn, const char *sql, const char *what,
							   const char *target, const char *source);

/* subset rules (subset_rules.c) and the rows they keep (subset.c) */
extern int64 sbx_subset_share(const char *condition, bool *of_pages);
extern List *sbx_condition_columns(const char *condition);
extern bool sbx_condition_name_reads(const char *name, const char *table, const char *column);
extern void sbx_check_mask_not_in_subset(const char *source, const char *schema,
										 const char *table, const char *column);
extern void sbx_check_rule_ascii(PGconn *conn, const char *source, const char *what,
								 const char *target, const char *expression);
extern void sbx_parse_table_target(const char *target, char **schema, char **table,
								   char **normalized);
extern void sbx_set_table_rule(const char *source, const char *kind, const char *schema,
							   const char *table, const char *normalized,
							   const char *expression);
extern Oid	sbx_check_rule_table(PGconn *conn, const char *source, const char *schema,
								 const char *table);
extern void sbx_subset_resolve(SbxMasking *m, List *subsets, List *excluded_oids);

/* declared relationships (relations.c) */
#define SBX_RELATION_CONDITION	"relationship condition"
extern void sbx_parse_relation_target(const char *target, SbxSubsetRule *rule);
extern PGresult *sbx_resolve_relation(PGconn *conn, const char *source,
									  const SbxSubsetRule *rule);
extern char *sbx_relation_condition(const char *condition, const char *table,
									const char *row);
extern bool sbx_relation_uses(const SbxSubsetRule *rule, const char *schema,
							  const char *table, const char *column, bool condition_only);
extern void sbx_check_mask_not_related(const char *source, const char *schema,
									   const char *table, const char *column, bool key);

/* key masks (key_masks.c) */
extern char *sbx_key_mask_default(Oid typid, int typmod, const char *qcol);
extern void sbx_check_key_mask_expression(const char *expression, const char *table,
										  const char *column);
extern void sbx_check_key_mask_functions(PGconn *conn, const char *source,
										 const char *expression, const char *target);
extern void sbx_check_key_mask_table(PGconn *conn, const char *source, const char *schema,
									 const char *table, const char *target);
extern char *sbx_key_mask_of_column(const char *expression, const char *column);
extern List *sbx_expand_key_masks(SbxMasking *m, List *masks, List *subsets);
extern char *sbx_key_mask_targets(List *derived);
extern void sbx_subset_compute(SbxMasking *m);
extern char *sbx_subset_summary(const SbxMasking *m);

/* the key masking expressions may hash with (mask_key.c) */
#define SBX_MASK_KEY_SETTING	"pgsandbox_mask.key"

/*
 * How a rule's expression is put into a statement, wherever it is parsed
 * or sent: parenthesized, a newline before the closing parenthesis so that
 * a line comment at its end cannot swallow what follows.
 */
#define SBX_MASK_EXPR_FORMAT	"(%s\n)"

/* what a rule of an admin who is not a superuser may use (mask_expr.c) */
extern char *sbx_mask_functions_setting;
extern int	sbx_test_copy_pause;
extern const char *sbx_mask_expression_refused(const char *expression);
struct SubLink;
extern bool sbx_scalar_sublink(struct SubLink *sublink);
extern bool sbx_check_mask_functions(char **newval, void **extra, GucSource source);
extern void sbx_define_mask_settings(void);
extern char *sbx_mask_key(const char *source);
extern void sbx_set_mask_key(PGconn *conn, const char *source, const char *what);

#endif							/* SBX_MASKING_H */
