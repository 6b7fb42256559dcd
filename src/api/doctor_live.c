/*-------------------------------------------------------------------------
 *
 * doctor_live.c
 *	  doctor()'s checks of a live source, on a connection to it: what a live
 *	  snapshot needs there (wal_level), what its slot costs the source (the
 *	  WAL it keeps, and whether max_slot_wal_keep_size bounds it), what the
 *	  publication leaves out (but for the tables exclude_data leaves out),
 *	  and slots pgsandbox made there that no live snapshot reads any more;
 *	  and, from this server's catalog, how far the live snapshot is behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "sbx_api.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

/* The slots of live snapshots of 'name' the catalog knows, as a text[] literal. */
static char *
sbx_known_slots(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	char	   *slots = "{}";
	MemoryContext outer = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT COALESCE(pg_catalog.array_agg(live_slot), '{}')::text"
							  "  FROM pgsandbox.sandbox"
							  " WHERE source = $1 AND live_slot IS NOT NULL"
							  "   AND status IN ('cloning', 'ready', 'dropping')",
							  1, argtypes, values, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		slots = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1));
	SPI_finish();
	return slots;
}

/* Append element 'value' (NULL for a null) to the elements in 'buf'. */
static void
sbx_append_array_element(StringInfo buf, const char *value)
{
	if (buf->len > 0)
		appendStringInfoChar(buf, ',');
	if (value == NULL)
	{
		appendStringInfoString(buf, "NULL");
		return;
	}
	appendStringInfoChar(buf, '"');
	for (const char *c = value; *c; c++)
	{
		if (*c == '"' || *c == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *c);
	}
	appendStringInfoChar(buf, '"');
}

/*
 * The exclude_data patterns of source 'name' as regular expressions, for
 * the source: schemas (NULL where a pattern names none) and tables, as two
 * text[] literals of the same length.
 */
static void
sbx_exclusion_regexes(const char *name, char **schemas, char **tables)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	MemoryContext outer = CurrentMemoryContext;
	StringInfoData s;
	StringInfoData t;

	initStringInfo(&s);
	initStringInfo(&t);
	SPI_connect();
	if (SPI_execute_with_args("SELECT target FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = 'exclude_data'",
							  1, argtypes, values, NULL, true, 0) == SPI_OK_SELECT)
	{
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			char	   *schema_re;
			char	   *table_re;
			MemoryContext inner = MemoryContextSwitchTo(outer);

			sbx_table_pattern_regex(SPI_getvalue(SPI_tuptable->vals[i],
												 SPI_tuptable->tupdesc, 1),
									&schema_re, &table_re);
			sbx_append_array_element(&s, schema_re);
			sbx_append_array_element(&t, table_re);
			MemoryContextSwitchTo(inner);
		}
	}
	SPI_finish();
	*schemas = psprintf("{%s}", s.data);
	*tables = psprintf("{%s}", t.data);
}

