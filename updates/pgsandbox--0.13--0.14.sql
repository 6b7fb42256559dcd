/* pgsandbox--0.13--0.14.sql: upgrade pgsandbox from 0.13 to 0.14 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.14'" to load this file. \quit

-- What a live snapshot's apply was doing at the worker's last look, and
-- since when; an event once a live snapshot that fell behind is back.
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_state text;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_state_since timestamptz;
ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only', 'reset', 'reset_failed', 'save', 'blocked',
					  'refused', 'session_ended', 'prepared_rolled_back',
					  'live_rebuild', 'live_lag', 'live_caught_up'));

CREATE OR REPLACE VIEW pgsandbox.snapshots WITH (security_barrier) AS
	SELECT p.source, p.schema_only,
		   CASE WHEN r.id IS NOT NULL THEN 'ready'
				WHEN b.building THEN 'building'
				WHEN p.last_error IS NOT NULL THEN 'failed' END AS status,
		   r.data_as_of AS taken_at, r.size_bytes, p.schedule, p.next_run_at,
		   p.last_error, r.live_slot IS NOT NULL AS live, r.live_as_of,
		   r.live_lag_bytes, r.live_state, r.live_state_since
	  FROM pgsandbox.snapshot_plan p
	  LEFT JOIN LATERAL (
			SELECT s.id, s.data_as_of, s.size_bytes, s.live_slot, s.live_as_of,
				   s.live_lag_bytes, s.live_state, s.live_state_since
			  FROM pgsandbox.sandbox s
			 WHERE s.kind = 'snapshot' AND s.status = 'ready' AND s.retired_at IS NULL
			   AND s.source = p.source AND s.schema_only = p.schema_only
			 ORDER BY s.id DESC LIMIT 1) r ON true
	  CROSS JOIN LATERAL (
			SELECT EXISTS (SELECT 1 FROM pgsandbox.sandbox s
							WHERE s.kind = 'snapshot' AND s.status = 'cloning'
							  AND s.source = p.source AND s.schema_only = p.schema_only)
			AS building) b
	 WHERE pgsandbox._caller_is_admin();
