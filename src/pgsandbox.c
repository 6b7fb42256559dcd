/*-------------------------------------------------------------------------
 *
 * pgsandbox.c
 *	  Module entry point: settings, shared memory hooks and the registration
 *	  of the lifecycle worker; the checks every SQL function makes first
 *	  (its arguments, the database it is called in).
 *
 * pgsandbox must be loaded through shared_preload_libraries: the request
 * queue lives in shared memory and the lifecycle worker is started by the
 * postmaster.  Loaded any other way, the module only defines its settings
 * and every SQL function refuses to run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgsandbox.h"
#include "postmaster/postmaster.h"
#include "sbx_masking.h"
#include "sbx_shmem.h"
#include "sbx_sql.h"
#include "sbx_worker.h"
#include "storage/ipc.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#if PG_VERSION_NUM < 150000
#error "pgsandbox needs PostgreSQL 15 or later"
#endif

PG_MODULE_MAGIC;

char	   *sbx_database = NULL;
int			sbx_gc_interval = 60;
int			sbx_default_ttl = 4 * 3600;
int			sbx_max_ttl = 24 * 3600;
int			sbx_max_protect = 7 * 24 * 3600;
int			sbx_max_concurrent_clones = 2;
char	   *sbx_host = NULL;
int			sbx_port = 0;
char	   *sbx_bin_dir = NULL;
int			sbx_max_sandboxes = 100;
int			sbx_max_sandboxes_per_owner = 10;
int			sbx_max_saves_per_sandbox = 5;
bool		sbx_locale_fallback = false;
int			sbx_copy_strategy = SBX_COPY_AUTO;
int			sbx_default_idle_timeout = 0;
int			sbx_max_total_size = 0;
int			sbx_max_size_per_owner = 0;
int			sbx_max_sandbox_size = 0;
int			sbx_size_check_interval = 30;
bool		sbx_read_only_setting = false;
int			sbx_lock_timeout = 1000;

static const struct config_enum_entry sbx_copy_strategy_options[] = {
	{"wal_log", SBX_COPY_WAL_LOG, false},
	{"file_copy", SBX_COPY_FILE_COPY, false},
	{"auto", SBX_COPY_AUTO, false},
	{NULL, 0, false}
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void sbx_shmem_request(void);
static void sbx_shmem_startup(void);

void
_PG_init(void)
{
	DefineCustomIntVariable("pgsandbox.gc_interval",
							"Time between two passes of the reaper over expired sandboxes.",
							NULL,
							&sbx_gc_interval,
							60, 1, 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.default_ttl",
							"Lifetime of a sandbox when clone() is given no ttl.",
							NULL,
							&sbx_default_ttl,
							4 * 3600, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_ttl",
							"Longest lifetime a sandbox may be given.",
							NULL,
							&sbx_max_ttl,
							24 * 3600, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_protect",
							"Longest protection from expiry a sandbox may be given.",
							"protect() refuses a moment further than this from now.",
							&sbx_max_protect,
							7 * 24 * 3600, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.default_idle_timeout",
							"Idle timeout of a sandbox when clone() is given none.",
							"A sandbox with no session and no login for this long is dropped; 0 turns idle expiry off.",
							&sbx_default_idle_timeout,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_total_size",
							"Disk budget of all of pgsandbox's databases together.",
							"Sandboxes, snapshots and pool members; a copy that would pass it is refused.  0 turns it off.",
							&sbx_max_total_size,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_size_per_owner",
							"Disk budget of each owner's sandboxes together.",
							"0 turns it off.",
							&sbx_max_size_per_owner,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_sandbox_size",
							"Size past which a sandbox is made read-only.",
							"0 turns it off.",
							&sbx_max_sandbox_size,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.size_check_interval",
							"Time between two measurements of the sandboxes in use.",
							NULL,
							&sbx_size_check_interval,
							30, 1, 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("pgsandbox.read_only",
							 "Refuses every write in this session.",
							 "Set by pgsandbox on a sandbox's database when it grows past pgsandbox.max_sandbox_size.",
							 &sbx_read_only_setting,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.lock_timeout",
							"Longest the lifecycle worker waits for a lock on a sandbox's role or database.",
							"A step that waits longer is given up, recorded with what held the lock, and tried again later.",
							&sbx_lock_timeout,
							1000, 10, 600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_concurrent_clones",
							"Number of clones that may run at the same time.",
							"Further clone requests wait their turn.",
							&sbx_max_concurrent_clones,
							2, 1, SBX_MAX_CLONE_JOBS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("pgsandbox.host",
							   "Host written into the connection strings of new sandboxes.",
							   "Empty means the server's first Unix-domain socket directory.",
							   &sbx_host,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.port",
							"Port written into the connection strings of new sandboxes.",
							"Zero means the server's own port.",
							&sbx_port,
							0, 0, 65535,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("pgsandbox.bin_dir",
							   "Directory that holds the pg_dump and pg_restore programs.",
							   "Empty means the directory of the server's own programs.",
							   &sbx_bin_dir,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_sandboxes",
							"Number of live sandboxes the cluster may hold.",
							"Sandboxes being cloned count too.",
							&sbx_max_sandboxes,
							100, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_sandboxes_per_owner",
							"Number of live sandboxes one role may own.",
							"Sandboxes being cloned count too.",
							&sbx_max_sandboxes_per_owner,
							10, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.max_saves_per_sandbox",
							"Number of saves one sandbox may have.",
							"0 turns save() off. Saves count against their owner's sandboxes too.",
							&sbx_max_saves_per_sandbox,
							5, 0, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("pgsandbox.locale_fallback",
							 "Lets a sandbox take the server's default encoding and locale when the source's are not available.",
							 "When off, such a clone fails. When on, the sandbox's ready event records the difference.",
							 &sbx_locale_fallback,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("pgsandbox.copy_strategy",
							 "How a clone copies a snapshot: CREATE DATABASE's STRATEGY.",
							 "auto clones the files on PostgreSQL 18 where the filesystem shares blocks (XFS with reflink, Btrfs), and uses wal_log elsewhere; "
							 "wal_log copies page by page through the WAL; file_copy copies files and forces two checkpoints.",
							 &sbx_copy_strategy,
							 SBX_COPY_AUTO,
							 sbx_copy_strategy_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("pgsandbox.mask_functions",
							   "Functions that the masking rules of administrators who are not superusers may call, besides pgsandbox's own list.",
							   "A comma-separated list: a bare name is a function of pg_catalog, schema.name any other. Such a rule runs with the rights of the source's login.",
							   &sbx_mask_functions_setting,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   sbx_check_mask_functions, NULL, NULL);

	/*
	 * Only while preloading may a PGC_POSTMASTER setting be defined; loaded
	 * later, the module only says it is not loaded (sbx_queue_attach).
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("pgsandbox.database",
								   "Database in which pgsandbox is installed and its worker runs.",
								   NULL,
								   &sbx_database,
								   "postgres",
								   PGC_POSTMASTER,
								   0,
								   NULL, NULL, NULL);

	MarkGUCPrefixReserved("pgsandbox");

	if (!process_shared_preload_libraries_in_progress)
		return;

	sbx_install_login_check();
	sbx_install_read_only_check();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sbx_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sbx_shmem_startup;

	sbx_register_lifecycle_worker();
}

static void
sbx_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	sbx_queue_request_shmem();
	sbx_usage_request_shmem();
}

static void
sbx_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	sbx_queue_startup_shmem();
	sbx_usage_startup_shmem();
}

/*
 * Host for the connection strings handed to sandbox users: the setting, or
 * the server's own socket.
 */
