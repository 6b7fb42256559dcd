/*-------------------------------------------------------------------------
 *
 * reader_tables.c
 *	  The clone reader's queries, and the tables it copies itself (masked,
 *	  reduced, or both): each one's entry, and the rows pg_dump must leave
 *	  out of its archive for it, by exact pattern and by OID.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/builtins.h"

void
sbx_leave_out(SbxMasking *m, Oid relid, const char *schema, const char *table,
			  const char *pattern, const SbxMaskedTable *masked)
{
	SbxLeftOut *entry = palloc(sizeof(SbxLeftOut));

	entry->relid = relid;
	entry->pattern = pattern;
	entry->masked = masked;
	m->left_out = lappend(m->left_out, entry);
	m->excluded = lappend(m->excluded, sbx_exact_pattern(schema, table));
}

/* A query of the reader's that must succeed. */
PGresult *
sbx_reader_exec(SbxMasking *m, const char *sql, int nparams, const char *const *params,
				int expect)
{
	return sbx_remote_exec(m->reader, sql, nparams, params, (ExecStatusType) expect,
						   psprintf("could not read source \"%s\" for masking", m->source));
}

/* A pattern pg_dump reads as exactly one table. */
char *
sbx_exact_pattern(const char *schema, const char *table)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int part = 0; part < 2; part++)
	{
		const char *s = part == 0 ? schema : table;

		appendStringInfoString(&buf, part == 0 ? "\"" : ".\"");
		for (; *s; s++)
		{
			if (*s == '"')
				appendStringInfoChar(&buf, '"');
			appendStringInfoChar(&buf, *s);
		}
		appendStringInfoChar(&buf, '"');
	}
	return buf.data;
}

/*
 * The entry of table relid among those the reader copies, made (and the
 * table's rows left out of pg_dump's archive) if it is not there yet.
 */
SbxMaskedTable *
sbx_masked_table(SbxMasking *m, Oid relid, const char *schema, const char *table)
{
	SbxMaskedTable *entry;
	ListCell   *lt;

	foreach(lt, m->masked)
	{
		if (((SbxMaskedTable *) lfirst(lt))->relid == relid)
			return lfirst(lt);
	}
	entry = palloc0(sizeof(SbxMaskedTable));
	entry->relid = relid;
	entry->qualified = quote_qualified_identifier(schema, table);
	entry->sql_name = sbx_remote_quote_qualified(schema, table);
	entry->sql_refname = sbx_remote_quote_ident(table);
	m->masked = lappend(m->masked, entry);
	sbx_leave_out(m, relid, schema, table, NULL, entry);
	return entry;
}
