/*-------------------------------------------------------------------------
 *
 * sbx_api.h
 *	  What pgsandbox's SQL functions share: asking the lifecycle worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_API_H
#define SBX_API_H

#include "sbx_shmem.h"

/* asking the lifecycle worker from a SQL function (sandboxes.c) */
extern void sbx_init_request(SbxRequest *req, SbxRequestKind kind);
extern void sbx_run_request(SbxRequest *req, SbxRequest *result);
extern void sbx_probe_source(const char *source, SbxRequest *req);
extern void sbx_check_request_source(const SbxRequest *req, bool check_data);

#endif							/* SBX_API_H */
