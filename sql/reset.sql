--
-- reset and save: what they refuse, with which SQLSTATE, and that a refusal
-- changes nothing; the TAP suite (033_reset_save.pl) checks what they do
--
CREATE DATABASE regress_sbx_rs;
\c regress_sbx_rs
CREATE TABLE item (id int PRIMARY KEY, label text NOT NULL);
INSERT INTO item SELECT g, 'item ' || g FROM generate_series(1, 20) g;
\c contrib_regression
SET client_min_messages = warning;

SELECT pgsandbox.add_source('rs', 'dbname=regress_sbx_rs', allow_data => true);
CREATE ROLE regress_rs_alice LOGIN IN ROLE pgsandbox_user;
CREATE ROLE regress_rs_bob LOGIN IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('rs', 'regress_rs_alice');
SELECT pgsandbox.grant_source('rs', 'regress_rs_bob');

-- runs a statement, and says how it ended, with sandbox names hidden
CREATE FUNCTION regress_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'sbx_[a-z0-9]{8}', '<sbx>', 'g');
END
$$;
-- what a refusal must leave as it was
CREATE VIEW regress_state AS
	SELECT (SELECT count(*) FROM pgsandbox.sandbox) AS rows,
		   (SELECT count(*) FROM pgsandbox.event) AS events,
		   (SELECT count(*) FROM pg_database) AS databases,
		   (SELECT count(*) FROM pg_roles) AS roles,
		   (SELECT string_agg(name || data_as_of || COALESCE(reset_started_at::text, '-'), ',' ORDER BY id)
			  FROM pgsandbox.sandbox) AS detail;
GRANT SELECT ON regress_state TO PUBLIC;

SET ROLE regress_rs_alice;
SELECT name AS alice_sbx FROM pgsandbox.clone('rs', schema_only => false) \gset
RESET ROLE;
SET ROLE regress_rs_bob;
SELECT name AS bob_sbx FROM pgsandbox.clone('rs', schema_only => false) \gset
RESET ROLE;
SELECT set_config('regress.alice_sbx', :'alice_sbx', false) IS NOT NULL AS set,
	   set_config('regress.bob_sbx', :'bob_sbx', false) IS NOT NULL AS set;
SELECT * FROM regress_state \gset before_

-- bad arguments, refused before the worker is asked
SELECT regress_try($$SELECT pgsandbox.reset(NULL)$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'), NULL)$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'), '')$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'), ttl => '-1 hour')$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'), ttl => '10 years')$$);
SELECT regress_try($$SELECT pgsandbox.reset(repeat('x', 100))$$);
SELECT regress_try($$SELECT pgsandbox.save(NULL, 'a')$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), NULL)$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), '')$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), 'start')$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), 'latest')$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), repeat('l', 64))$$);
SELECT regress_try($$SELECT pgsandbox.drop_save(NULL)$$);
SELECT regress_try($$SELECT * FROM pgsandbox.clone('rs', from_save => 'sbx_whatever')$$);
SELECT regress_try($$SELECT * FROM pgsandbox.clone(from_save => 'sbx_whatever', fresh => true)$$);
SELECT regress_try($$SELECT * FROM pgsandbox.clone()$$);

-- names that do not exist
SELECT regress_try($$SELECT pgsandbox.reset('sbx_nosuch00')$$);
SELECT regress_try($$SELECT pgsandbox.save('sbx_nosuch00', 'a')$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'), 'nosuchsave')$$);
SELECT regress_try($$SELECT pgsandbox.drop_save('sbx_nosuch00')$$);
SELECT regress_try($$SELECT * FROM pgsandbox.clone(from_save => 'sbx_nosuch00')$$);

-- another owner's sandbox is one that does not exist
SET ROLE regress_rs_bob;
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.alice_sbx'))$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), 'mine')$$);
RESET ROLE;
SELECT rows = :before_rows AS same_rows, events = :before_events AS same_events,
	   databases = :before_databases AS same_databases, roles = :before_roles AS same_roles,
	   detail = :'before_detail' AS same_detail
  FROM regress_state;

-- alice saves hers; bob can neither see, use, reset to, nor drop the save
SET ROLE regress_rs_alice;
SELECT pgsandbox.save(:'alice_sbx', 'first') AS alice_save \gset
SELECT set_config('regress.alice_save', :'alice_save', false) IS NOT NULL AS set;
SELECT sandbox = :'alice_sbx' AS of_hers, label, status, source, schema_only, masked
  FROM pgsandbox.saves;
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), 'first')$$);
RESET ROLE;
SELECT * FROM regress_state \gset before_
SET ROLE regress_rs_bob;
SELECT count(*) AS bob_sees FROM pgsandbox.saves;
SELECT regress_try($$SELECT * FROM pgsandbox.clone(from_save => current_setting('regress.alice_save'))$$);
SELECT regress_try($$SELECT pgsandbox.drop_save(current_setting('regress.alice_save'))$$);
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.bob_sbx'), current_setting('regress.alice_save'))$$);
RESET ROLE;
SELECT rows = :before_rows AS same_rows, events = :before_events AS same_events,
	   databases = :before_databases AS same_databases, roles = :before_roles AS same_roles,
	   detail = :'before_detail' AS same_detail
  FROM regress_state;