void
sbx_doctor_live_source(SbxDoctor *d, const char *name, const char *publication,
					   PGconn *conn)
{
	const char *params[5];
	PGresult   *res;
	char	   *known = sbx_known_slots(name);
	char	   *schemas;
	char	   *tables;

	sbx_exclusion_regexes(name, &schemas, &tables);
	params[0] = publication;
	params[1] = known;
	params[2] = "pgsandbox\\_%";
	params[3] = schemas;
	params[4] = tables;
	res = libpqsrv_exec_params(conn,
							   "SELECT pg_catalog.current_setting('wal_level'),"
							   "       COALESCE(pg_catalog.current_setting('max_slot_wal_keep_size', true), '-1'),"
							   "       (SELECT pg_catalog.string_agg(pg_catalog.format('%s keeps %s', s.slot_name,"
							   "                pg_catalog.pg_size_pretty(pg_catalog.pg_wal_lsn_diff("
							   "                  pg_catalog.pg_current_wal_lsn(), s.restart_lsn))), ', ')"
							   "          FROM pg_catalog.pg_replication_slots s"
							   "         WHERE s.slot_name = ANY ($2::text[])),"
							   "       (SELECT pg_catalog.string_agg(pg_catalog.format('%I.%I', n.nspname, c.relname),"
							   "                                     ', ' ORDER BY n.nspname, c.relname)"
							   "          FROM pg_catalog.pg_class c"
							   "          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							   "         WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition"
							   "           AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'"
							   "           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t"
							   "                            WHERE t.pubname = $1 AND t.schemaname = n.nspname"
							   "                              AND t.tablename = c.relname)"
							   "           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e"
							   "                            WHERE e.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
							   "                              AND e.objid = c.oid AND e.deptype = 'e')"
							   "           AND NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest($4::text[]),"
							   "                                            pg_catalog.unnest($5::text[])) p(s, t)"
							   "                            WHERE (p.s IS NULL OR n.nspname ~ p.s) AND c.relname ~ p.t)),"
							   "       (SELECT pg_catalog.string_agg(s.slot_name, ', ' ORDER BY s.slot_name)"
							   "          FROM pg_catalog.pg_replication_slots s"
							   "         WHERE s.slot_name LIKE $3 AND s.database = pg_catalog.current_database()"
							   "           AND s.slot_name <> ALL ($2::text[]))",
							   5, NULL, params, NULL, NULL, 0, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		sbx_doctor_row(d, psprintf("live source \"%s\" can be followed", name), false,
					   "Could not read the source's settings and slots.");
		PQclear(res);
		return;
	}
	sbx_doctor_row(d, psprintf("live source \"%s\" can be followed", name),
				   strcmp(PQgetvalue(res, 0, 0), "logical") == 0,
				   psprintf("wal_level is %s there%s.", PQgetvalue(res, 0, 0),
							strcmp(PQgetvalue(res, 0, 0), "logical") == 0 ? ""
							: ", and a live snapshot needs logical"));
	sbx_doctor_row(d, psprintf("live source \"%s\" bounds the WAL its slot keeps", name),
				   strcmp(PQgetvalue(res, 0, 1), "-1") != 0,
				   psprintf("max_slot_wal_keep_size is %s there; %s. %s",
							PQgetvalue(res, 0, 1),
							PQgetisnull(res, 0, 2) ? "no slot of a live snapshot is there yet"
							: PQgetvalue(res, 0, 2),
							strcmp(PQgetvalue(res, 0, 1), "-1") == 0
							? "While this server does not read the slot (stopped, or cut off), the source keeps its WAL without bound: set max_slot_wal_keep_size there."
							: "Past it the source drops the slot's WAL, and the live snapshot is rebuilt."));
	sbx_doctor_row(d, psprintf("live source \"%s\" publishes every table", name),
				   PQgetisnull(res, 0, 3),
				   PQgetisnull(res, 0, 3)
				   ? psprintf("Publication \"%s\" publishes every table of the source.", publication)
				   : psprintf("Publication \"%s\" leaves out %s: their rows stay as the live snapshot's build found them.",
							  publication, PQgetvalue(res, 0, 3)));
	sbx_doctor_row(d, psprintf("no slot pgsandbox made on live source \"%s\" is left behind", name),
				   PQgetisnull(res, 0, 4),
				   PQgetisnull(res, 0, 4)
				   ? "Every slot of pgsandbox's there is a live snapshot's."
				   : psprintf("Slots no live snapshot reads: %s. They keep the source's WAL: drop them there with pg_drop_replication_slot().",
							  PQgetvalue(res, 0, 4)));
	PQclear(res);
}

/*
 * How far the live snapshot of source 'name' that serves is behind it, as
 * the lifecycle worker last measured (worker/live.c), against
 * pgsandbox.live_max_lag.
 */
void
sbx_doctor_live_lag(SbxDoctor *d, const char *name)
{
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2] = {CStringGetTextDatum(name), Int32GetDatum(sbx_live_max_lag)};
	char	   *check = psprintf("the live snapshot of source \"%s\" keeps up", name);
	MemoryContext outer = CurrentMemoryContext;
	char	   *detail = NULL;
	bool		ok = false;

	SPI_connect();
	/* before the first measurement, the build's snapshot is the bound */
	if (SPI_execute_with_args(psprintf("WITH l AS (SELECT COALESCE(GREATEST(s.live_as_of, s.data_as_of), s.data_as_of) AS as_of,"
							  "                  s.live_lag_bytes, %s AS state"
							  "             FROM pgsandbox._current_snapshots() c"
							  "             JOIN pgsandbox.sandbox s ON s.id = c.id"
							  "            WHERE c.source = $1 AND NOT c.schema_only AND s.live_slot IS NOT NULL)"
							  " SELECT $2 <= 0 OR pg_catalog.now() - l.as_of <= $2 * interval '1 second',"
							  "        pg_catalog.format('It holds every change the source made up to %%s'\n"
							  "                          ' (%%s s ago, by this server''s clock); its WAL not applied yet: %%s;'\n"
							  "                          ' pgsandbox.live_max_lag is %%s.%%s',"
							  "                          l.as_of,"
							  "                          pg_catalog.round(pg_catalog.date_part('epoch',"
							  "                                           pg_catalog.now() - l.as_of)::numeric, 1),"
							  "                          COALESCE(pg_catalog.pg_size_pretty(l.live_lag_bytes), 'not measured yet'),"
							  "                          CASE WHEN $2 <= 0 THEN '0: no bound' ELSE $2 || ' s' END,"
							  "                          COALESCE(' Its apply: ' || l.state || '.', ''))"
							  "   FROM l",
							  sbx_catalog_has_live_state()
							  ? "s.live_state || ' since ' || s.live_state_since::text" : "NULL::text"),
							  2, argtypes, values, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;

		ok = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		detail = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		detail = detail ? MemoryContextStrdup(outer, detail) : NULL;
	}
	SPI_finish();
	sbx_doctor_row(d, check, ok,
				   detail ? detail
				   : "No live snapshot of it serves yet: its clones dump the source, or copy an older snapshot, until one is built.");
}
