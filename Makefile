# pgsandbox: PGXS build of the extension, its pg_regress and TAP tests.

EXTENSION = pgsandbox
MODULE_big = pgsandbox
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA = $(wildcard pgsandbox--*.sql)
PGFILEDESC = "pgsandbox - disposable clones of approved databases"

PG_CPPFLAGS = -Iinclude -I$(libpq_srcdir)
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers -Wno-clobbered $(if $(WERROR),-Werror)
SHLIB_LINK_INTERNAL = $(libpq)

REGRESS = setup sources clone_errors clone access agent
REGRESS_OPTS = --temp-config=$(srcdir)/test/regress.conf --temp-instance=./tmp_check_regress
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS knows nothing of our header: every object depends on it.
$(OBJS): include/pgsandbox.h
