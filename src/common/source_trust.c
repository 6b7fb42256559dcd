/*-------------------------------------------------------------------------
 *
 * source_trust.c
 *	  Whose code a query of pgsandbox's on a source table may run: the
 *	  check made before any such query is planned.
 *
 * The planner runs code that a table's owner chose: it folds the immutable
 * functions of the table's index expressions, partial-index predicates,
 * extended-statistics expressions and partition key, and of those of its
 * partitions, while it plans a query on it (plancat.c, relcache.c).  That
 * code then runs with the rights of the session that plans, here the
 * source's login.  PostgreSQL runs its own maintenance as the table's
 * owner for this reason; a client cannot, so pgsandbox follows what
 * PostgreSQL advises a session that cannot trust an object's owner: it
 * queries only objects whose owners it trusts.
 *
 * Trusted are the superusers, the source's login itself and the roles an
 * administrator names for the source (trust_owners()); the public schema's
 * pg_database_owner stands for the database's owner.  Before any query is
 * planned on a table (a masked or reduced table's COPY, the closure of a
 * reduced clone, an extension's configuration rows, a rule's check,
 * suggest_masks()'s samples), the table and every partition or child it
 * has must
 *
 *	- belong to a trusted role: only its owner may add an index, a
 *	  statistics object or a partition, and may do so at any moment, with
 *	  no lock a read-only login could take to stop it;
 *	- sit in a schema that a trusted role owns: the schema's owner could
 *	  rename it and put another relation, with code of its own, in the
 *	  table's place between this check and the query;
 *	- call, in those expressions, only functions and operators whose
 *	  functions trusted roles own (found through pg_depend, which records
 *	  every function and operator an expression uses).
 *
 * The planner also folds the immutable functions of CHECK constraints
 * (constraint exclusion, which the default "partition" applies to every
 * partition and inheritance child): those of the table and of what is under
 * it must be of trusted roles too, though pgsandbox's source sessions set
 * constraint_exclusion off as well (sandbox_conn.c).
 *
 * Values carry code of their own: a column's type may be a domain, whose
 * constraints and default run when a value is made of that type (a
 * replication apply, a cast in a query), over a base type, or an array,
 * composite or range holding such a domain.  Every type a column's type
 * holds, followed through all of these, must call only functions of
 * trusted roles (its input, output and range functions, its default, a
 * domain's constraints), and a domain must belong to a trusted role, whose
 * owner may add a constraint to it at any moment.
 *
 * A live snapshot's apply writes the published tables' rows, which runs
 * more of their code: their constraints, defaults and generated columns,
 * and their triggers enabled for replicas.  Its check (live_checks.c) asks
 * for the functions those call to be of trusted roles too.
 *
 * Otherwise nothing is planned: the caller gets an error naming the object
 * and the role.  Row-level security policies are not checked: every
 * session that reads a source sets row_security off (sandbox_conn.c), so
 * no policy runs; a table a policy would filter fails the read instead.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "utils/builtins.h"

/*
 * One row per thing that makes a table unsafe to plan on, the first first:
 * its kind, the table, the object (index, statistics object), the function,
 * the role that is not trusted, the table of $1 it is (or is under), and
 * for a type, the column whose type holds it (NULL where an expression of
 * the table names it, a cast in a CHECK say) and the type.  Types are
 * followed once each (closure), then matched to the columns that hold
 * them.  $1 is the tables, $2 the trusted roles' names, $3 whether the
 * code that writing a row runs counts.  Catalog queries only: no user
 * table is planned on.
 */
