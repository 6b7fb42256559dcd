/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  The request queue in shared memory between SQL callers and the
 *	  lifecycle worker.
 *
 * There is one request slot per backend, so a caller never finds the queue
 * full.  A caller fills a free slot, marks it PENDING and sets the worker's
 * latch; the worker marks it RUNNING, later DONE, and sets the caller's
 * latch.  A caller that stops waiting (cancel, statement_timeout, exit)
 * marks its slot abandoned: the worker then undoes whatever the request had
 * started and frees the slot itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgsandbox.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* how long a caller waits for a missing worker to come back */
#define SBX_WORKER_ABSENCE_MS	30000

SbxShared  *sbx_shared = NULL;

static Size
sbx_shmem_size(void)
{
	return add_size(offsetof(SbxShared, requests),
					mul_size(MaxBackends, sizeof(SbxRequest)));
}

void
sbx_queue_request_shmem(void)
{
	RequestAddinShmemSpace(sbx_shmem_size());
	RequestNamedLWLockTranche("pgsandbox", 1);
}

void
sbx_queue_startup_shmem(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sbx_shared = ShmemInitStruct("pgsandbox", sbx_shmem_size(), &found);
	if (!found)
	{
		memset(sbx_shared, 0, sbx_shmem_size());
		sbx_shared->lock = &(GetNamedLWLockTranche("pgsandbox"))->lock;
		sbx_shared->nrequests = MaxBackends;
		sbx_shared->next_serial = 1;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The shared state, or an error if the module was not preloaded.
 */
SbxShared *
sbx_queue_attach(void)
{
	if (sbx_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgsandbox is not loaded"),
				 errhint("Add pgsandbox to shared_preload_libraries and restart the server.")));
	return sbx_shared;
}

void
sbx_queue_wake_worker(void)
{
	Latch	   *latch;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	latch = sbx_shared->worker_latch;
	LWLockRelease(sbx_shared->lock);
	if (latch)
		SetLatch(latch);
}

/*
 * Copy a request into a free slot and wake the worker.  Returns the slot.
 */
int
sbx_queue_submit(const SbxRequest *req)
{
	int			slot = -1;

	sbx_queue_attach();
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		if (sbx_shared->requests[i].state == SBX_SLOT_FREE)
		{
			slot = i;
			break;
		}
	}
	if (slot < 0)
	{
		LWLockRelease(sbx_shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many pgsandbox requests are waiting")));
	}
	memcpy(&sbx_shared->requests[slot], req, sizeof(SbxRequest));
	sbx_shared->requests[slot].state = SBX_SLOT_PENDING;
	sbx_shared->requests[slot].abandoned = false;
	sbx_shared->requests[slot].serial = sbx_shared->next_serial++;
	sbx_shared->requests[slot].caller_latch = MyLatch;
	sbx_shared->requests[slot].clone_job = -1;
	sbx_shared->requests[slot].sandbox_id = 0;
	LWLockRelease(sbx_shared->lock);

	sbx_queue_wake_worker();
	return slot;
}

/*
 * Give up a slot whose caller stops waiting: free it if the outcome is
 * already there, otherwise leave it to the worker to undo and free.
 */
static void
sbx_queue_abandon(int code, Datum arg)
{
	int			slot = DatumGetInt32(arg);
	SbxRequest *req;

	if (sbx_shared == NULL)
		return;
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	req = &sbx_shared->requests[slot];
	if (req->state == SBX_SLOT_DONE)
	{
		explicit_bzero(req->password, sizeof(req->password));
		req->state = SBX_SLOT_FREE;
	}
	else if (req->state != SBX_SLOT_FREE)
		req->abandoned = true;
	LWLockRelease(sbx_shared->lock);
	sbx_queue_wake_worker();
}

/*
 * Wait until the worker has answered the request in 'slot', copy the answer
 * into *result and free the slot.  Interrupts (cancel, statement_timeout,
 * termination) are served while waiting; the slot is then abandoned.
 */
void
sbx_queue_wait(int slot, SbxRequest *result)
{
	TimestampTz worker_seen = GetCurrentTimestamp();

	PG_ENSURE_ERROR_CLEANUP(sbx_queue_abandon, Int32GetDatum(slot));
	{
		for (;;)
		{
			bool		done;
			bool		worker_running;

			LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
			done = (sbx_shared->requests[slot].state == SBX_SLOT_DONE);
			if (done)
			{
				memcpy(result, &sbx_shared->requests[slot], sizeof(SbxRequest));
				explicit_bzero(sbx_shared->requests[slot].password,
							   sizeof(sbx_shared->requests[slot].password));
				sbx_shared->requests[slot].state = SBX_SLOT_FREE;
			}
			worker_running = (sbx_shared->worker_pid != 0);
			LWLockRelease(sbx_shared->lock);
			if (done)
				break;

			/*
			 * The worker restarts within seconds after a crash; one that
			 * stays away is not coming (for one, pgsandbox.database may name
			 * a database that does not exist).
			 */
			if (worker_running)
				worker_seen = GetCurrentTimestamp();
			else if (TimestampDifferenceExceeds(worker_seen, GetCurrentTimestamp(),
												SBX_WORKER_ABSENCE_MS))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("pgsandbox worker is not running"),
						 errhint("Check the server log for why it does not start.")));

			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_END_ENSURE_ERROR_CLEANUP(sbx_queue_abandon, Int32GetDatum(slot));
}
