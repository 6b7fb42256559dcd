
# 022_masking.pl: masked and reduced data clones.
#
# A marker email is planted in the source, in a table, a partitioned table
# and a table whose rows are excluded.  After a masked clone the marker is
# nowhere the sandbox role can read (tables, a view, a materialized view,
# pg_stats after ANALYZE, run_sql's output), in no file under the sandbox
# database's directory, and not in the server log written during the clone;
# what is not masked is copied as it is; excluded tables keep their columns,
# indexes and constraints without rows; a masked unique column stays
# unique.  Snapshots are built masked, a change of rules makes them stale
# (no copy of the old one is served, and they are retaken), pools hand out
# masked members.  Each fail-closed case fails the clone cleanly, naming the
# rule, and leaves nothing but the failed row.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('masking',
	"pgsandbox.max_concurrent_clones = 3\npgsandbox.max_sandboxes_per_owner = 50\n");
my $su = superuser_name();
my $marker = 'zq7marker-4411@example.org';

sub sq { return $node->safe_psql('postgres', $_[0]); }

$node->safe_psql('postgres', 'CREATE DATABASE crm');
# sessions on the source write dates day first: masked rows must not
$node->safe_psql('postgres', q{ALTER DATABASE crm SET datestyle = 'SQL, DMY'});
$node->safe_psql(
	'crm', qq{
CREATE SCHEMA app;
CREATE TABLE app.customers (id int PRIMARY KEY, email text NOT NULL UNIQUE,
	full_name text, phone varchar(20), note text, born date, score float8);
INSERT INTO app.customers
	SELECT g, 'person' || g || '\@corp.test', 'Name ' || g, '+1 555 ' || lpad(g::text, 4, '0'), 'note ' || g,
		   date '1990-01-13' + g, 1.0 / g
	  FROM generate_series(1, 2000) g;
INSERT INTO app.customers VALUES (2001, '$marker', 'Marker Person', '+1 555 9999', 'the marker', NULL, NULL);
CREATE INDEX customers_lower_email ON app.customers (lower(email));
CREATE TABLE app.orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES app.customers,
	amount numeric);
INSERT INTO app.orders SELECT g, 1 + g % 2001, g * 1.5 FROM generate_series(1, 3000) g;
CREATE VIEW app.customer_emails AS SELECT id, email FROM app.customers;
CREATE MATERIALIZED VIEW app.email_domains AS
	SELECT email, split_part(email, '\@', 2) AS domain FROM app.customers;
CREATE TABLE app.audit_log (id serial PRIMARY KEY, payload text NOT NULL,
	at timestamptz NOT NULL DEFAULT now(), CONSTRAINT payload_short CHECK (length(payload) < 1000));
CREATE INDEX audit_log_at ON app.audit_log (at);
INSERT INTO app.audit_log (payload) SELECT 'login of $marker #' || g FROM generate_series(1, 500) g;
CREATE TABLE app.events (id int NOT NULL, contact_email text, kind text) PARTITION BY RANGE (id);
CREATE TABLE app.events_low PARTITION OF app.events FOR VALUES FROM (0) TO (1000);
CREATE TABLE app.events_high PARTITION OF app.events FOR VALUES FROM (1000) TO (100000);
INSERT INTO app.events SELECT g, CASE WHEN g IN (7, 1500) THEN '$marker' ELSE 'e' || g || '\@corp.test' END,
	'kind ' || g % 3 FROM generate_series(1, 2000) g;
});
sq("SELECT pgsandbox.add_source('crm', 'dbname=crm', allow_data => true)");
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.email', $$'user' || id || '@example.invalid'$$)});
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.full_name', $$left(full_name, 1) || '.'$$)});
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.phone', 'NULL')});
sq(q{SELECT pgsandbox.mask('crm', 'app.events.contact_email',
	$$md5(current_setting('pgsandbox_mask.key') || contact_email) || '@example.invalid'$$)});
