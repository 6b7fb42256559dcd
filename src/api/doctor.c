/*-------------------------------------------------------------------------
 *
 * doctor.c
 *	  pgsandbox.doctor(): what an administrator should fix for pgsandbox to
 *	  work, and to work safely.
 *
 * Each check gives one row: its name, whether it passed, and a sentence
 * saying what was found.  The checks only read; a source is connected to
 * with a short timeout to learn its server version.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "postmaster/bgworker_internals.h"
#include "postmaster/postmaster.h"
#include "replication/logicallauncher.h"
#include "sbx_api.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(pgsandbox_doctor);

/* Major version of a client program, from its --version output, or 0. */
static int
sbx_program_major(const char *path)
{
	char	   *argv[3];
	char	   *out;
	const char *p;

	argv[0] = (char *) path;
	argv[1] = "--version";
	argv[2] = NULL;
	out = sbx_child_output(path, argv,
						   sbx_child_environment(NULL, false, NULL, NULL, NULL), 256);
	if (out == NULL)
		return 0;
	/* "pg_dump (PostgreSQL) 15.20 (Debian ...)" */
	p = strstr(out, ") ");
	return p ? atoi(p + 2) : 0;
}

static void
sbx_check_programs(SbxDoctor *d, int *dump_major)
{
	const char *dir = sbx_effective_bin_dir();
	const char *const programs[] = {"pg_dump", "pg_restore"};

	*dump_major = 0;
	for (int i = 0; i < lengthof(programs); i++)
	{
		char	   *path = psprintf("%s/%s", dir, programs[i]);
		char	   *check = psprintf("%s found", programs[i]);
		int			major;

		if (access(path, X_OK) != 0)
		{
			sbx_doctor_row(d, check, false,
						   psprintf("%s is not an executable file; set pgsandbox.bin_dir.", path));
			continue;
		}
		major = sbx_program_major(path);
		if (i == 0)
			*dump_major = major;
		sbx_doctor_row(d, check, major > 0,
					   major > 0 ? psprintf("%s, version %d.", path, major)
					   : psprintf("%s did not tell its version.", path));
	}
}

/*
 * A source read as a superuser: the code that objects of the source run
 * when pgsandbox plans a query on them would run as a superuser, were a
 * check of source_trust.c ever to miss it, and pg_dump reads as one.
 */
static void
sbx_check_source_login(SbxDoctor *d, const char *name, PGconn *conn)
{
	PGresult   *res = libpqsrv_exec(conn,
									"SELECT r.rolsuper, r.rolname FROM pg_catalog.pg_roles r"
									" WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER",
									PG_WAIT_EXTENSION);
	char	   *check = psprintf("source \"%s\" is not read as a superuser", name);

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		sbx_doctor_row(d, check, false, "Could not read the login's role on the source.");
	else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
		sbx_doctor_row(d, check, false,
					   psprintf("It logs in as \"%s\", a superuser. Name a role of least privilege in its connection string (for example one in pg_read_all_data), or, for a database of this cluster, name no user: pgsandbox then reads it as %s.",
								PQgetvalue(res, 0, 1), SBX_READER_ROLE));
	else
		sbx_doctor_row(d, check, true,
					   psprintf("It logs in as \"%s\".", PQgetvalue(res, 0, 1)));
	PQclear(res);
}

/*
 * max_connections must hold the superusers' reserve, the slots kept from
 * sandbox logins, and the clones running at once: each clone slot may
 * hold a pg_dump and a reader on a source of this cluster, and a
 * pg_restore and a COPY into the sandbox, none of which the reserve
 * refuses.
 */
static void
sbx_check_connections(SbxDoctor *d)
{
	int			clones = 4 * sbx_max_concurrent_clones;
	int			server = sbx_server_reserved_slots_compat();
	int			needed = server + sbx_reserved_connections + clones + 1;

	sbx_doctor_row(d, "max_connections holds the reserved slots and the clones",
				   MaxConnections >= needed,
				   psprintf("max_connections is %d; %d are needed: %d reserved by the server (superuser_reserved_connections, and reserved_connections from PostgreSQL 16), "
							"pgsandbox.reserved_connections = %d, %d for pgsandbox.max_concurrent_clones = %d "
							"clones (a pg_dump, a reader, a pg_restore and a COPY each), and one for a sandbox.",
							MaxConnections, needed, server, sbx_reserved_connections,
							clones, sbx_max_concurrent_clones));
}

