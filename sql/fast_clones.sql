--
-- fast_clones: the SQL surface of snapshots, pools and schedules, the
-- errors of bad input (which change nothing), and the schedule grammar
--
SET timezone = 'UTC';
SELECT pgsandbox.add_source('fc', 'dbname=contrib_regression');

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM pg_database) AS databases,
       (SELECT count(*) FROM pg_roles) AS roles,
       (SELECT count(*) FROM pgsandbox.sandbox) AS sandboxes,
       (SELECT count(*) FROM pgsandbox.event) AS events,
       (SELECT count(*) FROM pgsandbox.snapshot_plan) AS plans;

-- snapshot()
SELECT * FROM pgsandbox.snapshot('nosuchsource');
SELECT * FROM pgsandbox.snapshot(repeat('s', 100));
SELECT * FROM pgsandbox.snapshot(NULL);
SELECT * FROM pgsandbox.snapshot('fc', NULL);
SELECT * FROM pgsandbox.snapshot('fc');

-- drop_snapshot()
SELECT pgsandbox.drop_snapshot('nosuchsource');
SELECT pgsandbox.drop_snapshot(NULL);

-- schedule_snapshot(): bad schedules say what is wrong
SELECT pgsandbox.schedule_snapshot('fc', '', true);
SELECT pgsandbox.schedule_snapshot('fc', '* * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '* * * * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '61 * * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 24 * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 0 0 * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 0 * 13 *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 0 * * 8', true);
SELECT pgsandbox.schedule_snapshot('fc', '*/0 * * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '30-10 * * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', 'x * * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 0 * foo *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 0 30 2 *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 seconds', true);
SELECT pgsandbox.schedule_snapshot('fc', '90000 seconds', true);
SELECT pgsandbox.schedule_snapshot('fc', '5 hours', true);
SELECT pgsandbox.schedule_snapshot('fc', '@sometimes', true);
SELECT pgsandbox.schedule_snapshot('fc', repeat('1', 200), true);
SELECT pgsandbox.schedule_snapshot('fc', '0 3 * * *');
SELECT pgsandbox.schedule_snapshot('nosuchsource', '0 3 * * *', true);
SELECT pgsandbox.schedule_snapshot('fc', '0 3 * * *', NULL);
SELECT pgsandbox.schedule_snapshot(NULL, '0 3 * * *', true);

-- set_pool()
SELECT pgsandbox.set_pool('fc', -1);
SELECT pgsandbox.set_pool('fc', 100000);
SELECT pgsandbox.set_pool('fc', NULL);
SELECT pgsandbox.set_pool('fc', 1, NULL);
SELECT pgsandbox.set_pool('fc', 1, false);
SELECT pgsandbox.set_pool('nosuchsource', 1);

-- clone()'s fresh
SELECT * FROM pgsandbox.clone('fc', fresh => NULL);

-- none of it changed anything
SELECT (SELECT count(*) FROM pg_database) - databases AS new_databases,
       (SELECT count(*) FROM pg_roles) - roles AS new_roles,
       (SELECT count(*) FROM pgsandbox.sandbox) - sandboxes AS new_sandboxes,
       (SELECT count(*) FROM pgsandbox.event) - events AS new_events,
       (SELECT count(*) FROM pgsandbox.snapshot_plan) - plans AS new_plans
  FROM counts_before;

-- only admins manage snapshots and pools; a pgsandbox_user sees its own
-- progress only
CREATE ROLE fc_user IN ROLE pgsandbox_user;
SET ROLE fc_user;
SELECT * FROM pgsandbox.snapshot('fc', true);
SELECT pgsandbox.set_pool('fc', 1);
SELECT pgsandbox.schedule_snapshot('fc', '0 3 * * *', true);
SELECT pgsandbox.drop_snapshot('fc');
SELECT * FROM pgsandbox.snapshots;
SELECT * FROM pgsandbox.pools;
SELECT * FROM pgsandbox.progress;
RESET ROLE;
DROP ROLE fc_user;

-- the schedule grammar: the next run after a fixed moment, in UTC
SELECT s AS schedule, pgsandbox._next_run(s, '2026-12-03 10:17:30+00') AS next_run
  FROM (VALUES ('*/15 * * * *'), ('0 3 * * *'), ('17 10 * * *'), ('30 2 * * mon-fri'),
               ('0 0 29 2 *'), ('0 0 1,15 * 5'), ('0 12 * jan,jul sun'),
               ('5 4 * * 7'), ('0 0 * * 0'), ('10-20/5 8 * * *'), ('0 */6 * * *'),
               ('59 23 31 12 *'), ('0 0 31 * *'), ('@hourly'), ('@daily'),
               ('@weekly'), ('@monthly'), ('@yearly'), ('  1   2  *  *  *  '),
               ('2 seconds'), ('1 second'), ('10 minutes'), ('1 minute')) v(s);

-- a schedule is recorded with its next run, and NULL clears it; the
-- snapshots view lists the plan, and nothing is built before its time
SELECT pgsandbox.schedule_snapshot('fc', '0 3 * * *', true);
SELECT source, schema_only, status, schedule,
       next_run_at = pgsandbox._next_run('0 3 * * *', now()) AS next_run_ok,
       taken_at, size_bytes, last_error
  FROM pgsandbox.snapshots;
SELECT pgsandbox.schedule_snapshot('fc', NULL, true);
SELECT source, schema_only, status, schedule, next_run_at FROM pgsandbox.snapshots;
SELECT count(*) AS snapshots_built FROM pgsandbox.sandbox WHERE kind = 'snapshot';
SELECT pgsandbox.remove_source('fc');
SELECT count(*) AS plans_left FROM pgsandbox.snapshot_plan;
