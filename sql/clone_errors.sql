--
-- clone_errors: bad input to clone, drop, extend, protect and gc is refused with a
-- clear error, and nothing is created or dropped; the metrics and the settings
-- of the disk budget are closed to others
--
SELECT pgsandbox.add_source('app', 'dbname=contrib_regression');

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM pg_database) AS databases,
       (SELECT count(*) FROM pg_roles) AS roles,
       (SELECT count(*) FROM pgsandbox.sandbox) AS sandboxes,
       (SELECT count(*) FROM pgsandbox.event) AS events;

-- clone
SELECT * FROM pgsandbox.clone('nosuchsource');
SELECT * FROM pgsandbox.clone(repeat('s', 100));
SELECT * FROM pgsandbox.clone(NULL);
SELECT * FROM pgsandbox.clone('app', NULL);
SELECT * FROM pgsandbox.clone('app', labels => NULL);
SELECT * FROM pgsandbox.clone('app', ttl => '0');
SELECT * FROM pgsandbox.clone('app', ttl => '-1 hour');
SELECT * FROM pgsandbox.clone('app', ttl => '25 hours');
SELECT * FROM pgsandbox.clone('app', ttl => '1000 years');
SELECT * FROM pgsandbox.clone('app', labels => '[]');
SELECT * FROM pgsandbox.clone('app', labels => 'null');
SELECT * FROM pgsandbox.clone('app', labels => '"text"');
SELECT * FROM pgsandbox.clone('app', labels => '42');
SELECT * FROM pgsandbox.clone('app', labels => jsonb_build_object('big', repeat('x', 5000)));
SELECT * FROM pgsandbox.clone('app', schema_only => false);
SELECT * FROM pgsandbox.clone('app', idle_timeout => '-1 minute');
SELECT * FROM pgsandbox.clone('app', idle_timeout => '2 days');

-- drop
SELECT pgsandbox.drop('postgres');
SELECT pgsandbox.drop('template1');
SELECT pgsandbox.drop('contrib_regression');
SELECT pgsandbox.drop('sbx_typo0000');
SELECT pgsandbox.drop(repeat('n', 100));
SELECT pgsandbox.drop(NULL);

-- extend
SELECT pgsandbox.extend('sbx_typo0000', '1 hour');
SELECT pgsandbox.extend(NULL, '1 hour');
SELECT pgsandbox.extend('sbx_typo0000', NULL);
SELECT pgsandbox.extend('sbx_typo0000', '0');
SELECT pgsandbox.extend('sbx_typo0000', '2 days');

-- protect, unprotect
SELECT pgsandbox.protect('sbx_typo0000', now() + interval '1 hour');
SELECT pgsandbox.protect(NULL, now() + interval '1 hour');
SELECT pgsandbox.protect('sbx_typo0000', NULL);
SELECT pgsandbox.protect('sbx_typo0000', now() - interval '1 second');
SELECT pgsandbox.protect('sbx_typo0000', 'infinity');
SELECT pgsandbox.protect('sbx_typo0000', now() + interval '8 days');
SELECT pgsandbox.unprotect('sbx_typo0000');
SELECT pgsandbox.unprotect(NULL);

-- a sandbox's cap of sessions
SELECT * FROM pgsandbox.clone('app', connection_limit => 0);
SELECT * FROM pgsandbox.clone('app', connection_limit => -5);

-- trusted owners
SELECT pgsandbox.trust_owners(NULL, '{}');
SELECT pgsandbox.trust_owners('app', NULL);
SELECT pgsandbox.trust_owners('nosuchsource', '{}');
SELECT pgsandbox.trust_owners('app', '{NULL}');
SELECT pgsandbox.trust_owners('app', '{""}');
SELECT pgsandbox.trust_owners('app', ARRAY[repeat('r', 64)]);
SELECT pgsandbox.trust_owners('app', '{{a,b},{c,d}}');
SELECT pgsandbox.trust_owners('app', (SELECT array_agg('role' || g) FROM generate_series(1, 200) g));
SELECT pgsandbox.trust_owners('app', ARRAY['app_owner', 'Odd "Name', 'back\slash']);
SELECT trusted_owners FROM pgsandbox.sources WHERE name = 'app';
SELECT pgsandbox.trust_owners('app', '{}');
SELECT trusted_owners FROM pgsandbox.sources WHERE name = 'app';

-- gc
SELECT * FROM pgsandbox.gc(NULL);
SELECT * FROM pgsandbox.gc(dry_run => true);
SELECT * FROM pgsandbox.gc();

-- nothing changed
SELECT (SELECT count(*) FROM pg_database) - databases AS new_databases,
       (SELECT count(*) FROM pg_roles) - roles AS new_roles,
       (SELECT count(*) FROM pgsandbox.sandbox) - sandboxes AS new_sandboxes,
       (SELECT count(*) FROM pgsandbox.event) - events AS new_events
  FROM counts_before;

-- the functions are for the owner of the extension only, for now
CREATE ROLE regress_sbx_nobody LOGIN;
GRANT USAGE ON SCHEMA pgsandbox TO regress_sbx_nobody;
SET ROLE regress_sbx_nobody;
SELECT * FROM pgsandbox.clone('app');
SELECT pgsandbox.drop('sbx_typo0000');
SELECT * FROM pgsandbox.gc();
SELECT * FROM pgsandbox.sandboxes;
SELECT * FROM pgsandbox.metrics;
SELECT * FROM pgsandbox._queue_depth();
SET pgsandbox.read_only = on;
SET pgsandbox.max_total_size = '1MB';
RESET ROLE;
REVOKE USAGE ON SCHEMA pgsandbox FROM regress_sbx_nobody;
DROP ROLE regress_sbx_nobody;

SELECT pgsandbox.remove_source('app');
