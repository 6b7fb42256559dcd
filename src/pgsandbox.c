/*-------------------------------------------------------------------------
 *
 * pgsandbox.c
 *	  Module entry point: it defines the settings (settings.c and the
 *	  masking layer's), installs the hooks, asks for shared memory and
 *	  registers the lifecycle worker.  It only calls down; nothing calls it.
 *
 * pgsandbox must be loaded through shared_preload_libraries: the request
 * queue lives in shared memory and the lifecycle worker is started by the
 * postmaster.  Loaded any other way, the module only defines its settings
 * and every SQL function refuses to run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_hooks.h"
#include "sbx_masking.h"
#include "sbx_shmem.h"
#include "sbx_worker.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#if PG_VERSION_NUM < 150000
#error "pgsandbox needs PostgreSQL 15 or later"
#endif

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void sbx_shmem_request(void);
static void sbx_shmem_startup(void);

/*
 * Define the settings, and, when preloaded, install the hooks, ask for
 * shared memory and register the lifecycle worker.
 */
void
_PG_init(void)
{
	sbx_define_settings();
	sbx_define_mask_settings();
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
	sbx_reader_request_shmem();
}

static void
sbx_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	sbx_queue_startup_shmem();
	sbx_usage_startup_shmem();
	sbx_reader_startup_shmem();
}
