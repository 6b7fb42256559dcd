-- many_tables.sql: build a clone source with many small tables.
--
-- Run with psql in the (empty) source database:
--   psql -v ntables=300 -v with_ext=0 [-v rows=5] -f many_tables.sql
--
-- Every table t0001 .. tNNNN has a primary key, a unique constraint, two
-- secondary indexes, a check constraint, a foreign key to the table before
-- it, and five rows (or -v rows), names and attributes made of md5 text so
-- that they do not compress to nothing; each has a view joining it to that table and a
-- plpgsql function reading it.  With with_ext=1 the source also has the
-- extensions hstore, citext and pgcrypto, and every table uses them (a
-- citext column, an hstore column, a pgcrypto default), as do the views
-- and functions: the restore then depends on the extensions, and
-- pgsandbox takes its archive-on-disk path for this source.

\set ON_ERROR_STOP on

\if :{?rows}
\else
\set rows 5
\endif
SELECT pg_catalog.set_config('bench.ntables', :'ntables', false);
SELECT pg_catalog.set_config('bench.rows', :'rows', false);
SELECT pg_catalog.set_config('bench.with_ext', :'with_ext', false);

DO $$
BEGIN
	IF current_setting('bench.with_ext')::int = 1 THEN
		CREATE EXTENSION hstore;
		CREATE EXTENSION citext;
		CREATE EXTENSION pgcrypto;
	END IF;
END
$$;

DO $do$
DECLARE
	n		int := current_setting('bench.ntables')::int;
	nrows	int := current_setting('bench.rows')::int;
	ext		boolean := current_setting('bench.with_ext')::int = 1;
	t		text;
	prev	text;
BEGIN
	FOR i IN 1..n LOOP
		t := format('t%s', lpad(i::text, 4, '0'));
		prev := CASE WHEN i > 1 THEN format('t%s', lpad((i - 1)::text, 4, '0')) END;

		EXECUTE format($sql$
			CREATE TABLE %1$I (
				id			integer PRIMARY KEY,
				parent_id	integer %2$s,
				code		text NOT NULL UNIQUE,
				name		%3$s NOT NULL,
				attrs		%4$s,
				token		bytea NOT NULL DEFAULT %5$s,
				amount		numeric(12,2) NOT NULL DEFAULT 0 CHECK (amount >= 0),
				created_at	timestamptz NOT NULL DEFAULT now()
			)$sql$,
			t,
			CASE WHEN prev IS NULL THEN '' ELSE format('REFERENCES %I (id)', prev) END,
			CASE WHEN ext THEN 'citext' ELSE 'text' END,
			CASE WHEN ext THEN 'hstore' ELSE 'jsonb' END,
			CASE WHEN ext THEN 'gen_random_bytes(8)' ELSE '''\x00''::bytea' END);
		EXECUTE format('CREATE INDEX %I ON %I (parent_id)', t || '_parent', t);
		EXECUTE format('CREATE INDEX %I ON %I (name, created_at)', t || '_name', t);

		EXECUTE format($sql$
			INSERT INTO %1$I (id, parent_id, code, name, attrs, amount)
			SELECT g, %2$s, 'c' || g, 'Name ' || g || ' ' || md5(%1$L || g), %3$s, g * 1.5
			  FROM generate_series(1, %4$s) g$sql$,
			t,
			CASE WHEN prev IS NULL THEN 'NULL' ELSE 'g' END,
			CASE WHEN ext THEN 'hstore(''k'', g::text)'
				 ELSE 'jsonb_build_object(''k'', g::text, ''note'', md5(g::text))' END,
			nrows);

		EXECUTE format($sql$
			CREATE VIEW %1$I AS
			SELECT a.id, a.name, a.attrs %3$s AS k, b.code AS parent_code
			  FROM %2$I a LEFT JOIN %4$s b ON b.id = a.parent_id$sql$,
			'v' || substr(t, 2), t,
			CASE WHEN ext THEN '-> ''k''' ELSE '->> ''k''' END,
			CASE WHEN prev IS NULL THEN t ELSE quote_ident(prev) END);

		EXECUTE format($sql$
			CREATE FUNCTION %1$I(p_id integer) RETURNS text
			LANGUAGE plpgsql STABLE AS $f$
			DECLARE
				total numeric;
			BEGIN
				SELECT sum(amount) INTO total FROM %2$I WHERE id <= p_id;
				RETURN %3$s;
			END
			$f$$sql$,
			'f' || substr(t, 2), t,
			CASE WHEN ext THEN 'encode(digest(coalesce(total, 0)::text, ''sha256''), ''hex'')'
				 ELSE 'coalesce(total, 0)::text' END);
	END LOOP;
END
$do$;
