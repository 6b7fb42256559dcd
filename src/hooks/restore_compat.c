/*-------------------------------------------------------------------------
 *
 * restore_compat.c
 *	  What a restore into a sandbox leaves out because this server would
 *	  refuse it, though the source's server made it: column options of
 *	  builds that know more than this one.
 *
 * Debian's builds of PostgreSQL 15 and 17 record an option pg_attver on
 * new columns (pg_attribute.attoptions), and pg_dump writes it back as
 * ALTER TABLE ... ALTER COLUMN ... SET (pg_attver = ...).  A server that
 * does not know the option (PostgreSQL 18, or a build without that patch)
 * refuses the statement, and with it the whole restore: a clone of such a
 * source onto such a host would always fail.  The option steers nothing a
 * sandbox needs, so when the sandbox role restores, it is taken out of the
 * statement if this server does not know it; a statement left with nothing
 * to do is skipped.  Only the options named in sbx_foreign_attoptions are
 * left out; any other unknown option still fails the restore.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "sbx_hooks.h"

/* column options some builds record that others refuse */
static const char *const sbx_foreign_attoptions[] = {"pg_attver"};

/* per option above: 0 not yet known, 1 this server knows it, -1 it does not */
static int	sbx_known[lengthof(sbx_foreign_attoptions)];

/* Does this server accept column option 'name'?  Asked once a backend. */
static bool
sbx_attoption_known(int i)
{
	if (sbx_known[i] == 0)
	{
		MemoryContext cxt = CurrentMemoryContext;
		List	   *defs = list_make1(makeDefElem(pstrdup(sbx_foreign_attoptions[i]),
												  (Node *) makeString(pstrdup("1")), -1));

		PG_TRY();
		{
			Datum		options = transformRelOptions((Datum) 0, defs, NULL, NULL,
													  false, false);

			(void) attribute_reloptions(options, true);
			sbx_known[i] = 1;
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			FlushErrorState();
			sbx_known[i] = -1;
		}
		PG_END_TRY();
	}
	return sbx_known[i] > 0;
}

/* Is def one of the options above that this server does not know? */
static bool
sbx_is_foreign_attoption(DefElem *def)
{
	for (int i = 0; i < lengthof(sbx_foreign_attoptions); i++)
	{
		if (def->defnamespace == NULL &&
			strcmp(def->defname, sbx_foreign_attoptions[i]) == 0)
			return !sbx_attoption_known(i);
	}
	return false;
}

/* Does the statement set a column option this server would refuse? */
bool
sbx_has_foreign_attoptions(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);
		ListCell   *ld;

		if (cmd->subtype != AT_SetOptions || !IsA(cmd->def, List))
			continue;
		foreach(ld, (List *) cmd->def)
		{
			if (sbx_is_foreign_attoption(lfirst(ld)))
				return true;
		}
	}
	return false;
}

/*
 * Take those options out of the statement, which the caller has copied;
 * returns false if nothing is left for it to do.
 */
bool
sbx_strip_foreign_attoptions(AlterTableStmt *stmt)
{
	List	   *cmds = NIL;
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if (cmd->subtype == AT_SetOptions && IsA(cmd->def, List))
		{
			List	   *kept = NIL;
			ListCell   *ld;

			foreach(ld, (List *) cmd->def)
			{
				if (!sbx_is_foreign_attoption(lfirst(ld)))
					kept = lappend(kept, lfirst(ld));
			}
			if (kept == NIL)
				continue;
			cmd->def = (Node *) kept;
		}
		cmds = lappend(cmds, cmd);
	}
	stmt->cmds = cmds;
	return cmds != NIL;
}
