/*-------------------------------------------------------------------------
 *
 * rule_catalog.c
 *	  What every kind of rule shares (rules.c, subset_rules.c): an
 *	  expression parsed and checked before a source sees it, the read-only
 *	  transaction a rule is checked in on the source, and the catalog's
 *	  rules of a source locked, counted, sized and removed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/string.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "nodes/parsenodes.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/builtins.h"

/*
 * Parse an expression as the only item of a SELECT.  A syntax error is
 * reported as the expression's, without a position in the caller's
 * statement.
 */
SelectStmt *
sbx_parse_expression(const char *expression, const char *what)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile stmts = NIL;

	PG_TRY();
	{
		stmts = sbx_raw_parse_expression(expression);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_SYNTAX_ERROR)
			PG_RE_THROW();		/* out of memory, say: not the expression's */
		FlushErrorState();
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("%s is not valid SQL", what),
				 errdetail_internal("%s", edata->message)));
	}
	PG_END_TRY();
	if (list_length(stmts) == 1 &&
		IsA(((RawStmt *) linitial(stmts))->stmt, SelectStmt))
		return (SelectStmt *) ((RawStmt *) linitial(stmts))->stmt;
	return NULL;
}

/*
 * An expression must be one SQL expression: parsed here as the only item
 * of a SELECT, so that it cannot end the statement it is put in or add a
 * clause to it.
 */
void
sbx_check_expression_syntax(const char *expression, const char *what)
{
	SelectStmt *select;

	if (expression[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	select = sbx_parse_expression(expression, what);
	if (select == NULL || list_length(select->targetList) != 1 ||
		IsA(((ResTarget *) linitial(select->targetList))->val, RowExpr) ||
		select->fromClause != NIL || select->whereClause != NULL ||
		select->groupClause != NIL || select->havingClause != NULL ||
		select->windowClause != NIL || select->sortClause != NIL ||
		select->limitCount != NULL || select->limitOffset != NULL ||
		select->lockingClause != NIL || select->withClause != NULL ||
		select->op != SETOP_NONE || select->distinctClause != NIL ||
		select->intoClause != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s must be a single SQL expression", what),
				 errdetail("The expression was: %s", expression)));
}

/*
 * A rule of an admin who is not a superuser may use only what mask_expr.c
 * allows: it runs with the rights of the source's login.
 */
void
sbx_check_rule_rights(const char *expression, const char *what)
{
	const char *refused = sbx_mask_expression_refused(expression);

	if (refused != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s uses %s, which only a superuser's rule may use",
						what, refused),
				 errdetail("A rule runs with the rights of the source's login. The rule of an administrator who is not a superuser may use the row's columns, constants, operators, casts to system types, CASE, COALESCE, NULLIF, GREATEST, LEAST and the functions pgsandbox allows."),
				 errhint("A superuser may allow more functions in pgsandbox.mask_functions.")));
}

/*
 * Begin the read-only transaction a rule is checked in, with the clone
 * reader's settings and masking key.
 */
void
sbx_begin_rule_check(PGconn *conn, const char *source)
{
	sbx_source_read_begin(conn, psprintf("could not read source \"%s\"", source));
	/* as the clone's reader has it */
	sbx_set_mask_key(conn, source, psprintf("could not read source \"%s\"", source));
}

/*
 * In the caller's SPI connection: make sure the source exists, and lock
 * its row so that changes of its rules count up one at a time.
 */
void
sbx_lock_source(const char *source)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	values[0] = CStringGetTextDatum(source);
	if (SPI_execute_with_args("SELECT 1 FROM pgsandbox.source WHERE name = $1 FOR UPDATE",
							  1, argtypes, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source \"%s\"", source);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 strlen(source) < NAMEDATALEN ?
				 errmsg("source \"%s\" does not exist", source) :
				 errmsg("source does not exist")));
}

/*
 * In the caller's SPI connection, after a change of the source's rules:
 * count the change, and have the worker retake at once the source's data
 * snapshots that exist, which the change made stale.
 */
void
sbx_rules_changed(const char *source)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	values[0] = CStringGetTextDatum(source);
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET rules_version = rules_version + 1"
							  " WHERE name = $1", 1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not count a change of the rules of source \"%s\"", source);
	if (SPI_execute_with_args("UPDATE pgsandbox.snapshot_plan p SET next_run_at = pg_catalog.now()"
							  " WHERE p.source = $1 AND NOT p.schema_only"
							  "   AND EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
							  "                WHERE s.kind = 'snapshot' AND s.source = p.source"
							  "                  AND NOT s.schema_only AND s.retired_at IS NULL"
							  "                  AND s.status IN ('cloning', 'ready'))",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not mark the snapshots of source \"%s\" stale", source);
}

