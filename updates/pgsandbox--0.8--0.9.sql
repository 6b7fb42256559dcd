/* pgsandbox--0.8--0.9.sql: upgrade pgsandbox from 0.8 to 0.9 (no role stalls the worker) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.9'" to load this file. \quit

-- A drop marks its row 'dropping' before it touches anything: the row is no
-- longer live, and the worker finishes the drop whatever blocked or
-- interrupted it.  drop_started_at says when it began.
ALTER TABLE pgsandbox.sandbox ADD COLUMN drop_started_at timestamptz;
ALTER TABLE pgsandbox.sandbox DROP CONSTRAINT sandbox_status_check;
ALTER TABLE pgsandbox.sandbox ADD CONSTRAINT sandbox_status_check
	CHECK (status IN ('cloning', 'ready', 'failed', 'dropped', 'dropping'));

-- A step of the worker given up on a lock that another session held is
-- recorded as a 'blocked' event naming what held it.
ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only', 'reset', 'reset_failed', 'save', 'blocked'));
