/*-------------------------------------------------------------------------
 *
 * source_reader.c
 *	  pgsandbox_reader: the role pgsandbox reads a source of this cluster
 *	  as when the source's connection string names no host and no user.
 *
 * Before 0.12 such a source was read as the server's own superuser.  The
 * extension's script now makes pgsandbox_reader, without login: a member
 * of pg_read_all_data with BYPASSRLS (pg_dump reads every row of every
 * table, and no row-level security policy, which is its author's code,
 * may run for it), and nothing more.  Each time the lifecycle worker finds
 * the extension installed it gives the role LOGIN and a new random
 * password, from a parse tree so that no statement text holds it; the
 * password lives only in this file's shared memory, from which clone
 * workers and the callers of rule checks and suggest_masks() take it.
 * The login check (login_check.c) keeps the role out of pgsandbox's own
 * database, whose tables hold the sources' secrets.
 *
 * A source whose connection string names a user is read as that user: an
 * administrator who wants a superuser there says so, and doctor() flags
 * it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_spi.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/wait_event.h"

typedef struct SbxReaderShared
{
	slock_t		mutex;
	bool		ready;			/* password holds the role's password */
	bool		absent;			/* the worker found no such role (before 0.12) */
	Latch	   *worker_latch;	/* the lifecycle worker's, to wake it */
	char		password[SBX_PASSWORD_LEN + 1];
} SbxReaderShared;

static SbxReaderShared *sbx_reader = NULL;

/* how long a caller waits for the worker to give the reader its password */
#define SBX_READER_WAIT_MS 5000

void
sbx_reader_request_shmem(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(SbxReaderShared)));
}

void
sbx_reader_startup_shmem(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sbx_reader = ShmemInitStruct("pgsandbox_reader", sizeof(SbxReaderShared), &found);
	if (!found)
	{
		memset(sbx_reader, 0, sizeof(SbxReaderShared));
		SpinLockInit(&sbx_reader->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Whether the role exists: it is made by the script of 0.12 and later. */
bool
sbx_reader_exists(void)
{
	return OidIsValid(get_role_oid(SBX_READER_ROLE, true));
}

/*
 * In the lifecycle worker, as it starts: the latch to set for a caller
 * that waits for the reader's password.
 */
void
sbx_reader_attach_worker(Latch *latch)
{
	if (sbx_reader == NULL)
		return;
	SpinLockAcquire(&sbx_reader->mutex);
	sbx_reader->worker_latch = latch;
	SpinLockRelease(&sbx_reader->mutex);
}

/*
 * In the lifecycle worker, outside a transaction: give pgsandbox_reader
 * login and a new password, once per start of the worker, if the role
 * exists.  A failure (a lock held on the role past pgsandbox.lock_timeout)
 * is a warning, and the next pass tries again.
 */
void
sbx_reader_prepare(void)
{
	static bool prepared = false;
	char		password[SBX_PASSWORD_LEN + 1];
	MemoryContext cxt = CurrentMemoryContext;

	if (prepared || sbx_reader == NULL)
		return;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (!sbx_reader_exists())
	{
		CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
		SpinLockAcquire(&sbx_reader->mutex);
		sbx_reader->absent = true;
		SpinLockRelease(&sbx_reader->mutex);
		return;
	}
	SpinLockAcquire(&sbx_reader->mutex);
	sbx_reader->absent = false;
	SpinLockRelease(&sbx_reader->mutex);
	sbx_random_string(password, SBX_PASSWORD_LEN,
					  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
	PG_TRY();
	{
		sbx_run_utility("ALTER ROLE " SBX_READER_ROLE " LOGIN", password);
		CommitTransactionCommand();
		SpinLockAcquire(&sbx_reader->mutex);
		memcpy(sbx_reader->password, password, sizeof(password));
		sbx_reader->ready = true;
		SpinLockRelease(&sbx_reader->mutex);
		prepared = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(WARNING,
				(errmsg("could not give role \"%s\" its password: %s",
						SBX_READER_ROLE, edata->message),
				 errdetail("Sources of this cluster that name no user cannot be read until it has one; the worker tries again.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	explicit_bzero(password, sizeof(password));
	MemoryContextSwitchTo(cxt);
}

/*
 * pgsandbox_reader's password, copied into password (SBX_PASSWORD_LEN + 1
 * bytes); false if the worker has not given it one yet.
 */
bool
sbx_reader_password(char *password)
{
	bool		ready = false;

	if (sbx_reader == NULL)
		return false;
	SpinLockAcquire(&sbx_reader->mutex);
	if (sbx_reader->ready)
	{
		memcpy(password, sbx_reader->password, SBX_PASSWORD_LEN + 1);
		ready = true;
	}
	SpinLockRelease(&sbx_reader->mutex);
	return ready;
}

/*
 * How a source of this cluster that names no user is to be read: as
 * pgsandbox_reader, with its password copied into password
 * (SBX_PASSWORD_LEN + 1 bytes); with the server's own identity, as before
 * 0.12, only while the catalog has no such role; or not yet, while the
 * role waits for the worker to give it a password, so that such a source
 * is never read as the server's superuser meanwhile.  In a transaction the
 * role is looked up; outside one, what the lifecycle worker last found.
 */
SbxReaderLogin
sbx_reader_login(char *password)
{
	bool		absent = false;

	if (sbx_reader_password(password))
		return SBX_READER_READY;
	if (IsTransactionState())
		absent = !sbx_reader_exists();
	else if (sbx_reader != NULL)
	{
		SpinLockAcquire(&sbx_reader->mutex);
		absent = sbx_reader->absent;
		SpinLockRelease(&sbx_reader->mutex);
	}
	if (absent)
		return SBX_READER_ABSENT;
	/* without the preloaded library there is no worker to give a password */
	if (sbx_reader == NULL)
		return SBX_READER_WAITING;

	/*
	 * Right after the server starts, or the extension is made, a caller may
	 * come before the worker's first pass: wait for it a little.  A worker
	 * never waits, least of all the one that gives the password.
	 */
	if (MyBackendType != B_BG_WORKER)
	{
		Latch	   *worker_latch;

		/* the worker looks for the extension when woken, or every 10 s */
		SpinLockAcquire(&sbx_reader->mutex);
		worker_latch = sbx_reader->worker_latch;
		SpinLockRelease(&sbx_reader->mutex);
		if (worker_latch != NULL)
			SetLatch(worker_latch);
		for (int i = 0; i < SBX_READER_WAIT_MS / 50; i++)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			if (sbx_reader_password(password))
				return SBX_READER_READY;
		}
	}
	return SBX_READER_WAITING;
}

/* The error of a source that cannot be read until the worker runs. */
void
sbx_reader_waiting_error(const char *source, int *sqlerrcode, char **message,
						 char **detail)
{
	*sqlerrcode = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
	*message = source ? psprintf("source \"%s\" cannot be read yet", source)
		: pstrdup("a source of this cluster cannot be read yet");
	*detail = psprintf("Sources of this cluster that name no user are read as %s, which the background worker gives a password when it starts; it has not yet. doctor() says whether the worker runs.",
					   SBX_READER_ROLE);
}