sq(q{SELECT pgsandbox.exclude_data('crm', 'app.audit_*')});
is(sq("SELECT string_agg(kind || ' ' || target, ', ' ORDER BY kind, target) FROM pgsandbox.source_rules"),
	'exclude_data app.audit_*, mask app.customers.email, mask app.customers.full_name, '
	  . 'mask app.customers.phone, mask app.events.contact_email',
	'the rules are set');

# SQL through a sandbox's own login; dies on error
sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# Everything the role can read in the sandbox that could hold the marker,
# as "name=count" of values holding $needle.
sub readable_holding
{
	my ($conninfo, $needle) = @_;
	return in_sandbox($conninfo, qq{
ANALYZE app.customers, app.events, app.email_domains, app.audit_log;
SELECT 'customers=' || (SELECT count(*) FROM app.customers c WHERE c::text LIKE '%$needle%')
	|| ' view=' || (SELECT count(*) FROM app.customer_emails v WHERE v::text LIKE '%$needle%')
	|| ' matview=' || (SELECT count(*) FROM app.email_domains m WHERE m::text LIKE '%$needle%')
	|| ' events=' || (SELECT count(*) FROM app.events e WHERE e::text LIKE '%$needle%')
	|| ' audit=' || (SELECT count(*) FROM app.audit_log a WHERE a::text LIKE '%$needle%')
	|| ' stats=' || (SELECT count(*) FROM pg_stats WHERE schemaname = 'app'
		AND (coalesce(most_common_vals::text, '') || coalesce(histogram_bounds::text, '')) LIKE '%$needle%')});
}

# ---------------------------------------------------------------------
# a masked data clone through the dump path
# ---------------------------------------------------------------------
my $log_from = -s $node->logfile;
my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
my $log = substr(slurp_file($node->logfile), $log_from);
unlike($log, qr/\Q$marker\E/, 'the server log written during the clone does not hold the marker');
is(sq("SELECT method || ' ' || masked FROM pgsandbox.sandboxes WHERE name = '$sbx'"), 'dump true',
	'the sandbox is recorded as masked');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$sbx' AND action = 'ready'"),
	qr/masked by 4 rules in 3 tables, rows left out of 1 table/, 'its ready event says what the rules did');

is(readable_holding($conn, $marker),
	'customers=0 view=0 matview=0 events=0 audit=0 stats=0',
	'the marker is nowhere the sandbox role can read, pg_stats included');
like(readable_holding($conn, 'example.invalid'),
	qr/^customers=2001 view=2001 matview=2001 events=2000 audit=0 stats=[1-9]/,
	'where masked values are (the check above can find what is there)');
my $run_sql = sq("SELECT pgsandbox.run_sql('$sbx', 'SELECT * FROM app.customers ORDER BY id DESC', row_limit => 1000)::text"
	  . " || pgsandbox.run_sql('$sbx', 'SELECT * FROM app.events WHERE id IN (7, 1500)')::text");
unlike($run_sql, qr/\Q$marker\E/, 'run_sql output does not hold the marker');
like($run_sql, qr/user2001\@example\.invalid/, 'run_sql shows the masked value');

my $dboid = sq("SELECT db_oid FROM pgsandbox.sandbox WHERE name = '$sbx'");
is(files_holding($node, $dboid, $marker), 0, 'no file under the sandbox database directory holds the marker');
ok(files_holding($node, $dboid, 'user2001@example.invalid') > 0, 'while its files do hold masked values');
my $src_oid = sq("SELECT oid FROM pg_database WHERE datname = 'crm'");
ok(files_holding($node, $src_oid, $marker) > 0, 'and the source\'s files hold the marker');

is(in_sandbox($conn, q{SELECT email || '|' || full_name || '|' || coalesce(phone, 'null') || '|' || note
	FROM app.customers WHERE id = 5}),
	'user5@example.invalid|N.|null|note 5', 'each masked column got its expression, the others are as they were');
is(in_sandbox($conn, 'SELECT count(*) || \'|\' || count(DISTINCT email) FROM app.customers'), '2001|2001',
	'the masked unique column stays unique');
