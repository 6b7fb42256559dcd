/*-------------------------------------------------------------------------
 *
 * sbx_spi.h
 *	  The catalog transactions of pgsandbox's background workers: SPI
 *	  queries, utility statements under a bounded lock wait, events, and
 *	  errors caught between steps.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_SPI_H
#define SBX_SPI_H

#include "sbx_common.h"

/* spi.c */
extern MemoryContext sbx_outer_cxt;
extern char *sbx_keep(const char *s);
extern struct ErrorData *sbx_catch_error(MemoryContext cxt);
extern bool sbx_try_or_warn(void (*step) (void *arg), void *arg, const char *what);
extern void sbx_xact_begin(const char *activity);
extern void sbx_xact_commit(void);
extern int	sbx_spi(const char *sql, int expect, int nargs, const char *const *args);
extern char *sbx_spi_text(int row, int col);
extern List *sbx_keep_column(int col);
extern void sbx_log_event(const char *sandbox, const char *action,
						  const char *actor, const char *detail);
extern void sbx_run_utility(const char *sql, const char *secret);
extern void sbx_run_utility_xact(const char *sql, const char *activity);
extern void sbx_random_string(char *out, int n, const char *alphabet);
#define SBX_PASSWORD_ALPHABET \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

#endif							/* SBX_SPI_H */
