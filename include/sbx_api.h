/*-------------------------------------------------------------------------
 *
 * sbx_api.h
 *	  What pgsandbox's SQL functions share: asking the lifecycle worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_API_H
#define SBX_API_H

#include "access/tupdesc.h"
#include "sbx_shmem.h"

/* asking the lifecycle worker from a SQL function (sandboxes.c) */
extern void sbx_init_request(SbxRequest *req, SbxRequestKind kind);
extern void sbx_run_request(SbxRequest *req, SbxRequest *result);
extern void sbx_probe_source(const char *source, SbxRequest *req);
extern void sbx_check_request_source(const SbxRequest *req, bool check_data);

/* doctor()'s rows (doctor_rows.c), and its checks of live sources (doctor_live.c) */
typedef struct SbxDoctor
{
	struct Tuplestorestate *store;
	TupleDesc	desc;
} SbxDoctor;
extern void sbx_doctor_row(SbxDoctor *d, const char *check, bool ok, const char *detail);
extern void sbx_doctor_live_source(SbxDoctor *d, const char *name, const char *publication,
								   PGconn *conn);
extern void sbx_doctor_live_lag(SbxDoctor *d, const char *name);

#endif							/* SBX_API_H */