#define SBX_UNTRUSTED_SQL_HEAD \
	"WITH RECURSIVE tables(relid, root) AS (" \
	"  SELECT r, r FROM pg_catalog.unnest($1::pg_catalog.oid[]) r" \
	"  UNION" \
	"  SELECT i.inhrelid, t.root FROM pg_catalog.pg_inherits i" \
	"    JOIN tables t ON i.inhparent OPERATOR(pg_catalog.=) t.relid)," \
	" dbowner AS (" \
	"  SELECT d.datdba FROM pg_catalog.pg_database d" \
	"   WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())," \
	" trusted(oid) AS (" \
	"  SELECT r.oid FROM pg_catalog.pg_roles r" \
	"   WHERE r.rolsuper OR r.rolname OPERATOR(pg_catalog.=) CURRENT_USER" \
	"      OR r.rolname OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]))," \
	" owners(role, effective) AS (" \
	"  SELECT r.oid, CASE WHEN r.oid OPERATOR(pg_catalog.=) pg_catalog.to_regrole('pg_database_owner')" \
	"                     THEN (SELECT datdba FROM dbowner) ELSE r.oid END" \
	"    FROM pg_catalog.pg_roles r)," \
	" untrusted(role) AS (" \
	"  SELECT o.role FROM owners o WHERE o.effective NOT IN (SELECT oid FROM trusted))," \
	" objects(relid, root, kind, classid, objid, name) AS (" \
	"  SELECT t.relid, t.root, 'partition key', 'pg_catalog.pg_class'::pg_catalog.regclass, t.relid," \
	"         NULL::pg_catalog.text" \
	"    FROM tables t" \
	"  UNION ALL" \
	"  SELECT i.indrelid, t.root, 'index', 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid," \
	"         i.indexrelid::pg_catalog.regclass::pg_catalog.text" \
	"    FROM pg_catalog.pg_index i JOIN tables t ON i.indrelid OPERATOR(pg_catalog.=) t.relid" \
	"  UNION ALL" \
	"  SELECT s.stxrelid, t.root, 'statistics object', 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, s.oid," \
	"         pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)" \
	"         pg_catalog.quote_ident(s.stxname)" \
	"    FROM pg_catalog.pg_statistic_ext s" \
	"    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace" \
	"    JOIN tables t ON s.stxrelid OPERATOR(pg_catalog.=) t.relid" \
	"  UNION ALL" \
	"  SELECT g.tgrelid, t.root, 'trigger', 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid," \
	"         pg_catalog.quote_ident(g.tgname)" \
	"    FROM pg_catalog.pg_trigger g JOIN tables t ON g.tgrelid OPERATOR(pg_catalog.=) t.relid" \
	"   WHERE $3 AND NOT g.tgisinternal AND g.tgenabled OPERATOR(pg_catalog.=) ANY (ARRAY['A', 'R']::\"char\"[])" \
	"  UNION ALL" \
	"  SELECT k.conrelid, t.root, 'constraint', 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid," \
	"         pg_catalog.quote_ident(k.conname)" \
	"    FROM pg_catalog.pg_constraint k JOIN tables t ON k.conrelid OPERATOR(pg_catalog.=) t.relid" \
	"   WHERE $3 OR k.contype OPERATOR(pg_catalog.=) 'c'" \
	"  UNION ALL" \
	"  SELECT a.adrelid, t.root, 'default of column', 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid," \
	"         (SELECT pg_catalog.quote_ident(c.attname) FROM pg_catalog.pg_attribute c" \
	"           WHERE c.attrelid OPERATOR(pg_catalog.=) a.adrelid AND c.attnum OPERATOR(pg_catalog.=) a.adnum)" \
	"    FROM pg_catalog.pg_attrdef a JOIN tables t ON a.adrelid OPERATOR(pg_catalog.=) t.relid" \
	"   WHERE $3)," \
	" seeds(typid, relid, root, col) AS (" \
	"  SELECT a.atttypid, t.relid, t.root, pg_catalog.quote_ident(a.attname)" \
	"    FROM pg_catalog.pg_attribute a JOIN tables t ON a.attrelid OPERATOR(pg_catalog.=) t.relid" \
	"   WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"  UNION" \
	"  SELECT d.refobjid, o.relid, o.root, NULL" \
	"    FROM objects o" \
	"    JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) o.classid" \
	"                               AND d.objid OPERATOR(pg_catalog.=) o.objid" \
	"   WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass)," \
	" closure(start, typid) AS (" \
	"  SELECT DISTINCT s.typid, s.typid FROM seeds s" \
	"  UNION" \
	"  SELECT c.start, x.typid FROM closure c" \
	"    JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) c.typid," \
	"    LATERAL (SELECT y.typbasetype WHERE y.typbasetype OPERATOR(pg_catalog.<>) 0" \
	"             UNION ALL SELECT y.typelem WHERE y.typelem OPERATOR(pg_catalog.<>) 0" \
	"             UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a" \
	"                        WHERE a.attrelid OPERATOR(pg_catalog.=) y.typrelid" \
	"                          AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped" \
	"             UNION ALL SELECT r.rngsubtype FROM pg_catalog.pg_range r" \
	"                        WHERE r.rngtypid OPERATOR(pg_catalog.=) y.oid" \
	"             UNION ALL SELECT d.refobjid FROM pg_catalog.pg_depend d" \
	"                        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass" \
	"                          AND d.objid OPERATOR(pg_catalog.=) y.oid" \
	"                          AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass" \
	"             UNION ALL SELECT d.refobjid FROM pg_catalog.pg_constraint k" \
	"                        JOIN pg_catalog.pg_depend d" \
	"                          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass" \
	"                         AND d.objid OPERATOR(pg_catalog.=) k.oid" \
	"                        WHERE k.contypid OPERATOR(pg_catalog.=) y.oid" \
	"                          AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass"

/* PostgreSQL 14 and later: a multirange holds its range */
#define SBX_UNTRUSTED_SQL_MULTIRANGE \
	"             UNION ALL SELECT r.rngtypid FROM pg_catalog.pg_range r" \
	"                        WHERE r.rngmultitypid OPERATOR(pg_catalog.=) y.oid"

#define SBX_UNTRUSTED_SQL_TAIL \
	"             ) x(typid))," \
	" types AS (SELECT DISTINCT typid FROM closure)," \
	" typefuncs(typid, kind, name, refclassid, refobjid) AS (" \
	"  SELECT c.typid, 'type', NULL::pg_catalog.text, d.refclassid, d.refobjid" \
	"    FROM types c JOIN pg_catalog.pg_depend d" \
	"      ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass" \
	"     AND d.objid OPERATOR(pg_catalog.=) c.typid" \
	"  UNION ALL" \
	"  SELECT c.typid, 'domain constraint', pg_catalog.quote_ident(k.conname), d.refclassid, d.refobjid" \
	"    FROM types c JOIN pg_catalog.pg_constraint k ON k.contypid OPERATOR(pg_catalog.=) c.typid" \
	"    JOIN pg_catalog.pg_depend d" \
	"      ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass" \
	"     AND d.objid OPERATOR(pg_catalog.=) k.oid)," \
	" typeproblems(typid, kind, name, func, role) AS (" \
	"  SELECT y.oid, 'domain', NULL::pg_catalog.text, NULL::pg_catalog.text," \
	"         pg_catalog.pg_get_userbyid(y.typowner)::pg_catalog.text" \
	"    FROM types c JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) c.typid" \
	"   WHERE y.typtype OPERATOR(pg_catalog.=) 'd' AND y.typowner IN (SELECT role FROM untrusted)" \
	"  UNION ALL" \
	"  SELECT f.typid, f.kind, f.name, p.oid::pg_catalog.regprocedure::pg_catalog.text," \
	"         pg_catalog.pg_get_userbyid(p.proowner)::pg_catalog.text" \
	"    FROM typefuncs f" \
	"    JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=)" \
	"         CASE WHEN f.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass" \
	"              THEN (SELECT op.oprcode FROM pg_catalog.pg_operator op" \
	"                     WHERE op.oid OPERATOR(pg_catalog.=) f.refobjid)::pg_catalog.oid" \
	"              ELSE f.refobjid END" \
	"   WHERE f.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog.pg_proc'::pg_catalog.regclass," \
	"                                                      'pg_catalog.pg_operator'::pg_catalog.regclass])" \
	"     AND p.proowner IN (SELECT role FROM untrusted))," \
	" functions(relid, root, kind, name, func) AS (" \
	"  SELECT o.relid, o.root, o.kind, o.name," \
	"         CASE WHEN d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass" \
	"              THEN (SELECT op.oprcode FROM pg_catalog.pg_operator op" \
	"                     WHERE op.oid OPERATOR(pg_catalog.=) d.refobjid)::pg_catalog.oid" \
	"              ELSE d.refobjid END" \
	"    FROM objects o" \
	"    JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) o.classid" \
	"                               AND d.objid OPERATOR(pg_catalog.=) o.objid" \
	"   WHERE d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog.pg_proc'::pg_catalog.regclass," \
	"                                                      'pg_catalog.pg_operator'::pg_catalog.regclass]))" \
	" SELECT kind, relid::pg_catalog.regclass::pg_catalog.text, name, func, role, root, col, typ FROM (" \
	"  SELECT 1 AS ord, 'table' AS kind, c.oid AS relid, t.root, NULL::pg_catalog.text AS name," \
	"         NULL::pg_catalog.text AS func, pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text AS role," \
	"         NULL::pg_catalog.text AS col, NULL::pg_catalog.text AS typ" \
	"    FROM tables t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid" \
	"   WHERE c.relowner IN (SELECT role FROM untrusted)" \
	"  UNION ALL" \
	"  SELECT 2, 'schema', c.oid, t.root, pg_catalog.quote_ident(n.nspname), NULL," \
	"         pg_catalog.pg_get_userbyid(n.nspowner)::pg_catalog.text, NULL, NULL" \
	"    FROM tables t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid" \
	"    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace" \
	"   WHERE n.nspowner IN (SELECT role FROM untrusted)" \
	"  UNION ALL" \
	"  SELECT 3, f.kind, f.relid, f.root, f.name, p.oid::pg_catalog.regprocedure::pg_catalog.text," \
	"         pg_catalog.pg_get_userbyid(p.proowner)::pg_catalog.text, NULL, NULL" \
	"    FROM functions f JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) f.func" \
	"   WHERE p.proowner IN (SELECT role FROM untrusted)" \
	"  UNION ALL" \
	"  SELECT 4, p.kind, s.relid, s.root, p.name, p.func, p.role, s.col," \
	"         p.typid::pg_catalog.regtype::pg_catalog.text" \
	"    FROM seeds s JOIN closure c ON c.start OPERATOR(pg_catalog.=) s.typid" \
	"    JOIN typeproblems p ON p.typid OPERATOR(pg_catalog.=) c.typid) u" \
	" ORDER BY ord, relid, col NULLS LAST, typ, kind OPERATOR(pg_catalog.<>) 'domain', name, func"

/*
 * The rows of SBX_UNTRUSTED_SQL for 'relids', on a prepared session; with
 * 'applied', also of the code that writing a row runs (triggers that fire
 * in a replication apply, constraints, defaults and generated columns).
 */
static PGresult *
sbx_untrusted_objects(PGconn *conn, const char *source, const char *trusted_owners,
					  List *relids, bool applied)
{
	StringInfoData oids;
	const char *params[3];
	PGresult   *res;
	ListCell   *lc;

	initStringInfo(&oids);
	appendStringInfoChar(&oids, '{');
	foreach(lc, relids)
		appendStringInfo(&oids, "%s%u", oids.len > 1 ? "," : "", lfirst_oid(lc));
	appendStringInfoChar(&oids, '}');
	params[0] = oids.data;
	params[1] = trusted_owners && trusted_owners[0] ? trusted_owners : "{}";
	params[2] = applied ? "true" : "false";
	res = sbx_remote_exec(conn,
						  psprintf("%s%s%s", SBX_UNTRUSTED_SQL_HEAD,
								   PQserverVersion(conn) >= 140000 ? SBX_UNTRUSTED_SQL_MULTIRANGE : "",
								   SBX_UNTRUSTED_SQL_TAIL),
						  3, params, PGRES_TUPLES_OK,
						  psprintf("could not check the owners of source \"%s\"", source));
	pfree(oids.data);
	return res;
}

/*
 * Check, on connection 'conn' to 'source' (a prepared session, in the
 * snapshot of the queries to come), that pgsandbox may plan queries on the
 * tables 'relids' (OIDs in the source), with their partitions and
 * children, trusting the superusers, the login and the roles of
 * 'trusted_owners' (a text[] literal, "{}" for none).  'why' says what
 * the queries are for, in the error's detail ("to copy its masked rows").
 * Raises an error naming the first thing that is not trusted.
 */
void
sbx_check_tables_trusted(PGconn *conn, const char *source, const char *trusted_owners,
						 List *relids, const char *why)
{
	sbx_check_tables_trusted_ext(conn, source, trusted_owners, relids, false, why);
}

/*
 * sbx_check_tables_trusted, and with 'applied' of the code that writing a
 * row runs too, for tables whose rows a replication apply writes.
 */
void
sbx_check_tables_trusted_ext(PGconn *conn, const char *source, const char *trusted_owners,
							 List *relids, bool applied, const char *why)
{
	PGresult   *res;
	char	   *kind;
	char	   *table;
	char	   *name;
	char	   *func;
	char	   *role;
	char	   *col;
	char	   *typ;

	if (relids == NIL)
		return;
	res = sbx_untrusted_objects(conn, source, trusted_owners, relids, applied);
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return;
	}
	kind = pstrdup(PQgetvalue(res, 0, 0));
	table = pstrdup(PQgetvalue(res, 0, 1));
	name = pstrdup(PQgetvalue(res, 0, 2));
	func = pstrdup(PQgetvalue(res, 0, 3));
	role = pstrdup(PQgetvalue(res, 0, 4));
	col = pstrdup(PQgetvalue(res, 0, 6));
	typ = pstrdup(PQgetvalue(res, 0, 7));
	PQclear(res);

	if (strcmp(kind, "table") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s of source \"%s\" belongs to role \"%s\", which the source does not trust",
						table, source, role),
				 errdetail("pgsandbox would plan a query on the table %s, and its owner may give it, at any moment, an index or statistics expression that the planner runs with the rights of the source's login.",
						   why),
				 errhint("Trust the role with pgsandbox.trust_owners(), or leave the table's rows out with pgsandbox.exclude_data().")));
	if (strcmp(kind, "schema") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schema %s of table %s of source \"%s\" belongs to role \"%s\", which the source does not trust",
						name, table, source, role),
				 errdetail("pgsandbox would plan a query on the table %s, and the schema's owner could rename it and put another relation, with code of its own, in the table's place.",
						   why),
				 errhint("Trust the role with pgsandbox.trust_owners(), or leave the table's rows out with pgsandbox.exclude_data().")));
	if (strcmp(kind, "domain") == 0 || strcmp(kind, "type") == 0 ||
		strcmp(kind, "domain constraint") == 0)
	{
		/* where the type is: a column's, or one an expression names */
		char	   *where = col[0]
			? psprintf("in the type of column %s of table %s", col, table)
			: psprintf("named by an expression of table %s", table);

		if (strcmp(kind, "domain") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("domain %s, %s of source \"%s\", belongs to role \"%s\", which the source does not trust",
							typ, where, source, role),
					 errdetail("pgsandbox would read or write the table's values %s, and the domain's owner may give it, at any moment, a constraint or default whose functions run with the rights of pgsandbox's session.",
							   why),
					 errhint("Trust the role with pgsandbox.trust_owners(), or leave the table's rows out with pgsandbox.exclude_data().")));
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 strcmp(kind, "type") == 0 ?
				 errmsg("type %s, %s of source \"%s\", calls function %s, which belongs to role \"%s\", which the source does not trust",
						typ, where, source, func, role) :
				 errmsg("constraint %s of domain %s, %s of source \"%s\", calls function %s, which belongs to role \"%s\", which the source does not trust",
						name, typ, where, source, func, role),
				 errdetail("pgsandbox would read or write the table's values %s, and such a function runs with the rights of pgsandbox's session.",
						   why),
				 errhint("Have a trusted role own the function, trust its owner with pgsandbox.trust_owners(), or leave the table's rows out with pgsandbox.exclude_data().")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 strcmp(kind, "partition key") == 0 ?
			 errmsg("the partition key of table %s of source \"%s\" calls function %s, which belongs to role \"%s\", which the source does not trust",
					table, source, func, role) :
			 errmsg("%s %s of table %s of source \"%s\" calls function %s, which belongs to role \"%s\", which the source does not trust",
					kind, name, table, source, func, role),
			 errdetail("pgsandbox would plan a query on the table %s, and the planner runs such a function with the rights of the source's login.",
					   why),
			 errhint("Have a trusted role own the function, trust its owner with pgsandbox.trust_owners(), or leave the table's rows out with pgsandbox.exclude_data().")));
}

