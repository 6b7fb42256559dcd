/*-------------------------------------------------------------------------
 *
 * sbx_sql.h
 *	  What pgsandbox's SQL functions share: asking the lifecycle worker,
 *	  and who the caller is and what it may do.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_SQL_H
#define SBX_SQL_H

#include "sbx_shmem.h"

/* asking the lifecycle worker from a SQL function (sandboxes.c) */
extern void sbx_init_request(SbxRequest *req, SbxRequestKind kind);
extern void sbx_run_request(SbxRequest *req, SbxRequest *result);
extern void sbx_probe_source(const char *source, SbxRequest *req);
extern void sbx_check_request_source(const SbxRequest *req, bool check_data);

/* who may do what (roles.c) */
extern Oid	sbx_caller(void);
extern bool sbx_is_admin(Oid role);
extern void sbx_require_admin(void);
extern bool sbx_may_clone(Oid role, bool is_admin, const char *source);
pg_noreturn extern void sbx_report_source_denied(const char *source, bool is_admin);
pg_noreturn extern void sbx_report_data_denied(const char *source);
extern void sbx_install_login_check(void);
extern void sbx_install_read_only_check(void);

#endif							/* SBX_SQL_H */
