/*-------------------------------------------------------------------------
 *
 * sbx_roles.h
 *	  Who the caller is and what it may do, and a superuser's session
 *	  made safe inside a sandbox.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_ROLES_H
#define SBX_ROLES_H

#include "sbx_common.h"

/* who may do what (roles.c) */
extern Oid	sbx_caller(void);
extern bool sbx_is_admin(Oid role);
extern void sbx_require_admin(void);
extern bool sbx_may_clone(Oid role, bool is_admin, const char *source);
pg_noreturn extern void sbx_report_source_denied(const char *source, bool is_admin);
pg_noreturn extern void sbx_report_data_denied(const char *source);

/* sandbox roles' membership of the group, without SET on 16+ (roles.c) */
extern int	sbx_withdraw_group_set_option(void);

/* a superuser's session inside a sandbox, hardened (roles.c) */
extern void sbx_harden_session(void);

#endif							/* SBX_ROLES_H */