/*
 * Of the tables 'relids', those pgsandbox may not plan a query on, as
 * sbx_check_tables_trusted would find, for a caller that leaves them out
 * rather than fail.
 */
List *
sbx_untrusted_tables(PGconn *conn, const char *source, const char *trusted_owners,
					 List *relids)
{
	List	   *untrusted = NIL;
	PGresult   *res;

	if (relids == NIL)
		return NIL;
	res = sbx_untrusted_objects(conn, source, trusted_owners, relids, false);
	for (int i = 0; i < PQntuples(res); i++)
		untrusted = list_append_unique_oid(untrusted, atooid(PQgetvalue(res, i, 5)));
	PQclear(res);
	return untrusted;
}

/*
 * In the caller's backend: the roles source 'name' trusts, as a text[]
 * literal ("{}" for none, or before the catalog has them).
 */
char *
sbx_source_trusted_owners(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	char	   *result = "{}";
	MemoryContext outer = CurrentMemoryContext;

	if (!sbx_catalog_has_trust())
		return pstrdup(result);
	values[0] = CStringGetTextDatum(name);
	SPI_connect();
	if (SPI_execute_with_args("SELECT trusted_owners::text FROM pgsandbox.source WHERE name = $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source \"%s\"", name);
	if (SPI_processed == 1)
		result = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	result = MemoryContextStrdup(outer, result ? result : "{}");
	SPI_finish();
	return result;
}