const char *
sbx_effective_host(void)
{
	if (sbx_host && sbx_host[0] != '\0')
		return sbx_host;
	return sbx_local_socket_host();
}

/*
 * The first entry of unix_socket_directories, or localhost if there is none.
 */
const char *
sbx_local_socket_host(void)
{
	static char first_dir[MAXPGPATH];
	const char *p = GetConfigOption("unix_socket_directories", true, false);
	int			len = 0;

	if (p == NULL)
		return "localhost";
	while (*p == ' ')
		p++;
	while (p[len] != '\0' && p[len] != ',' && len < MAXPGPATH - 1)
		len++;
	while (len > 0 && p[len - 1] == ' ')
		len--;
	if (len == 0)
		return "localhost";
	memcpy(first_dir, p, len);
	first_dir[len] = '\0';
	return first_dir;
}

int
sbx_effective_port(void)
{
	return sbx_port > 0 ? sbx_port : PostPortNumber;
}

/* Directory of pg_dump and pg_restore: the setting or the server's bindir. */
const char *
sbx_effective_bin_dir(void)
{
	static char dir[MAXPGPATH];

	if (sbx_bin_dir && sbx_bin_dir[0] != '\0')
		return sbx_bin_dir;
	strlcpy(dir, my_exec_path, sizeof(dir));
	get_parent_directory(dir);
	return dir;
}