is(in_sandbox($conn, q{SELECT count(*) FROM pg_constraint WHERE conrelid = 'app.customers'::regclass AND contype IN ('p', 'u')}),
	'2', 'and its unique key and primary key were built on the masked values');
my $other_q = q{SELECT md5(string_agg(id || ' ' || to_char(born, 'YYYY-MM-DD') || ' ' || score::text, ',' ORDER BY id))
	FROM app.customers};
is(in_sandbox($conn, $other_q), $node->safe_psql('crm', $other_q),
	'the unmasked columns of a masked table are copied exactly (dates, floats), whatever the source\'s datestyle');
my $orders_q = 'SELECT count(*) || \'|\' || md5(string_agg(o::text, \',\' ORDER BY id)) FROM app.orders o';
is(in_sandbox($conn, $orders_q), $node->safe_psql('crm', $orders_q), 'an unmasked table is copied as it is');
is(in_sandbox($conn, q{SELECT count(*) FROM app.events WHERE contact_email NOT LIKE '%@example.invalid'}), '0',
	'both partitions of a masked partitioned table are masked');
is(in_sandbox($conn, q{SELECT count(*) FROM app.events_low}) . '|' . in_sandbox($conn, 'SELECT count(*) FROM app.events_high'),
	'999|1001', 'with all their rows');

# the keyed mask: md5 of the key and the value, not of the value alone,
# the same value masked the same way in every row and every clone
my $key_file = $node->data_dir . '/pgsandbox_mask.key';
ok(-f $key_file, 'the server\'s masking key is kept in the data directory');
is(sprintf('%o', (stat $key_file)[2] & 0777), '600', 'readable by the server\'s OS user only');
my $events_q = q{SELECT string_agg(id || ' ' || contact_email, ',' ORDER BY id) FROM app.events WHERE id IN (7, 1500, 8)};
my $unkeyed = $node->safe_psql('crm', q{SELECT string_agg(id || ' ' || md5(contact_email) || '@example.invalid', ',' ORDER BY id)
	FROM app.events WHERE id IN (7, 1500, 8)});
my $keyed = in_sandbox($conn, $events_q);
my @keyed = map { (split / /)[1] } split /,/, $keyed;
isnt($keyed[0], (split / /, (split /,/, $unkeyed)[0])[1], 'a keyed mask is not the md5 of the value alone');
is($keyed[0], $keyed[2], 'the same value gets the same keyed mask in every row');
isnt($keyed[0], $keyed[1], 'and another value another one');
my $key_text = slurp_file($key_file);
is(files_holding($node, $dboid, $key_text), 0, 'the key is in no file of the sandbox');
unlike(sq("SELECT string_agg(expression, ' ') FROM pgsandbox.source_rules"), qr/\Q$key_text\E/,
	'nor in the rules anyone sees');

# the excluded table: complete, empty
my $shape = q{SELECT (SELECT count(*) FROM app.audit_log) || '|' ||
	(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
	   FROM pg_attribute WHERE attrelid = 'app.audit_log'::regclass AND attnum > 0) || '|' ||
	(SELECT string_agg(indexdef, ', ' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'audit_log') || '|' ||
	(SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), ', ' ORDER BY conname)
	   FROM pg_constraint WHERE conrelid = 'app.audit_log'::regclass)};
my $src_shape = $node->safe_psql('crm', $shape);
$src_shape =~ s/^500\|/0|/;
is(in_sandbox($conn, $shape), $src_shape, 'an excluded table has its columns, indexes and constraints, and no rows');
is(in_sandbox($conn, q{SELECT nextval('app.audit_log_id_seq')}), '501', 'its sequence is where the source\'s is');

# a schema-only clone ignores the rules
my $so = sq("SELECT name FROM pgsandbox.clone('crm')");
is(sq("SELECT masked FROM pgsandbox.sandboxes WHERE name = '$so'"), 'f', 'a schema-only clone is not masked');