/* Every source's server must not be newer than pg_dump. */
static void
sbx_check_sources(SbxDoctor *d, int dump_major)
{
	List	   *names = NIL;
	List	   *conninfos = NIL;
	List	   *untrusted = NIL;
	ListCell   *ln;
	ListCell   *lc;
	ListCell   *lu;
	List	   *publications = NIL;
	int			i = 0;
	MemoryContext outer = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute(psprintf("SELECT name, conninfo, require_password, %s"
							 "  FROM pgsandbox.source ORDER BY name",
							 sbx_catalog_has_live() ? "live_publication" : "NULL::text"),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the sources");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(outer);
		bool		isnull;

		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		conninfos = lappend(conninfos, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		untrusted = lappend_int(untrusted,
								DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 3, &isnull)));
		publications = lappend(publications,
							   SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();

	forthree(ln, names, lc, conninfos, lu, untrusted)
	{
		const char *name = lfirst(ln);
		char	   *check = psprintf("source \"%s\" can be dumped", name);
		PGconn	   *volatile conn;
		int			code;
		char	   *message;
		char	   *detail;
		char	   *why = NULL;

		/* as a clone would connect, with a timeout of our own */
		conn = sbx_source_try_connect(name, lfirst(lc), lfirst_int(lu) != 0, 5,
									  &code, &message, &detail);
		if (conn == NULL)
			sbx_doctor_row(d, check, false,
						   psprintf("Cannot connect: %s",
									code == ERRCODE_CONNECTION_FAILURE ? detail
									: psprintf("%s. %s", message, detail)));
		else if (!sbx_source_look_begin(conn, 5, &why))
		{
			sbx_doctor_row(d, check, false, psprintf("Cannot prepare a session there: %s", why));
			libpqsrv_disconnect(conn);
		}
		else
		{
			/* a bounded session, closed whatever happens (a cancel) */
			PG_TRY();
			{
				int			major = PQserverVersion(conn) / 10000;

				if (dump_major > 0 && major > dump_major)
					sbx_doctor_row(d, check, false,
								   psprintf("The source runs PostgreSQL %d and pg_dump is version %d; "
											"pg_dump cannot dump a newer server.", major, dump_major));
				else
					sbx_doctor_row(d, check, true,
								   psprintf("The source runs PostgreSQL %d.", major));
				sbx_check_source_login(d, name, conn);
				/* what a live snapshot needs of it (doctor_live.c) */
				if (list_nth(publications, i) != NULL)
					sbx_doctor_live_source(d, name, list_nth(publications, i), conn);
			}
			PG_FINALLY();
			{
				libpqsrv_disconnect(conn);
			}
			PG_END_TRY();
		}
		/* how far its live snapshot is behind, as this server last measured */
		if (list_nth(publications, i) != NULL)
			sbx_doctor_live_lag(d, name);
		explicit_bzero(lfirst(lc), strlen(lfirst(lc)));
		i++;
	}
}

/*
 * The order in which the server reads pg_hba.conf's rules: from
 * PostgreSQL 16, included files make line numbers ambiguous.
 */
#if PG_VERSION_NUM >= 160000
#define SBX_HBA_ORDER	"rule_number"
#else
#define SBX_HBA_ORDER	"line_number"
#endif

/*
 * pg_hba.conf lines that let sandbox roles in without a password, or that
 * could not be read.
 *
 * The server reads pg_hba.conf top down, and the first line that matches
 * a connection decides: a "trust" line that could match a sandbox role is
 * harmless when an earlier line already matches every sandbox role (all
 * users, or the sandbox group) for the same connections, in every
 * database it names, and asks for a password or rejects them.
 */
static void
sbx_check_hba(SbxDoctor *d)
{
	StringInfoData found;

	initStringInfo(&found);
	SPI_connect();
	if (SPI_execute("SELECT r.line_number, r.type, r.auth_method, r.error"
					"  FROM pg_catalog.pg_hba_file_rules r"
					" WHERE r.error IS NOT NULL"
					"    OR (r.auth_method IN ('trust')"
					"        AND (r.user_name && ARRAY['all', '+" SBX_SANDBOX_GROUP "']"
					"             OR EXISTS (SELECT 1 FROM unnest(r.user_name) u WHERE u LIKE 'sbx\\_%'))"
					"        AND NOT EXISTS ("
					"          SELECT 1 FROM pg_catalog.pg_hba_file_rules e"
					"           WHERE e." SBX_HBA_ORDER " < r." SBX_HBA_ORDER " AND e.error IS NULL"
					"             AND e.auth_method IN ('scram-sha-256', 'md5', 'password', 'reject')"
					"             AND e.user_name && ARRAY['all', '+" SBX_SANDBOX_GROUP "']"
					"             AND (e.database = ARRAY['all'] OR e.database @> r.database)"
					"             AND (e.type = r.type"
					"                  OR (e.type = 'host' AND r.type <> 'local'))"
					"             AND (e.type = 'local' OR e.address = 'all'"
					"                  OR (e.address IS NOT DISTINCT FROM r.address"
					"                      AND e.netmask IS NOT DISTINCT FROM r.netmask))))"
					" ORDER BY r.line_number", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_hba_file_rules");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *line = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *method = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		char	   *error = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4);

		appendStringInfo(&found, "%sline %s %s", found.len ? "; " : "",
						 line ? line : "?",
						 error ? psprintf("has an error: %s", error)
						 : psprintf("lets sandbox roles in with \"%s\", without a password", method));
	}
	SPI_finish();

	if (found.len == 0)
		sbx_doctor_row(d, "pg_hba.conf asks sandbox roles for their password", true,
					   "No line lets sandbox roles in without a password.");
	else
		sbx_doctor_row(d, "pg_hba.conf asks sandbox roles for their password", false,
					   psprintf("%s. Put a line such as \"local all +%s scram-sha-256\" above it, or narrow it.",
								found.data, SBX_SANDBOX_GROUP));
}

/* The first column of a query's rows, joined with ", " ("" if none). */
static char *
sbx_name_list(const char *query)
{
	StringInfoData list;

	initStringInfo(&list);
	SPI_connect();
	if (SPI_execute(query, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run a doctor() query");
	for (uint64 i = 0; i < SPI_processed; i++)
		appendStringInfo(&list, "%s%s", list.len ? ", " : "",
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	return list.data;
}

/*
 * Directories of base/ that no database owns: what a crash left of a
 * CREATE DATABASE.  pgsandbox's own (an OID it recorded first, orphans.c)
 * are removed by the worker when it next starts; the others are only
 * reported.  A database being made right now shows here too.
 */
static void
sbx_check_orphan_directories(SbxDoctor *d)
{
	char	   *found = sbx_name_list(psprintf(
		"SELECT 'base/' || b.oid || ' ('"
		"       || pg_catalog.pg_size_pretty(COALESCE((SELECT pg_catalog.sum((pg_catalog.pg_stat_file("
		"                'base/' || b.oid || '/' || f, true)).size)"
		"           FROM pg_catalog.pg_ls_dir('base/' || b.oid, true, false) f), 0)::bigint)"
		"       || CASE WHEN %s THEN ', pgsandbox''s, removed when the worker next starts'"
		"               ELSE ', not pgsandbox''s, left alone' END || ')'"
		"  FROM (SELECT n::pg_catalog.oid AS oid FROM pg_catalog.pg_ls_dir('base') n"
		"         WHERE n ~ '^[0-9]+$') b"
		" WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_database db WHERE db.oid = b.oid)"
		" ORDER BY b.oid",
		sbx_catalog_has_orphans()
		? "EXISTS (SELECT FROM pgsandbox.sandbox s WHERE s.planned_db_oid = b.oid)" : "false"));

	sbx_doctor_row(d, "no database directory is orphaned", found[0] == '\0',
				   found[0] == '\0' ? "Every directory of base/ belongs to a database."
				   : psprintf("Directories of base/ that no database owns: %s.", found));
}

/*
 * Snapshots: each ready one locked (closed to connections, owned by the
 * bootstrap superuser, its role without login); no closed database or role
 * of a snapshot's making left without its row; and each pool's fill.
 */
static void
sbx_check_snapshots(SbxDoctor *d)
{
	char	   *unlocked;
	char	   *orphan_roles;
	char	   *pools;

	/* a live snapshot takes its apply's connections (pgsandbox_live) alone */
	unlocked = sbx_name_list(psprintf("SELECT s.name FROM pgsandbox.sandbox s"
									  "  JOIN pg_catalog.pg_database d ON d.oid = s.db_oid"
									  "  LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.role_oid"
									  " WHERE s.kind = 'snapshot' AND s.status = 'ready'"
									  "   AND (d.datdba <> 10 OR r.rolcanlogin OR %s)"
									  " ORDER BY 1",
									  sbx_catalog_has_live()
									  ? "CASE WHEN s.live_slot IS NULL THEN d.datallowconn"
									  "  ELSE pg_catalog.has_database_privilege('public', d.oid, 'CONNECT') END"
									  : "d.datallowconn"));
	/*
	 * EXISTS, not a join: from PostgreSQL 16 on, a role may be granted the
	 * group once per grantor, and would then be listed once per grant.
	 */
	/*
	 * From 0.9, the role of a row no longer live that a drop had to leave
	 * behind is tracked too: the worker drops it ('no step is blocked').
	 */
	orphan_roles = sbx_name_list(psprintf("SELECT r.rolname FROM pg_catalog.pg_roles r"
										  " WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m"
										  "                WHERE m.member = r.oid"
										  "                  AND m.roleid = '" SBX_SANDBOX_GROUP "'::pg_catalog.regrole)"
										  "   AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
										  "                    WHERE s.role_oid = r.oid%s)"
										  " ORDER BY 1",
										  sbx_catalog_has_dropping()
										  ? " OR s.reset_role = r.oid"
										  : " AND s.status IN ('cloning', 'ready')"));
	pools = sbx_name_list("SELECT pg_catalog.format('%s (%s): %s of %s ready', p.source,"
						  "   CASE WHEN p.schema_only THEN 'schema only' ELSE 'with data' END,"
						  "   p.ready, p.size)"
						  "  FROM pgsandbox.pools p WHERE p.ready < p.size ORDER BY 1");

	sbx_doctor_row(d, "every snapshot is locked", unlocked[0] == '\0',
				   unlocked[0] == '\0'
				   ? "Every ready snapshot is closed to connections (a live one to all but its apply's), owned by the bootstrap superuser, and its role cannot log in."
				   : psprintf("Snapshots open to connections or to their roles: %s. "
							  "Drop them with pgsandbox.drop_snapshot().", unlocked));
	sbx_doctor_row(d, "every sandbox role is tracked", orphan_roles[0] == '\0',
				   orphan_roles[0] == '\0'
				   ? "No member of " SBX_SANDBOX_GROUP " lacks a live sandbox, snapshot or pool member."
				   : psprintf("Members of %s with no live sandbox, snapshot or pool member: %s. "
							  "pgsandbox will not drop them; check and drop them by hand.",
							  SBX_SANDBOX_GROUP, orphan_roles));
	sbx_doctor_row(d, "pools are full", pools[0] == '\0',
				   pools[0] == '\0' ? "Every pool has as many ready sandboxes as its size (or there is no pool)."
				   : psprintf("Pools still filling: %s. The worker fills them in the background; "
							  "see pgsandbox.snapshots for a snapshot that fails.", pools));
}

/*
 * Steps of the worker that keep failing (0.9): drops not finished, roles
 * a drop had to leave behind, and what was last recorded, within the hour,
 * as a step blocked by a lock someone else held.
 */
static void
sbx_check_blocked(SbxDoctor *d)
{
	char	   *blocked;

	blocked = sbx_name_list("WITH recent AS ("
							"  SELECT DISTINCT ON (e.sandbox) e.sandbox, e.action, e.detail"
							"    FROM pgsandbox.event e"
							"   WHERE e.at > pg_catalog.now() - interval '1 hour'"
							"   ORDER BY e.sandbox, e.id DESC),"
							" stuck AS ("
							"  SELECT s.name, 'dropping since ' || s.drop_started_at AS what"
							"    FROM pgsandbox.sandbox s WHERE s.status = 'dropping'"
							"  UNION ALL"
							"  SELECT r.rolname, 'a role left without login, to drop'"
							"    FROM pgsandbox.sandbox s"
							"    JOIN pg_catalog.pg_roles r ON r.oid = s.role_oid AND r.rolname = s.name"
							"   WHERE s.status IN ('dropped', 'failed')"
							"  UNION ALL"
							"  SELECT r.rolname, 'a reset''s role left without login, to drop'"
							"    FROM pgsandbox.sandbox s"
							"    JOIN pg_catalog.pg_roles r ON r.oid = s.reset_role"
							"   WHERE s.reset_started_at IS NULL"
							"  UNION ALL"
							"  SELECT e.sandbox, 'blocked' FROM recent e WHERE e.action = 'blocked')"
							" SELECT pg_catalog.format('%s (%s%s)', t.name,"
							"        pg_catalog.string_agg(DISTINCT t.what, ', '),"
							"        (SELECT '; last: ' || e.detail FROM recent e"
							"          WHERE e.sandbox = t.name AND e.action = 'blocked'))"
							"   FROM stuck t GROUP BY t.name ORDER BY t.name");
	sbx_doctor_row(d, "no step is blocked", blocked[0] == '\0',
				   blocked[0] == '\0'
				   ? "No step of the worker is blocked: no drop is left unfinished, and no role is left behind."
				   : psprintf("Steps the worker keeps trying: %s. "
							  "It tries again with a backoff; end the sessions or roll back the prepared transactions named.",
							  blocked));
}

/* Sandbox databases without a live catalog row, and the reverse. */
static void
sbx_check_catalog(SbxDoctor *d)
{
	char	   *orphans;
	char	   *missing;

	/* a sandbox role's database, or one that looks like a locked snapshot */
	orphans = sbx_name_list("SELECT d.datname FROM pg_catalog.pg_database d"
							"  JOIN pg_catalog.pg_roles r ON r.oid = d.datdba"
							" WHERE ((NOT r.rolsuper"
							"         AND EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m"
							"                      WHERE m.member = d.datdba"
							"                        AND m.roleid = '" SBX_SANDBOX_GROUP "'::pg_catalog.regrole))"
							"        OR (d.datname LIKE 'sbx\\_%' AND d.datdba = 10"
							"            AND NOT d.datallowconn))"
							"   AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
							"                    WHERE s.name = d.datname AND s.db_oid = d.oid"
							"                      AND s.status IN ('cloning', 'ready', 'dropping'))"
							" ORDER BY 1");
	missing = sbx_name_list("SELECT s.name FROM pgsandbox.sandbox s"
							" WHERE s.status = 'ready'"
							"   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_database d"
							"                    WHERE d.datname = s.name AND d.oid = s.db_oid)"
							" ORDER BY 1");

	if (sbx_catalog_has_kinds())
		sbx_check_snapshots(d);
	if (sbx_catalog_has_dropping())
		sbx_check_blocked(d);
	sbx_doctor_row(d, "every sandbox database is tracked", orphans[0] == '\0',
				   orphans[0] == '\0' ? "No database of a sandbox role, and no closed sbx_ database of the bootstrap superuser (a snapshot's), lacks a live catalog row."
				   : psprintf("Databases of sandbox roles, or closed sbx_ databases of the bootstrap superuser, with no live catalog row: %s. "
							  "pgsandbox will not drop them; check and drop them by hand.",
							  orphans));
	sbx_check_orphan_directories(d);
	sbx_doctor_row(d, "every ready sandbox has its database", missing[0] == '\0',
				   missing[0] == '\0' ? "Every ready sandbox has its database."
				   : psprintf("Ready sandboxes without their database: %s. "
							  "The worker finishes their drop when it next starts.",
							  missing));
}

/*
 * doctor() RETURNS TABLE(check text, ok boolean, detail text)
 */
Datum
pgsandbox_doctor(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SbxDoctor	d;
	int			dump_major;
	pid_t		worker_pid = 0;
	int			needed;
	int			launcher;

	sbx_require_admin();
	InitMaterializedSRF(fcinfo, 0);
	d.store = rsinfo->setResult;
	d.desc = rsinfo->setDesc;

	if (sbx_shared == NULL)
	{
		sbx_doctor_row(&d, "loaded at server start", false,
					   "pgsandbox is not in shared_preload_libraries: add it and restart the server.");
		return (Datum) 0;
	}
	sbx_doctor_row(&d, "loaded at server start", true,
				   "pgsandbox is in shared_preload_libraries.");

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	worker_pid = sbx_shared->worker_pid;
	LWLockRelease(sbx_shared->lock);
	sbx_doctor_row(&d, "worker running", worker_pid != 0,
				   worker_pid != 0 ? psprintf("The pgsandbox worker runs as process %d.", (int) worker_pid)
				   : psprintf("No pgsandbox worker runs for database \"%s\"; see the server log.",
							  sbx_database));

	/* the logical replication launcher takes a slot too, when there is one */
	launcher = max_logical_replication_workers > 0 ? 1 : 0;
	needed = 1 + sbx_max_concurrent_clones + launcher;
	sbx_doctor_row(&d, "max_worker_processes", max_worker_processes >= needed,
				   psprintf("max_worker_processes is %d; %d are needed: the pgsandbox worker, "
							"pgsandbox.max_concurrent_clones = %d clone workers and %d for the "
							"logical replication launcher. Parallel queries, and the short-lived "
							"worker that rolls back a dropped sandbox's prepared transactions, "
							"take from the same pool.",
							max_worker_processes, needed, sbx_max_concurrent_clones, launcher));

	sbx_check_connections(&d);
	sbx_check_programs(&d, &dump_major);
	sbx_check_sources(&d, dump_major);
	sbx_check_hba(&d);
	sbx_check_catalog(&d);
	return (Datum) 0;
}
