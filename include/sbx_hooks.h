/*-------------------------------------------------------------------------
 *
 * sbx_hooks.h
 *	  The hooks pgsandbox installs in every backend: the login check, the
 *	  read-only check, and the statements of a restore it adjusts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_HOOKS_H
#define SBX_HOOKS_H

#include "sbx_common.h"

/* login_check.c, read_only.c */
extern void sbx_install_login_check(void);
extern void sbx_install_read_only_check(void);

/* a sandbox's share of sessions and prepared transactions (tenant_limits.c) */
extern void sbx_check_sandbox_login(Oid role, const char *name);
extern void sbx_check_sandbox_prepare(Oid role);

/* column options of other builds left out of a restore (restore_compat.c) */
struct AlterTableStmt;
extern bool sbx_has_foreign_attoptions(struct AlterTableStmt *stmt);
extern bool sbx_strip_foreign_attoptions(struct AlterTableStmt *stmt);

#endif							/* SBX_HOOKS_H */