# ---------------------------------------------------------------------
# who may set rules, and who sees them
# ---------------------------------------------------------------------
sq("CREATE ROLE agent LOGIN PASSWORD 'agent-pw' IN ROLE pgsandbox_user");
sq("CREATE ROLE other LOGIN PASSWORD 'other-pw' IN ROLE pgsandbox_user");
sq("SELECT pgsandbox.grant_source('crm', 'agent')");
my ($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=agent password=agent-pw',
	q{SELECT pgsandbox.unmask('crm', 'app.customers.email')});
isnt($ret, 0, 'a pgsandbox_user cannot remove a rule');
like($err, qr/permission denied/, 'it is told so');
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=agent password=agent-pw',
	q{SELECT pgsandbox.exclude_data('crm', 'app.orders')});
isnt($ret, 0, 'nor add one');
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=agent password=agent-pw',
	q{SELECT count(*) || ' ' || string_agg(expression, ', ' ORDER BY target) FROM pgsandbox.source_rules WHERE kind = 'mask'});
is($out, q{4 'user' || id || '@example.invalid', left(full_name, 1) || '.', NULL, md5(current_setting('pgsandbox_mask.key') || contact_email) || '@example.invalid'},
	'a pgsandbox_user sees the rules of the sources granted to it');
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=other password=other-pw',
	q{SELECT count(*) FROM pgsandbox.source_rules});
is($out, '0', 'and not those of other sources');
is(sq("SELECT count(*) FROM pgsandbox.source_rules"), '5', 'the rules are unchanged');

# ---------------------------------------------------------------------
# fail closed
# ---------------------------------------------------------------------
sub failed_clone
{
	my ($what) = @_;
	# sandboxes only: the worker may be building a snapshot meanwhile
	my $before = sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'");
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('crm', schema_only => false)");
	isnt($ret, 0, "$what: the clone fails");
	my $row = sq("SELECT status || '|' || coalesce(error, '') FROM pgsandbox.sandbox WHERE kind = 'sandbox' ORDER BY id DESC LIMIT 1");
	like($row, qr/^failed\|/, "$what: its row is failed");
	is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'") - $before, 1, "$what: one row was added");
	is(untracked_sandboxes($node), '0', "$what: no database or role is left");
	unlike($err . $row, qr/zq7marker|Marker Person/, "$what: the error quotes no source value");
	return $err;
}

# a rule's column dropped in the source
$node->safe_psql('crm', 'ALTER TABLE app.customers ADD COLUMN secret text');
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.secret', 'NULL')});
$node->safe_psql('crm', 'ALTER TABLE app.customers DROP COLUMN secret');
like(failed_clone('a rule whose column is gone'),
	qr/masking rule "app\.customers\.secret" of source "crm" names a column the source no longer has/,
	'the error names the rule');
