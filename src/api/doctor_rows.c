/*-------------------------------------------------------------------------
 *
 * doctor_rows.c
 *	  The rows pgsandbox.doctor() returns, written by each of its checks
 *	  (doctor.c, doctor_live.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "sbx_api.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/* One check's row: its name, whether it passed, and what was found. */
void
sbx_doctor_row(SbxDoctor *d, const char *check, bool ok, const char *detail)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(check);
	values[1] = BoolGetDatum(ok);
	values[2] = CStringGetTextDatum(detail);
	tuplestore_putvalues(d->store, d->desc, values, nulls);
}
