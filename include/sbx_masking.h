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
} SbxMaskRule;

typedef struct SbxMasking SbxMasking;

extern bool sbx_read_rules(const char *source, SbxCloneJob *job);
extern void sbx_unpack_rules(const SbxCloneJob *job, List **masks, List **patterns);
extern void sbx_table_pattern_regex(const char *pattern, char **schema_re,
									char **table_re);
extern SbxMasking *sbx_masking_begin(PGconn *reader, const char *source,
									 List *masks, List *patterns,
									 int rules_encoding);
extern List *sbx_masking_dump_options(const SbxMasking *masking);
extern void sbx_masking_copy(SbxMasking *masking, PGconn *sandbox);
extern char *sbx_masking_summary(const SbxMasking *masking);
extern const char *sbx_masking_rules_of(const SbxMasking *masking, Oid relid);

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
extern const char *sbx_mask_expression_refused(const char *expression);
extern bool sbx_check_mask_functions(char **newval, void **extra, GucSource source);
extern void sbx_define_mask_settings(void);
extern char *sbx_mask_key(const char *source);
extern void sbx_set_mask_key(PGconn *conn, const char *source, const char *what);

#endif							/* SBX_MASKING_H */