# a schema-only clone still works with it
$so = sq("SELECT name FROM pgsandbox.clone('crm')");
is(sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$so'"), 'ready', 'a schema-only clone ignores that rule');
sq(q{SELECT pgsandbox.unmask('crm', 'app.customers.secret')});

# an expression that fails on one row
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.full_name', $$CASE WHEN full_name LIKE 'Marker%' THEN (full_name::int)::text ELSE 'x' END$$)});
like(failed_clone('an expression that fails on a row'),
	qr/could not read the masked rows of table app\.customers from source "crm".*SQLSTATE 22P02/s,
	'the error names the table and the SQLSTATE, not the message');
like(sq("SELECT error FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1"), qr/app\.customers/,
	'the failed row names the table');

# an expression that fails on the first row it reads: the source's message
# would quote that row's value
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.full_name', $$(full_name::int)::text$$)});
my $first_value = $node->safe_psql('crm', 'SELECT full_name FROM app.customers LIMIT 1');
my $first_err = failed_clone('an expression that fails on the first row');
like($first_err, qr/could not read the masked rows of table app\.customers from source "crm".*SQLSTATE 22P02/s,
	'the error names the table and the SQLSTATE');
my $first_trace = $first_err
  . sq("SELECT error FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1")
  . sq("SELECT string_agg(coalesce(detail, ''), ' ') FROM pgsandbox.events");
unlike($first_trace, qr/\Q$first_value\E|invalid input syntax/,
	'neither the error nor the events quote the first row\'s value');
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.full_name', $$left(full_name, 1) || '.'$$)});

# a masked value that breaks a unique key
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.email', $$'same@example.invalid'$$)});
like(failed_clone('a masked value that breaks a unique key'),
	qr/could not create unique index|duplicate key/, 'the error says which key broke');

# a foreign key added since the rule on the masked column: refused before
# any row is read, since the rows referring to it would be copied unmasked
# (and a failing check would quote them)
sq(q{SELECT pgsandbox.mask('crm', 'app.customers.email', $$'user' || id || '@example.invalid'$$)});
$node->safe_psql('crm', q{
CREATE TABLE app.subscriptions (email text NOT NULL REFERENCES app.customers (email));
INSERT INTO app.subscriptions VALUES ('person3@corp.test');});
my $fk_log_from = -s $node->logfile;
my $fk_err = failed_clone('a foreign key added since the rule');
like($fk_err,
	qr/masking rule "app\.customers\.email" of source "crm" masks a column that foreign key "subscriptions_email_fkey" uses/,
	'the error names the rule and the foreign key');
unlike($fk_err . sq("SELECT error FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1")
	  . substr(slurp_file($node->logfile), $fk_log_from),
	qr/person3\@corp\.test/, 'no value of the referring rows reaches the error or the server log');
$node->safe_psql('crm', 'DROP TABLE app.subscriptions');

# a table made an extension's since the rule: its rows are the extension's
$node->safe_psql('crm', 'ALTER EXTENSION plpgsql ADD TABLE app.customers');
like(failed_clone('a masked table that became an extension\'s'),
	qr/masking rule "app\.customers\.\w+" of source "crm" masks a table of extension "plpgsql"/,
	'the error names the rule and the extension');
$node->safe_psql('crm', 'ALTER EXTENSION plpgsql DROP TABLE app.customers');

# a rule set in the transaction that asks for the clone: the worker would
# not see it, so the clone is refused
my $rows_before = sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'");
($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
SELECT pgsandbox.mask('crm', 'app.customers.note', 'NULL');
SELECT name FROM pgsandbox.clone('crm', schema_only => false);
COMMIT;});
like($err, qr/cannot clone source "crm" in the transaction that changed it/,
	'a clone in the transaction that set a rule is refused');
is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'"), $rows_before, 'and asks for nothing');
is(sq("SELECT count(*) FROM pgsandbox.source_rule WHERE column_name = 'note'"), '0',
	'and the rule rolled back with it');
is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'ready' AND masked"), '1',
	'the failures made no masked sandbox');