/* Raise the "must not be null" error for argument n when it is NULL. */
void
sbx_require_arg(FunctionCallInfo fcinfo, int n, const char *argname)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/*
 * Whether pgsandbox's catalog table 'table' has column 'column'.  Between a
 * restart with a new library and ALTER EXTENSION pgsandbox UPDATE the
 * catalog is an older version's: clones, drops and the reaper then use the
 * statements that version knows, and what it lacks waits for the update.
 * Each version's catalog is told by a column it added.  Needs a
 * transaction.
 */
static bool
sbx_catalog_has_column(const char *table, const char *column)
{
	Oid			nsp = get_namespace_oid("pgsandbox", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, column) != InvalidAttrNumber;
}

/* 0.3: snapshots and pools (the sandbox table's kind column) */
bool
sbx_catalog_has_kinds(void)
{
	return sbx_catalog_has_column("sandbox", "kind");
}

/* 0.5: sources have generations */
bool
sbx_catalog_has_generations(void)
{
	return sbx_catalog_has_column("source", "generation");
}

/* 0.6: sandboxes can be protected */
bool
sbx_catalog_has_protection(void)
{
	return sbx_catalog_has_column("sandbox", "protected_until");
}

/* 0.7: the use and size of sandboxes, for idle expiry, budget and metrics */
bool
sbx_catalog_has_usage(void)
{
	return sbx_catalog_has_column("sandbox", "read_only_at");
}

/* 0.8: resets and saves */
bool
sbx_catalog_has_saves(void)
{
	return sbx_catalog_has_column("sandbox", "reset_started_at");
}

/* 0.9: drops under way are marked 'dropping', blocked steps recorded */
bool
sbx_catalog_has_dropping(void)
{
	return sbx_catalog_has_column("sandbox", "drop_started_at");
}

/*
 * A condition, in SQL, that snapshot or pool member s was made of source o
 * as it is now, not of an earlier source of the same name: of the same
 * generation.  A source removed and added again, even in one transaction
 * while a snapshot of the old one was being built, is a new one.  Before
 * the catalog has generations, the times it was added and s made.
 */
const char *
sbx_same_source(void)
{
	return sbx_catalog_has_generations() ? "o.generation = s.source_generation"
		: "o.added_at <= s.created_at";
}

/* a fragment of SQL that needs the 0.3 catalog, or "" before it */
const char *
sbx_if_kinds(const char *fragment)
{
	return sbx_catalog_has_kinds() ? fragment : "";
}

/*
 * Lifecycle functions work only in the database the worker serves.
 */
void
sbx_check_database(void)
{
	char	   *dbname = get_database_name(MyDatabaseId);

	sbx_queue_attach();
	if (dbname == NULL || strcmp(dbname, sbx_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgsandbox serves database \"%s\", not \"%s\"",
						sbx_database, dbname ? dbname : "?"),
				 errhint("Call pgsandbox functions in database \"%s\", or set pgsandbox.database.",
						 sbx_database)));
}