-- the save limit (pgsandbox.max_saves_per_sandbox, 5)
SET ROLE regress_rs_alice;
SELECT count(pgsandbox.save(:'alice_sbx', 'more ' || g)) FROM generate_series(2, 5) g;
RESET ROLE;
SELECT * FROM regress_state \gset before_
SET ROLE regress_rs_alice;
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.alice_sbx'), 'sixth')$$);
RESET ROLE;
SELECT rows = :before_rows AS same_rows, events = :before_events AS same_events,
	   databases = :before_databases AS same_databases, roles = :before_roles AS same_roles,
	   detail = :'before_detail' AS same_detail
  FROM regress_state;

-- a sandbox still being cloned: its source held by a lock, so its pg_dump waits
CREATE EXTENSION dblink;
SELECT dblink_connect('holder', 'dbname=regress_sbx_rs');
SELECT dblink_exec('holder', 'BEGIN');
SELECT dblink_exec('holder', 'LOCK TABLE item IN ACCESS EXCLUSIVE MODE');
SELECT dblink_connect('cloner', 'dbname=contrib_regression');
SELECT dblink_send_query('cloner', $$SELECT name FROM pgsandbox.clone('rs', schema_only => false, fresh => true)$$);
DO $$
BEGIN
	-- the row is 'cloning' until the lock is released below
	WHILE NOT EXISTS (SELECT 1 FROM pgsandbox.sandboxes WHERE status = 'cloning') LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT set_config('regress.cloning', name, false) IS NOT NULL AS set
  FROM pgsandbox.sandboxes WHERE status = 'cloning';
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.cloning'))$$);
SELECT regress_try($$SELECT pgsandbox.save(current_setting('regress.cloning'), 'early')$$);
SELECT dblink_exec('holder', 'COMMIT');
SELECT count(*) FROM dblink_get_result('cloner') AS t(name text);
SELECT dblink_disconnect('holder'), dblink_disconnect('cloner');
DROP EXTENSION dblink;
SELECT status FROM pgsandbox.sandboxes WHERE name = current_setting('regress.cloning');

-- an expired sandbox needs a ttl to be reset
UPDATE pgsandbox.sandbox SET expires_at = now() - interval '1 minute'
 WHERE name = current_setting('regress.bob_sbx');
SET ROLE regress_rs_bob;
SELECT regress_try($$SELECT pgsandbox.reset(current_setting('regress.bob_sbx'))$$);
SELECT r BETWEEN now() - interval '1 minute' AND clock_timestamp() AS data_as_of_returned
  FROM pgsandbox.reset(:'bob_sbx', ttl => '1 hour') r;
SELECT expires_at > now() + interval '59 minutes' AS extended
  FROM pgsandbox.sandboxes WHERE name = :'bob_sbx';
SELECT action, regexp_replace(detail, '[0-9]+(\.[0-9]+)?', '#', 'g') AS detail
  FROM pgsandbox.events WHERE sandbox = :'bob_sbx' ORDER BY at;
RESET ROLE;

-- dropping the sandbox drops its saves
SELECT pgsandbox.drop(:'alice_sbx');
DO $$
BEGIN
	WHILE EXISTS (SELECT 1 FROM pgsandbox.sandbox WHERE kind = 'save' AND status <> 'dropped') LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT count(*) AS saves_left FROM pgsandbox.saves;
SELECT count(*) AS databases_left FROM pg_database d JOIN pgsandbox.sandbox s ON s.name = d.datname
 WHERE s.kind = 'save';

-- clean up
SELECT pgsandbox.drop(name) FROM pgsandbox.sandboxes WHERE status = 'ready';
DROP VIEW regress_state;
DROP FUNCTION regress_try(text);
SELECT pgsandbox.remove_source('rs');
DROP ROLE regress_rs_alice, regress_rs_bob;
DROP DATABASE regress_sbx_rs;