/*
 * In the caller's SPI connection: refuse a new rule of this kind for a live
 * source, or a change of its exclude_data rules.  Its snapshot is filled by
 * the source's own changes, applied as they come: no mask and no subset
 * acts on them, and the tables it leaves out were found when it was built.
 */
void
sbx_refuse_rule_if_live(const char *source, const char *kind)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	if (!sbx_catalog_has_live())
		return;
	values[0] = CStringGetTextDatum(source);
	if (SPI_execute_with_args("SELECT 1 FROM pgsandbox.source"
							  " WHERE name = $1 AND live_publication IS NOT NULL",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source \"%s\"", source);
	if (SPI_processed > 0 && strcmp(kind, "exclude_data") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot change the exclude_data rules of live source \"%s\"", source),
				 errdetail("Its live snapshot leaves out the rows of the tables its exclude_data rules matched when it was built, and does not apply their changes."),
				 errhint("Call unset_live(), change the rules, and call set_live() again.")));
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" is live, and a %s rule cannot apply to its snapshot", source, kind),
				 errdetail("A live snapshot is filled by the source's changes as they come, which no rule reads."),
				 errhint("Call unset_live() first.")));
}

/*
 * The room the source's rules take packed for a clone job, with one more
 * rule of the given sizes in place of the one with the same kind and
 * target; an error if that is more than a clone job holds.
 */
void
sbx_check_rules_size(const char *source, const char *kind, const char *target,
					 int more)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];
	bool		isnull;
	int64		size;

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(kind);
	values[2] = CStringGetTextDatum(target);
	if (SPI_execute_with_args("SELECT COALESCE(pg_catalog.sum(7 + octet_length(target)"
							  " + octet_length(COALESCE(schema_name, ''))"
							  " + octet_length(COALESCE(table_name, ''))"
							  " + octet_length(COALESCE(column_name, ''))"
							  " + octet_length(COALESCE(expression, ''))), 0)::bigint"
							  "  FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND NOT (kind = $2 AND target = $3)",
							  3, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
	size = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (size + more + 1 > SBX_RULES_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the rules of source \"%s\" would take more than %d bytes", source,
						SBX_RULES_MAX),
				 errdetail("All the rules of one source, targets and expressions, take at most %d bytes.",
						   SBX_RULES_MAX)));
}

/* Remove one rule; an error if there is none. */
void
sbx_remove_rule(const char *source, const char *kind, const char *target,
				const char *shown)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];

	SPI_connect();
	sbx_lock_source(source);
	/* a live source has no other rules */
	if (strcmp(kind, "exclude_data") == 0)
		sbx_refuse_rule_if_live(source, kind);
	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(kind);
	values[2] = CStringGetTextDatum(target);
	if (SPI_execute_with_args("DELETE FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = $2 AND target = $3",
							  3, argtypes, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not remove a rule of source \"%s\"", source);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 strcmp(kind, "mask") == 0
				 ? errmsg("source \"%s\" has no masking rule for \"%s\"", source, shown)
				 : errmsg("source \"%s\" has no %s rule for \"%s\"", source, kind, shown)));
	sbx_rules_changed(source);
	SPI_finish();
}

/*
 * A rule that is not ASCII is sent as it is: the encodings must agree.
 * 'what' names the kind of rule ("masking rule"), 'target' what it covers.
 */
void
sbx_check_rule_ascii(PGconn *conn, const char *source, const char *what,
					 const char *target, const char *expression)
{
	PGresult   *res;

	/* read otherwise in another encoding (masking.c) */
	if (!pg_is_ascii(target) || (expression && !pg_is_ascii(expression)))
	{
		char	   *encoding;

		res = sbx_remote_exec(conn, "SELECT pg_catalog.current_setting('server_encoding')",
							  0, NULL, PGRES_TUPLES_OK,
							  psprintf("could not read source \"%s\"", source));
		encoding = pstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
		if (pg_char_to_encoding(encoding) != GetDatabaseEncoding())
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s for \"%s\" is not ASCII, and the encoding of source \"%s\" is not the admin database's",
							what, target, source),
					 errdetail("The source's encoding is %s, the admin database's %s.",
							   encoding, GetDatabaseEncodingName())));
	}
}

/*
 * Plan a rule's statement against its table on the source, reading no row
 * (the statement says LIMIT 0).  A failure is the rule's: "<what> for
 * "<target>" fails in source", with the source's SQLSTATE and message.
 * Returns the result, to be cleared by the caller.
 */
PGresult *
sbx_plan_rule(PGconn *conn, const char *sql, const char *what, const char *target,
			  const char *source)
{
	PGresult   *res = libpqsrv_exec_params(conn, sql, 0, NULL, NULL, NULL, NULL, 0,
										   PG_WAIT_EXTENSION);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		int			code = sbx_remote_sqlstate(res);
		char	   *msg = sbx_remote_message(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s for \"%s\" fails in source \"%s\"", what, target, source),
				 errdetail_internal("%s", msg)));
	}
	return res;
}
