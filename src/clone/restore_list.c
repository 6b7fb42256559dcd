/*-------------------------------------------------------------------------
 *
 * restore_list.c
 *	  Which entries of the source's archive the sandbox role restores.
 *
 * pg_restore --list writes one line an entry:
 *
 *		dumpId; tableoid oid DESC SCHEMA TAG OWNER
 *
 * where (tableoid, oid) name the source's catalog row of the object, or are
 * 0 for entries that are not objects of their own (comments, table data,
 * sequence values).  An entry is recognised by what it is: an extension or
 * a schema by its catalog identity, a comment by the object it is on (whose
 * name pg_dump quotes as an identifier, so it is compared unquoted), table
 * data by the table's OID.  Left out are:
 *
 *	- the source's extensions, their comments and the schemas made for them:
 *	  the clone worker creates the extensions as superuser;
 *	- the rows of the extensions' configuration tables and the values of
 *	  their configuration sequences: the sandbox role may not write them,
 *	  so the clone worker copies them as superuser (config_data.c);
 *	- event triggers and their comments: only a superuser may own one, and
 *	  the sandbox role never can.  These are named in *left_out.
 *
 * With masking, the archive is checked too: it must hold no rows of a
 * table that a rule masks or excludes (pg_dump was told to leave them
 * out).  If it does, whatever the reason, the clone fails before any row
 * is restored, naming the rules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_event_trigger.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "sbx_clone.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "storage/fd.h"
#include "utils/builtins.h"

/* One line of pg_restore --list, split. */
typedef struct SbxTocLine
{
	Oid			tableoid;
	Oid			oid;
	const char *rest;			/* "DESC SCHEMA TAG OWNER" */
} SbxTocLine;

static bool
sbx_parse_toc_line(const char *line, SbxTocLine *entry)
{
	const char *p = line;
	char	   *end;

	if (*p == ';' || *p == '\0' || *p == '\n')
		return false;			/* a comment or an empty line */
	(void) strtol(p, &end, 10);
	if (end == p || *end != ';')
		return false;
	p = end + 1;
	entry->tableoid = (Oid) strtoul(p, &end, 10);
	if (end == p)
		return false;
	p = end;
	entry->oid = (Oid) strtoul(p, &end, 10);
	if (end == p || *end != ' ')
		return false;
	entry->rest = end + 1;
	return true;
}

/*
 * If s starts with prefix followed by an identifier (quoted as pg_dump
 * quotes one, or bare) and a space or the end, return the identifier
 * unquoted; otherwise NULL.
 */
static char *
sbx_identifier_after(const char *s, const char *prefix)
{
	size_t		plen = strlen(prefix);
	StringInfoData ident;
	const char *p;

	if (strncmp(s, prefix, plen) != 0)
		return NULL;
	p = s + plen;
	initStringInfo(&ident);
	if (*p == '"')
	{
		for (p++; *p; p++)
		{
			if (*p == '"')
			{
				if (p[1] != '"')
					break;
				p++;
			}
			appendStringInfoChar(&ident, *p);
		}
		if (*p != '"')
			return NULL;
		p++;
	}
	else
	{
		while (*p && *p != ' ' && *p != '\n')
			appendStringInfoChar(&ident, *p++);
	}
	if (*p != ' ' && *p != '\n' && *p != '\0')
		return NULL;
	return ident.data;
}

/* Is this the data of a configuration table or sequence of an extension? */
static bool
sbx_is_config_data(const SbxTocLine *entry, const SbxSourceInfo *info)
{
	ListCell   *lc;

	foreach(lc, info->config_rels)
	{
		SbxConfigRel *rel = lfirst(lc);

		if (strncmp(entry->rest, "TABLE DATA ", 11) == 0 && entry->oid == rel->oid)
			return true;
		/* a sequence's value has no catalog identity of its own */
		if (strncmp(entry->rest, "SEQUENCE SET ", 13) == 0)
		{
			char	   *expect = psprintf("SEQUENCE SET %s %s ", rel->schema, rel->name);

			if (strncmp(entry->rest, expect, strlen(expect)) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Should the sandbox role skip this entry?  Event triggers are named in
 * left_out.
 */
static bool
sbx_entry_skipped(const SbxTocLine *entry, const SbxSourceInfo *info,
				  StringInfo left_out)
{
	ListCell   *lc;
	char	   *name;

	foreach(lc, info->extensions)
	{
		SbxExtension *ext = lfirst(lc);

		if (entry->tableoid == ExtensionRelationId && entry->oid == ext->oid)
			return true;
		if (ext->made_schema && entry->tableoid == NamespaceRelationId &&
			entry->oid == ext->schema_oid)
			return true;
	}
	name = sbx_identifier_after(entry->rest, "COMMENT - EXTENSION ");
	if (name != NULL)
	{
		foreach(lc, info->extensions)
		{
			if (strcmp(((SbxExtension *) lfirst(lc))->name, name) == 0)
				return true;
		}
	}
	if (sbx_is_config_data(entry, info))
		return true;

	foreach(lc, info->event_triggers)
	{
		SbxEventTrigger *evt = lfirst(lc);

		if (entry->tableoid == EventTriggerRelationId && entry->oid == evt->oid)
		{
			appendStringInfo(left_out, "%sevent trigger \"%s\"",
							 left_out->len ? ", " : "", evt->name);
			return true;
		}
	}
	name = sbx_identifier_after(entry->rest, "COMMENT - EVENT TRIGGER ");
	if (name != NULL)
	{
		foreach(lc, info->event_triggers)
		{
			if (strcmp(((SbxEventTrigger *) lfirst(lc))->name, name) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Write the pg_restore list 'listing' (what pg_restore --list printed) to
 * file 'to', leaving out the entries the sandbox role does not restore.
 * What is left out for good is named in left_out, separated by ", ".
 */
void
sbx_filter_restore_list(const char *listing, const char *to,
						const SbxSourceInfo *info, const SbxMasking *masking,
						StringInfo left_out)
{
	FILE	   *out;
	const char *p = listing;

	out = AllocateFile(to, "w");
	if (out == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", to)));
	while (*p)
	{
		size_t		len = strcspn(p, "\n");
		char	   *line = pnstrdup(p, len + (p[len] == '\n'));
		SbxTocLine	entry;

		p += len + (p[len] == '\n');
		if (!sbx_parse_toc_line(line, &entry))
		{
			fputs(line, out);
			pfree(line);
			continue;
		}
		if (masking != NULL && strncmp(entry.rest, "TABLE DATA ", 11) == 0)
		{
			const char *rules = sbx_masking_rules_of(masking, entry.oid);

			if (rules != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("the source's archive holds the rows of a table that %s cover",
								rules),
						 errdetail("pg_dump was told to leave them out; no row was restored.")));
		}
		if (!sbx_entry_skipped(&entry, info, left_out))
			fputs(line, out);
		pfree(line);
	}
	/* a short write anywhere fails the step */
	if (ferror(out) || FreeFile(out) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", to)));
}
