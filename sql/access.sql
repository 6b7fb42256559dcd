--
-- access: pgsandbox_user roles clone only the sources granted to them, see
-- and touch only their own sandboxes; pgsandbox_admin roles manage sources
-- and see everything
--
CREATE DATABASE regress_sbx_acc;
SELECT pgsandbox.add_source('granted', 'dbname=regress_sbx_acc');
SELECT pgsandbox.add_source('withheld', 'dbname=regress_sbx_acc', allow_data => true);

CREATE ROLE regress_alice LOGIN IN ROLE pgsandbox_user;
CREATE ROLE regress_bob LOGIN IN ROLE pgsandbox_user;
CREATE ROLE regress_team NOLOGIN;
CREATE ROLE regress_carl LOGIN IN ROLE pgsandbox_user, regress_team;
CREATE ROLE regress_ada LOGIN IN ROLE pgsandbox_admin;
CREATE ROLE regress_nobody LOGIN;

SELECT pgsandbox.grant_source('granted', 'regress_alice');
SELECT pgsandbox.grant_source('granted', 'regress_alice');  -- twice is fine
SELECT pgsandbox.grant_source('withheld', 'regress_team');
SELECT source, grantee FROM pgsandbox.source_grants ORDER BY 1, 2;
SELECT pgsandbox.grant_source('nosuch', 'regress_alice');
SELECT pgsandbox.grant_source('granted', 'regress_nosuchrole');
SELECT pgsandbox.grant_source(NULL, 'regress_alice');
SELECT pgsandbox.grant_source('granted', NULL);

-- alice: sees and clones what was granted to her, nothing else
SET ROLE regress_alice;
SELECT name, allow_data FROM pgsandbox.sources;
SELECT name AS alice_sbx FROM pgsandbox.clone('granted', labels => '{"who": "alice"}') \gset
SELECT * FROM pgsandbox.clone('withheld');
SELECT * FROM pgsandbox.clone('nosuch');
SELECT * FROM pgsandbox.clone('granted', schema_only => false);
SELECT owner, status, labels FROM pgsandbox.sandboxes;
SELECT action, actor FROM pgsandbox.events ORDER BY at;
-- what is for admins stays closed
SELECT pgsandbox.add_source('mine', 'dbname=postgres');
SELECT pgsandbox.remove_source('granted');
SELECT pgsandbox.grant_source('withheld', 'regress_alice');
SELECT * FROM pgsandbox.doctor();
SELECT * FROM pgsandbox.source_grants;
SELECT conninfo FROM pgsandbox.source;
SELECT count(*) FROM pgsandbox.sandbox;
RESET ROLE;

-- carl clones through the grant to a group he belongs to, data included
SET ROLE regress_carl;
SELECT name, allow_data FROM pgsandbox.sources;
SELECT name AS carl_sbx FROM pgsandbox.clone('withheld', schema_only => false) \gset
SELECT * FROM pgsandbox.clone('granted');
RESET ROLE;

-- bob: sees no one else's sandbox, and cannot touch them
SET ROLE regress_bob;
SELECT count(*) AS sources_seen FROM pgsandbox.sources;
SELECT count(*) AS sandboxes_seen FROM pgsandbox.sandboxes;
SELECT count(*) AS events_seen FROM pgsandbox.events;
SELECT set_config('regress.sandbox', :'alice_sbx', false) IS NOT NULL AS set;
DO $$
BEGIN
	PERFORM pgsandbox.drop(current_setting('regress.sandbox'));
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'drop: % (%)', replace(SQLERRM, current_setting('regress.sandbox'), '<name>'), SQLSTATE;
END
$$;
DO $$
BEGIN
	PERFORM pgsandbox.extend(current_setting('regress.sandbox'), '1 hour');
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'extend: % (%)', replace(SQLERRM, current_setting('regress.sandbox'), '<name>'), SQLSTATE;
END
$$;
SELECT * FROM pgsandbox.gc(dry_run => true);
RESET ROLE;
SELECT status FROM pgsandbox.sandboxes WHERE name = :'alice_sbx';

-- nobody (not a pgsandbox role) gets nothing
SET ROLE regress_nobody;
SELECT * FROM pgsandbox.clone('granted');
RESET ROLE;

-- ada, an admin without superuser: sees everything, manages sources, drops
-- anyone's sandbox
SET ROLE regress_ada;
SELECT owner, status FROM pgsandbox.sandboxes WHERE owner LIKE 'regress\_%' ORDER BY owner;
SELECT count(*) > 0 AS sees_others FROM pgsandbox.sandboxes WHERE owner NOT LIKE 'regress\_%';
-- an admin that is not superuser cannot lend the server's own identity
SELECT pgsandbox.add_source('ada_src', 'dbname=regress_sbx_acc');
SELECT pgsandbox.add_source('ada_src', 'dbname=regress_sbx_acc user=regress_ada password=pw sslkey=/etc/ssl/private/server.key');
SELECT pgsandbox.add_source('ada_src', 'dbname=regress_sbx_acc service=admin');
SELECT pgsandbox.add_source('ada_src', 'host=db1.example.com,127.0.0.1 dbname=regress_sbx_acc user=regress_ada password=pw');
SELECT pgsandbox.add_source('ada_src', 'dbname=regress_sbx_acc user=regress_ada password=pw');
SELECT name FROM pgsandbox.sources ORDER BY name;
-- here pg_hba.conf trusts everyone, so the password goes unused: refused
SELECT count(*) AS databases_before FROM pg_database \gset
SELECT * FROM pgsandbox.clone('ada_src');
SELECT count(*) - :databases_before AS new_databases FROM pg_database;
SELECT status, error FROM pgsandbox.sandboxes WHERE source = 'ada_src';
SELECT conninfo FROM pgsandbox.source;
SELECT pgsandbox.drop(:'carl_sbx');
SELECT "check" FROM pgsandbox.doctor() WHERE "check" = 'worker running';
SELECT pgsandbox.remove_source('ada_src');
RESET ROLE;

-- alice extends and drops her own
SET ROLE regress_alice;
SELECT e > now() + interval '50 minutes' AS extended
  FROM pgsandbox.extend(:'alice_sbx', '1 hour') e;
SELECT pgsandbox.drop(:'alice_sbx');
SELECT status FROM pgsandbox.sandboxes;
RESET ROLE;

-- a revoked grant closes the source again
SELECT pgsandbox.revoke_source('granted', 'regress_alice');
SELECT pgsandbox.revoke_source('granted', 'regress_alice');
SET ROLE regress_alice;
SELECT * FROM pgsandbox.clone('granted');
SELECT count(*) AS sources_seen FROM pgsandbox.sources;
RESET ROLE;

-- removing a source removes its grants
SELECT pgsandbox.remove_source('withheld');
SELECT count(*) FROM pgsandbox.source_grants;
SELECT pgsandbox.remove_source('granted');

DROP ROLE regress_alice, regress_bob, regress_carl, regress_ada, regress_nobody, regress_team;
DROP DATABASE regress_sbx_acc;
