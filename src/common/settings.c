/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  pgsandbox's settings: their variables, their definitions, and the
 *	  values derived from them (the host, port and bin directory in use).
 *
 * Every layer reads these variables; _PG_init defines them through
 * sbx_define_settings, one group at a time.  The masking rules' own
 * setting is defined by the masking layer (mask_expr.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "sbx_common.h"
#include "utils/guc.h"

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
int			sbx_copy_lock_wait = 30000;
int			sbx_live_catchup_timeout = 5000;
int			sbx_live_max_lag = 300;
int			sbx_live_look_interval = 5000;
char	   *sbx_dump_compression = NULL;
int			sbx_clone_jobs = SBX_DEFAULT_CLONE_JOBS;
int			sbx_parallel_min_size = SBX_DEFAULT_PARALLEL_MIN_SIZE;
int			sbx_bulk_copy_min_size = SBX_DEFAULT_BULK_COPY_MIN_SIZE;
int			sbx_file_copy_min_size = SBX_DEFAULT_FILE_COPY_MIN_SIZE;

static const struct config_enum_entry sbx_copy_strategy_options[] = {
	{"wal_log", SBX_COPY_WAL_LOG, false},
	{"file_copy", SBX_COPY_FILE_COPY, false},
	{"auto", SBX_COPY_AUTO, false},
	{NULL, 0, false}
};

/* lifetimes, and how the worker paces itself */
static void
sbx_define_lifecycle_settings(void)
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

	DefineCustomIntVariable("pgsandbox.max_concurrent_clones",
							"Number of clones that may run at the same time.",
							"Further clone requests wait their turn.",
							&sbx_max_concurrent_clones,
							2, 1, SBX_MAX_CLONE_JOBS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.lock_timeout",
							"Longest the lifecycle worker waits for a lock on a sandbox's role or database.",
							"A step that waits longer is given up, recorded with what held the lock, and tried again later. "
							"A masked clone's pg_dump, and one around a table the clone worker copies, waits as long for its locks on the source's tables.",
							&sbx_lock_timeout,
							1000, 10, 600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.copy_lock_wait",
							"Longest a copy of a snapshot waits out a lock or a session on the snapshot's database.",
							"An autovacuum, a refresh or a copy beside it holds a snapshot for moments: the copy tries again, "
							"each try waiting pgsandbox.lock_timeout, until this long has passed, then fails naming what held it.",
							&sbx_copy_lock_wait,
							30000, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* how many sandboxes, and how much disk */
static void
sbx_define_limit_settings(void)
{
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
}

/*
 * pg_dump's --compress: a level (0 to 9), or from pg_dump 16 a method with
 * an optional level or detail ("lz4", "zstd:3", "none").  pg_dump judges
 * the value; this only keeps it to the characters such values are made of.
 */
static bool
sbx_check_dump_compression(char **newval, void **extra, GucSource source)
{
	const char *p = *newval;

	if (p == NULL || p[0] == '\0' || strlen(p) > 32)
	{
		GUC_check_errdetail("A compression is a level or a method, of 1 to 32 characters.");
		return false;
	}
	for (; *p; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			  *p == ':' || *p == '=' || *p == ',' || *p == '_' || *p == '-'))
		{
			GUC_check_errdetail("A compression has only lower-case letters, digits and \":=,_-\".");
			return false;
		}
	}
	return true;
}

/* how pg_dump and pg_restore run, and how a snapshot is copied */
static void
sbx_define_copy_settings(void)
{
	DefineCustomStringVariable("pgsandbox.dump_compression",
							   "Compression of the archive pg_dump writes for a clone: its --compress.",
							   "0 (none) by default: the archive goes through a pipe or a private file on this host, read once.",
							   &sbx_dump_compression,
							   "0",
							   PGC_SIGHUP,
							   0,
							   sbx_check_dump_compression, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.clone_jobs",
							"Jobs of a parallel dump and restore, counted in pgsandbox.max_concurrent_clones.",
							"1 turns parallel clones off. A clone takes as many jobs as are free, up to this.",
							&sbx_clone_jobs,
							SBX_DEFAULT_CLONE_JOBS, 1, 16,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.parallel_min_size",
							"Size of a source below which its data clone streams through one pg_dump and one pg_restore.",
							NULL,
							&sbx_parallel_min_size,
							SBX_DEFAULT_PARALLEL_MIN_SIZE, 0, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.bulk_copy_min_size",
							"Size from which a source's largest table, holding half its pages or more, is copied by the clone worker, in binary where it can, rather than through pg_dump.",
							"-1 copies every table through pg_dump.",
							&sbx_bulk_copy_min_size,
							SBX_DEFAULT_BULK_COPY_MIN_SIZE, -1, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.file_copy_min_size",
							"Size of a snapshot from which copy_strategy = auto copies its files (STRATEGY FILE_COPY) where it cannot clone them.",
							"-1 never copies files that cannot be cloned.",
							&sbx_file_copy_min_size,
							SBX_DEFAULT_FILE_COPY_MIN_SIZE, -1, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.live_catchup_timeout",
							"Longest a copy of a live snapshot waits for its apply to reach the source's present before it pauses it.",
							"A copy that waited this long holds what the apply had reached, and its data_as_of says so.",
							&sbx_live_catchup_timeout,
							5000, 0, 600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.live_look_interval",
							"How often the worker looks at each live source: how far its apply is, and whether it still works.",
							"Each look is a connection to the source.  live_as_of moves in steps of it.",
							&sbx_live_look_interval,
							5000, 200, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgsandbox.live_max_lag",
							"How far behind its source a live snapshot may fall before a live_lag event says so.",
							"0 turns the events off.",
							&sbx_live_max_lag,
							300, 0, INT_MAX / 1000,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/* how clones are made and reached */
static void
sbx_define_clone_settings(void)
{
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
}

/*
 * Define pgsandbox's settings (but the masking rules' own).  Only while
 * preloading may the PGC_POSTMASTER one, pgsandbox.database, be defined.
 */
void
sbx_define_settings(void)
{
	sbx_define_lifecycle_settings();
	sbx_define_limit_settings();
	sbx_define_clone_settings();
	sbx_define_copy_settings();
	sbx_define_tenant_settings();
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
