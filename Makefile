# pgsandbox: PGXS build of the extension, its pg_regress and TAP tests.

EXTENSION = pgsandbox
MODULE_big = pgsandbox
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA = $(wildcard pgsandbox--*.sql) $(wildcard updates/pgsandbox--*--*.sql)
PGFILEDESC = "pgsandbox - disposable clones of approved databases"

PG_CPPFLAGS = -Iinclude -I$(libpq_srcdir)
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers -Wno-clobbered -Wshadow=compatible-local $(if $(WERROR),-Werror)
SHLIB_LINK_INTERNAL = $(libpq)

REGRESS = setup sources clone_errors clone access agent schema_diff fast_clones masking subset relations reset live
REGRESS_OPTS = --temp-config=$(srcdir)/test/regress.conf --temp-instance=./tmp_check_regress
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Each TAP file in a prove of its own, PGSANDBOX_TEST_JOBS at a time: one
# that bails out ends only itself (test/prove-each.sh)
PROVE = bash $(CURDIR)/test/prove-each.sh

# PGXS knows nothing of our headers: every object depends on them, and on
# the private headers of its layer.
$(OBJS): $(wildcard include/*.h)
$(patsubst %.c,%.o,$(wildcard src/masking/*.c)): $(wildcard src/masking/*.h)
src/api/suggest_masks.o src/masking/pii_detect.o src/masking/pii_masks.o: include/pii.h

# describe_schema()'s catalog query is kept as SQL and compiled in as a C
# string (the leading comment lines dropped).
src/api/describe_query.h: src/api/describe_query.sql
	sed -e '/^--/d' -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@
src/api/describe.o src/api/describe.bc: src/api/describe_query.h
EXTRA_CLEAN = src/api/describe_query.h
