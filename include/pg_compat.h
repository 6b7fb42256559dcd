/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  What differs between the PostgreSQL majors pgsandbox builds against
 *	  (15, 16, 17 and 18), written once, so that a call site reads the same
 *	  on every version.
 *
 * One block per major, newest first.  Wrappers carry a _compat suffix.
 * Differences of the *source's* catalogs are not here: they depend on the
 * version of the server a connection reaches, not on the one pgsandbox was
 * built for, and are decided with PQserverVersion() where the query is made
 * (source_info.c, describe.c).
 *
 * PostgreSQL 16 is built against on paper only (its API as documented in
 * its release notes and headers); 15, 17 and 18 are built and tested.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_COMPAT_H
#define PG_COMPAT_H

#define PG_VERSION_15	150000
#define PG_VERSION_16	160000
#define PG_VERSION_17	170000
#define PG_VERSION_18	180000

#if PG_VERSION_NUM < PG_VERSION_15
#error "pgsandbox needs PostgreSQL 15 or later"
#endif

/*
 * PostgreSQL 18 removed pg_attribute_noreturn(), written after a
 * declaration, for pg_noreturn, written before it (C11's _Noreturn).  Before
 * 18, give pg_noreturn the GCC attribute, which may stand first as well.
 */
#if PG_VERSION_NUM >= PG_VERSION_18
/* pg_noreturn comes from c.h */
#else
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif
#endif

/*
 * PostgreSQL 17 added the builtin locale provider, and pg_database's
 * daticulocale became datlocale (the locale of the ICU or builtin provider).
 */
#if PG_VERSION_NUM >= PG_VERSION_17
#define SBX_HAVE_BUILTIN_LOCALE 1
#else
#define SBX_HAVE_BUILTIN_LOCALE 0
#endif

/*
 * PostgreSQL 17 replaced IsAutoVacuumWorkerProcess() by the
 * AmAutoVacuumWorkerProcess() macro of miscadmin.h.
 */
#if PG_VERSION_NUM >= PG_VERSION_17
#define sbx_am_autovacuum_worker_compat() AmAutoVacuumWorkerProcess()
#else
#include "postmaster/autovacuum.h"
#define sbx_am_autovacuum_worker_compat() IsAutoVacuumWorkerProcess()
#endif

/*
 * PostgreSQL 16 renamed superuser_reserved_connections' variable and added
 * reserved_connections beside it: the slots no ordinary login may take.
 */
#if PG_VERSION_NUM >= PG_VERSION_16
#define sbx_server_reserved_slots_compat() (SuperuserReservedConnections + ReservedConnections)
#else
#define sbx_server_reserved_slots_compat() (ReservedBackends)
#endif

/*
 * PostgreSQL 16 made HaveNFreeProcs() also tell how many slots are free,
 * which it always writes.
 */
#if PG_VERSION_NUM >= PG_VERSION_16
#include "storage/proc.h"

static inline bool
sbx_have_n_free_procs_compat(int n)
{
	int			nfree;

	return HaveNFreeProcs(n, &nfree);
}
#else
#define sbx_have_n_free_procs_compat(n) HaveNFreeProcs(n)
#endif

/*
 * PostgreSQL 16 gave pg_auth_members a grantor key: AUTHMEMMEMROLE looks up
 * (member, role, grantor) there and (member, role) before.  Nothing here
 * wraps it: login_check.c lists the rows of one member by the first key alone,
 * which reads the same on every version.
 */

#endif							/* PG_COMPAT_H */