# ---------------------------------------------------------------------
# snapshots are built masked; a change of rules makes them stale
# ---------------------------------------------------------------------
sq("SELECT pgsandbox.snapshot('crm')");
my $snap = sq("SELECT name || '|' || db_oid FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'");
my ($snap_name, $snap_oid) = split /\|/, $snap;
is(sq("SELECT masked FROM pgsandbox.sandbox WHERE name = '$snap_name'"), 't', 'the snapshot is masked');
is(files_holding($node, $snap_oid, $marker), 0, 'no file of the snapshot database holds the marker');
my ($copy, $copy_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
is(sq("SELECT method || ' ' || masked FROM pgsandbox.sandboxes WHERE name = '$copy'"), 'snapshot true',
	'a copy of it is masked');
is(readable_holding($copy_conn, $marker), 'customers=0 view=0 matview=0 events=0 audit=0 stats=0',
	'and holds no marker');
is(in_sandbox($copy_conn, $events_q), $keyed, 'and its keyed masks are those of the clone made through the dump');

# unmasking the phone: the snapshot is stale at once
sq(q{SELECT pgsandbox.unmask('crm', 'app.customers.phone')});
my ($after, $after_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
is(in_sandbox($after_conn, 'SELECT phone FROM app.customers WHERE id = 5'), '+1 555 0005',
	'a clone after the change has the new rules, not a copy of the stale snapshot');
ok(wait_until(sub {
	sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'"
	  . " AND NOT schema_only AND name <> '$snap_name'") eq '1'
	  && sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$snap_name'") eq 'dropped' }, 60),
	'the stale snapshot is retaken and dropped');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$snap_name' AND action = 'drop'"),
	qr/rules changed/, 'its drop says why');
my ($fresh, $fresh_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
is(sq("SELECT method FROM pgsandbox.sandboxes WHERE name = '$fresh'") . ' '
	  . in_sandbox($fresh_conn, q{SELECT phone || ' ' || email FROM app.customers WHERE id = 5}),
	'snapshot +1 555 0005 user5@example.invalid', 'copies of the new snapshot follow the new rules');

# a pool hands out masked members
sq("SELECT pgsandbox.set_pool('crm', 1, schema_only => false)");
ok(wait_until(sub { sq("SELECT ready FROM pgsandbox.pools WHERE source = 'crm'") eq '1' }, 60),
	'the pool is filled');
# the pools view knows the snapshot as the worker does: under other rules,
# its members are not ready (seen inside a transaction that is rolled back)
like(
	sq("BEGIN; SELECT pgsandbox.mask('crm', 'app.customers.phone', 'NULL');"
		  . " SELECT 'ready=' || ready FROM pgsandbox.pools WHERE source = 'crm'; ROLLBACK"),
	qr/ready=0$/, 'a change of rules leaves the pool no member ready in the pools view');
my ($member, $member_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
is(sq("SELECT method || ' ' || masked FROM pgsandbox.sandboxes WHERE name = '$member'"), 'pool true',
	'a pool member handed out is masked');
is(readable_holding($member_conn, $marker), 'customers=0 view=0 matview=0 events=0 audit=0 stats=0',
	'and holds no marker');
sq("SELECT pgsandbox.set_pool('crm', 0, schema_only => false)");

# ---------------------------------------------------------------------
# a source with an extension goes through an archive on disk: masked alike
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE crm_ext');
$node->safe_psql('crm_ext', qq{
CREATE EXTENSION hstore;
CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL UNIQUE, attrs hstore);
INSERT INTO people SELECT g, CASE g WHEN 3 THEN '$marker' ELSE 'p' || g || '\@corp.test' END, 'a=>1'
  FROM generate_series(1, 100) g;
CREATE MATERIALIZED VIEW people_mv AS SELECT email FROM people;});
sq("SELECT pgsandbox.add_source('crm_ext', 'dbname=crm_ext', allow_data => true)");
sq(q{SELECT pgsandbox.mask('crm_ext', 'public.people.email', $$'p' || id || '@example.invalid'$$)});
my ($ext_sbx, $ext_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm_ext', schema_only => false)");
is(in_sandbox($ext_conn, q{SELECT count(*) || ' ' || count(*) FILTER (WHERE email LIKE '%@example.invalid')
	|| ' ' || (SELECT count(*) FROM people_mv WHERE email LIKE '%@example.invalid') || ' ' || min(attrs -> 'a') FROM people}),
	'100 100 100 1', 'through the archive, every row is copied masked, the materialized view too');
is(files_holding($node, sq("SELECT db_oid FROM pgsandbox.sandbox WHERE name = '$ext_sbx'"), $marker), 0,
	'and no file of that sandbox holds the marker');
sq("SELECT pgsandbox.remove_source('crm_ext')");

# ---------------------------------------------------------------------
# a rule on a partition comes before its parent's, whatever the order of
# the rules (by target: the partition's sorts first here)
# ---------------------------------------------------------------------
$node->safe_psql('crm', q{
CREATE TABLE app.zz_contacts (id int NOT NULL, email text) PARTITION BY RANGE (id);
CREATE TABLE app.aa_contacts_low PARTITION OF app.zz_contacts FOR VALUES FROM (0) TO (10);
CREATE TABLE app.mm_contacts_high PARTITION OF app.zz_contacts FOR VALUES FROM (10) TO (100);
INSERT INTO app.zz_contacts SELECT g, 'c' || g || '@corp.test' FROM generate_series(1, 30) g;});
sq(q{SELECT pgsandbox.mask('crm', 'app.zz_contacts.email', $$'parent' || id || '@example.invalid'$$)});
sq(q{SELECT pgsandbox.mask('crm', 'app.aa_contacts_low.email', $$'child' || id || '@example.invalid'$$)});
my ($part_sbx, $part_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm', schema_only => false)");
is(in_sandbox($part_conn, q{SELECT count(*) FILTER (WHERE email LIKE 'child%') || ' ' || count(*)
	FROM app.aa_contacts_low}) . ' '
	  . in_sandbox($part_conn, q{SELECT count(*) FILTER (WHERE email LIKE 'parent%') || ' ' || count(*)
	FROM app.mm_contacts_high}),
	'9 9 21 21', 'the partition with a rule of its own is masked by it, the other by its parent\'s');
sq(q{SELECT pgsandbox.unmask('crm', 'app.aa_contacts_low.email')});
sq(q{SELECT pgsandbox.unmask('crm', 'app.zz_contacts.email')});
$node->safe_psql('crm', 'DROP TABLE app.zz_contacts');

# ---------------------------------------------------------------------
# a source in another encoding than the admin database's: rules, sent to
# it as they are, must be ASCII
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{CREATE DATABASE crm_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('crm_latin1', q{CREATE TABLE people (id int PRIMARY KEY, name text);
INSERT INTO people SELECT g, 'name ' || g FROM generate_series(1, 10) g;});
sq("SELECT pgsandbox.add_source('crm_latin1', 'dbname=crm_latin1', allow_data => true)");
my $e_acute = "\xc3\xa9";    # in UTF-8, as psql sends it
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.mask('crm_latin1', 'public.people.name', \$\$'Ren${e_acute}e'\$\$)");
like($err, qr/masking rule for "public\.people\.name" is not ASCII, and the encoding of source "crm_latin1" is not the admin database's/,
	'mask() refuses a rule that is not ASCII for a source in another encoding');
sq(q{SELECT pgsandbox.mask('crm_latin1', 'public.people.name', $$'Renee ' || id$$)});
my ($lat_sbx, $lat_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('crm_latin1', schema_only => false)");
is(in_sandbox($lat_conn, q{SELECT min(name) FROM people}), 'Renee 1', 'an ASCII rule masks its clones');
# a rule that is not ASCII, set while the encodings matched, say
sq("UPDATE pgsandbox.source_rule SET expression = \$\$'Ren${e_acute}e ' || id\$\$ WHERE source = 'crm_latin1'");
# (only this source's rows: the worker may be retaking crm's snapshot)
$rows_before = sq("SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'crm_latin1'");
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('crm_latin1', schema_only => false)");
like($err, qr/masking rule "public\.people\.name" of source "crm_latin1" is not ASCII/,
	'a clone with a rule that is not ASCII fails, naming the rule');
is(sq("SELECT count(*) - $rows_before FROM pgsandbox.sandbox WHERE source = 'crm_latin1'") . ' '
	  . sq("SELECT status FROM pgsandbox.sandbox WHERE source = 'crm_latin1' ORDER BY id DESC LIMIT 1"),
	'1 failed', 'and leaves its failed row');
is(untracked_sandboxes($node), '0', 'and leaves no database or role');
sq("SELECT pgsandbox.remove_source('crm_latin1')");

# ---------------------------------------------------------------------
# rules follow their source
# ---------------------------------------------------------------------
sq("SELECT pgsandbox.remove_source('crm')");
is(sq("SELECT count(*) FROM pgsandbox.source_rule"), '0', 'remove_source() removes its rules');
ok(wait_until(sub { untracked_sandboxes($node) eq '0' && sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready')") eq '0' }, 60),
	'its snapshot is dropped, nothing left untracked');

done_testing();
