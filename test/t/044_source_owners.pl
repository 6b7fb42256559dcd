
# 044_source_owners.pl: no owner of objects in a source makes pgsandbox run
# its code, or hands its owner rows it could not read (source_trust.c,
# source_reader.c).
#
# mallory owns a schema and tables in the source, holds REFERENCES on
# app.orders, and owns functions that, run as anyone, write a marker file
# when they can and raise an error carrying app.secrets, which she may not
# read.  For each login a source can have (the default pgsandbox_reader, a
# superuser, a pg_read_all_data role without BYPASSRLS):
#
# - her table whose foreign key makes it a "down" table of a reduced clone
#   is refused, hostile index or not, until she is trusted;
# - an index expression, a partial-index predicate and a statistics
#   expression calling her function, on tables a superuser owns, are
#   refused on a seed, a followed table, a down table and a masked table,
#   and by mask(), subset() and suggest_masks();
# - the marker never appears, and the secrets reach no error, view or log.
#
# Then: a policy calling her function on a table read by a login without
# BYPASSRLS runs no code; a view put in a reduced table's place between the
# check and the read (the reader waits on an advisory lock the test holds)
# brings no row in; a share of rows on a table without a key keeps the
# same rows when only a masked column changes; a pgsandbox_user sees the
# step that failed, not what the source said; doctor() flags a superuser
# login; the default login is pgsandbox_reader, kept out of the admin
# database.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(usleep);

# no autovacuum: its ANALYZE would run the statistics expressions below as
# their table's owner, which is PostgreSQL's own business, not pgsandbox's
my $node = sandbox_node('owners',
	"pgsandbox.max_concurrent_clones = 2\npgsandbox.max_sandboxes_per_owner = 100\n"
	  . "pgsandbox.max_sandboxes = 200\nautovacuum = off\n");
my $su = superuser_name();
my $secret = 'zq-secret-5521';
my $marker = $node->basedir . '/marker';

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# Nothing of mallory's ran: no marker, no secret in the server's log.
sub nothing_ran
{
	my ($what) = @_;
	ok(!-e $marker, "$what: no marker file was written");
	my $log = slurp_file($node->logfile);
	unlike($log, qr/\Q$secret\E/, "$what: the secrets reached no log line");
}

# A clone that must fail: its error, after checking that only its failed
# row is left and that nothing of mallory's ran.
sub failed_clone
{
	my ($source, $what, $args) = @_;
	$args //= 'schema_only => false';
	my $before = sq("SELECT count(*) FROM pgsandbox.sandbox");
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT name FROM pgsandbox.clone('$source', $args)");
	isnt($ret, 0, "$what: the clone fails");
	is(sq("SELECT count(*) FROM pgsandbox.sandbox") - $before, 1, "$what: one row was added");
	is(sq("SELECT status FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1"), 'failed',
		"$what: it is failed");
	is(untracked_sandboxes($node), '0', "$what: no database or role is left");
	unlike($err, qr/\Q$secret\E/, "$what: the error quotes no secret");
	nothing_ran($what);
	return $err;
}

# ---------------------------------------------------------------------
# the source, its owners, and the three logins
# ---------------------------------------------------------------------
$node->safe_psql('postgres', qq{
CREATE ROLE mallory LOGIN PASSWORD 'mal';
CREATE ROLE plainreader LOGIN PASSWORD 'Plain-Reader-Pw7' IN ROLE pg_read_all_data;
CREATE ROLE bob LOGIN PASSWORD 'bob' IN ROLE pgsandbox_user;
CREATE DATABASE src;
GRANT CREATE ON DATABASE src TO mallory;
});
$node->safe_psql('src', qq{
CREATE SCHEMA app;
CREATE TABLE app.orders (id int PRIMARY KEY, customer text NOT NULL, note text);
INSERT INTO app.orders SELECT g, 'c' || g, 'n' || g FROM generate_series(1, 100) g;
CREATE TABLE app.lines (id int PRIMARY KEY, order_id int REFERENCES app.orders, qty int);
INSERT INTO app.lines SELECT g, 1 + g % 100, g FROM generate_series(1, 200) g;
CREATE TABLE app.items (id int PRIMARY KEY, label text);
INSERT INTO app.items SELECT g, 'i' || g FROM generate_series(1, 50) g;
CREATE TABLE app.secrets (id int PRIMARY KEY, secret text);
-- built, so that no logged statement holds it
INSERT INTO app.secrets VALUES (1, 'zq-secret' || '-5521');
CREATE TABLE app.pins (holder text, pin text);
INSERT INTO app.pins SELECT 'h' || g, lpad((g * 7919 % 10000)::text, 4, '0') FROM generate_series(1, 400) g;
CREATE TABLE app.only_pin (pin text);
INSERT INTO app.only_pin VALUES ('1234');
GRANT USAGE ON SCHEMA app TO mallory;
GRANT REFERENCES ON app.orders TO mallory;
});
# mallory's code: a marker file where it may write one, then the secrets
# in an error, where it may read them
$node->safe_psql('src', qq{
SET ROLE mallory;
CREATE SCHEMA mal;
CREATE FUNCTION mal.leak() RETURNS int LANGUAGE plpgsql VOLATILE AS \$f\$
BEGIN
	BEGIN
		EXECUTE format('COPY (SELECT current_user) TO %L', '$marker');
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	RAISE EXCEPTION 'leaked: %', (SELECT string_agg(secret, ',') FROM app.secrets);
END
\$f\$;
-- disarmed while the test builds indexes on it (mal.armed = off)
CREATE FUNCTION mal.evil(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS \$f\$
BEGIN
	IF current_setting('mal.armed', true) IS DISTINCT FROM 'off' THEN
		PERFORM mal.leak();
	END IF;
	RETURN \$1;
END
\$f\$;
CREATE FUNCTION mal.spy(text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS \$f\$
BEGIN
	PERFORM mal.leak();
	RETURN true;
END
\$f\$;
CREATE TABLE mal.notes (id int PRIMARY KEY, order_id int REFERENCES app.orders, body text);
INSERT INTO mal.notes SELECT g, g, 'note' FROM generate_series(1, 20) g;
RESET ROLE;
});
my ($ret, $out, $err) = $node->psql('src', 'SET ROLE mallory; SELECT * FROM app.secrets');
like($err, qr/permission denied/, 'mallory may not read app.secrets');
# the function works as written: it would leak, run as a reader
($ret, $out, $err) = $node->psql('src',
	'SET log_min_messages = panic; SET ROLE plainreader; SELECT mal.leak()');
like($err, qr/leaked: \Q$secret\E/, 'mallory\'s function leaks the secrets when a reader runs it');

my %logins = (
	'default' => 'dbname=src',
	'superuser' => "dbname=src user=$su",
	'reader' => 'dbname=src user=plainreader password=Plain-Reader-Pw7');
foreach my $login (sort keys %logins)
{
	sq("SELECT pgsandbox.add_source('src_$login', '$logins{$login}', allow_data => true)");
}

# ---------------------------------------------------------------------
# the default login: pgsandbox_reader, kept out of the admin database
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.mask('src_default', 'app.items.label', 'current_user::text')});
my ($sbx, $conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('src_default', schema_only => false)");
is(in_sandbox($conn, 'SELECT DISTINCT label FROM app.items'), 'pgsandbox_reader',
	'a source of this cluster that names no user is read as pgsandbox_reader');
is(in_sandbox($conn, 'SELECT count(*) FROM app.orders'), '100', 'and cloned whole');
sq("SELECT pgsandbox.drop('$sbx')");
sq(q{SELECT pgsandbox.unmask('src_default', 'app.items.label')});
is(sq(q{SELECT rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication FROM pg_roles WHERE rolname = 'pgsandbox_reader'}),
	'f', 'pgsandbox_reader has no attribute but login and BYPASSRLS');
sq("SELECT pgsandbox.add_source('admindb', 'dbname=postgres', allow_data => true)");
like(failed_clone('admindb', 'the admin database read by the reader'),
	qr/role "pgsandbox_reader" may not connect to database "postgres"/,
	'the reader may not log into the admin database');
sq("SELECT pgsandbox.remove_source('admindb')");

# ---------------------------------------------------------------------
# doctor() on each login
# ---------------------------------------------------------------------
my $doctor = sq(q{SELECT "check" || ': ' || ok FROM pgsandbox.doctor() WHERE "check" LIKE '%superuser%' ORDER BY 1});
like($doctor, qr/source "src_superuser" is not read as a superuser: false/,
	'doctor() flags the source read as a superuser');
like($doctor, qr/source "src_default" is not read as a superuser: true/,
	'and not the one read as pgsandbox_reader');
like($doctor, qr/source "src_reader" is not read as a superuser: true/,
	'nor the one read as a pg_read_all_data role');

# ---------------------------------------------------------------------
# mallory's own table, a down table of a reduced clone
# ---------------------------------------------------------------------
foreach my $login (sort keys %logins)
{
	my $source = "src_$login";
	sq("SELECT pgsandbox.subset('$source', 'app.orders', 'id <= 10')");
	like(failed_clone($source, "$login: mallory's down table"),
		qr/table mal\.notes of source "$source" belongs to role "mallory", which the source does not trust/,
		"$login: her table is refused, naming it and her");
}
# her hostile index makes no difference to the refusal, and trusting her
# without it works
$node->safe_psql('src',
	'SET mal.armed = off; SET ROLE mallory; CREATE INDEX notes_evil ON mal.notes ((order_id + mal.evil(1)))');
like(failed_clone('src_default', 'a down table with a hostile index'),
	qr/table mal\.notes of source "src_default" belongs to role "mallory"/,
	'a down table with her index expression is refused before anything is planned');
$node->safe_psql('src', 'DROP INDEX mal.notes_evil');
sq(q{SELECT pgsandbox.trust_owners('src_default', '{mallory}')});
is(sq(q{SELECT trusted_owners FROM pgsandbox.sources WHERE name = 'src_default'}), '{mallory}',
	'the sources view shows whom a source trusts');
($sbx, $conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('src_default', schema_only => false)");
is(in_sandbox($conn, 'SELECT count(*) FROM mal.notes'), '10',
	'trusted, her down table keeps the rows that refer to kept orders');
sq("SELECT pgsandbox.drop('$sbx')");
sq(q{SELECT pgsandbox.trust_owners('src_default', '{}')});
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.trust_owners('src_default', '{NULL}')});
like($err, qr/owners may not hold NULL/, 'trust_owners() refuses a NULL role');
# her table left out entirely: nothing is planned on it
sq("SELECT pgsandbox.exclude_data('src_default', 'mal.notes')");
($sbx, $conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('src_default', schema_only => false)");
is(in_sandbox($conn, 'SELECT count(*) FROM mal.notes') . '/' . in_sandbox($conn, 'SELECT count(*) FROM app.orders'),
	'0/10', 'with her table\'s rows left out, the reduced clone is made');
sq("SELECT pgsandbox.drop('$sbx')");
foreach my $login (sort keys %logins)
{
	sq("SELECT pgsandbox.exclude_data('src_$login', 'mal.notes')")
	  unless $login eq 'default';
}

# ---------------------------------------------------------------------
# her function in a superuser's index, predicate and statistics
# ---------------------------------------------------------------------
my @hostile = (
	[ 'index expression', 'CREATE INDEX hostile ON %s ((id + mal.evil(1)))', 'DROP INDEX app.hostile',
		qr/index app\.hostile of table app\.\w+ of source "\w+" calls function mal\.evil\(integer\), which belongs to role "mallory"/ ],
	[ 'partial-index predicate', 'CREATE INDEX hostile ON %s (id) WHERE mal.evil(id) > 0', 'DROP INDEX app.hostile',
		qr/index app\.hostile of table app\.\w+ of source "\w+" calls function mal\.evil\(integer\)/ ],
	[ 'statistics expression', 'CREATE STATISTICS app.hostile ON (mal.evil(id)) FROM %s', 'DROP STATISTICS app.hostile',
		qr/statistics object app\.hostile of table app\.\w+ of source "\w+" calls function mal\.evil\(integer\)/ ]);
# which table each use of a table plans on, and the rules that make it
my @uses = (
	[ 'seed', 'app.orders', sub { sq("SELECT pgsandbox.subset('$_[0]', 'app.orders', 'id <= 10')") } ],
	[ 'followed table', 'app.lines', sub {
			sq("SELECT pgsandbox.subset('$_[0]', 'app.orders', 'id <= 10')");
			sq("SELECT pgsandbox.follow('$_[0]', 'app.lines')") } ],
	[ 'down table', 'app.lines', sub { sq("SELECT pgsandbox.subset('$_[0]', 'app.orders', 'id <= 10')") } ],
	[ 'masked table', 'app.items', sub { sq(qq{SELECT pgsandbox.mask('$_[0]', 'app.items.label', \$\$'x' || id\$\$)}) } ]);
sub clear_rules
{
	my ($source) = @_;
	sq("DELETE FROM pgsandbox.source_rule WHERE source = '$source' AND kind <> 'exclude_data'");
}
foreach my $login (sort keys %logins)
{
	my $source = "src_$login";
	clear_rules($source);
	foreach my $h (@hostile)
	{
		my ($kind, $create, $drop, $msg) = @$h;
		foreach my $u (@uses)
		{
			my ($use, $table, $rules) = @$u;
			# the rules first: their checks would refuse the table now
			$rules->($source);
			$node->safe_psql('src', 'SET mal.armed = off; ' . sprintf($create, $table));
			like(failed_clone($source, "$login: $kind on a $use"), $msg,
				"$login: a $kind calling her function on a $use is refused, naming both");
			clear_rules($source);
			$node->safe_psql('src', $drop);
		}
	}
}

# the rule checks and suggest_masks() plan on tables too
$node->safe_psql('src', 'SET mal.armed = off; CREATE INDEX hostile ON app.items ((id + mal.evil(1)))');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.mask('src_default', 'app.items.label', $$'x' || id$$)});
like($err, qr/index app\.hostile of table app\.items .* calls function mal\.evil/,
	'mask() refuses to check its rule against a table with her code');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.subset('src_default', 'app.items', 'id < 5')});
like($err, qr/index app\.hostile of table app\.items .* calls function mal\.evil/,
	'so does subset()');
is(sq(q{SELECT count(*) FROM pgsandbox.source_rule WHERE source = 'src_default' AND kind <> 'exclude_data'}),
	'0', 'no rule was set');
nothing_ran('the rule checks');
$node->safe_psql('src', q{SET mal.armed = off; CREATE TABLE app.contacts (id int PRIMARY KEY, handle text);
INSERT INTO app.contacts SELECT g, 'person' || g || '@corp.test' FROM generate_series(1, 30) g;
CREATE TABLE app.handles (id int PRIMARY KEY, handle text);
INSERT INTO app.handles SELECT g, 'person' || g || '@corp.test' FROM generate_series(1, 30) g;
CREATE INDEX hostile2 ON app.handles ((id + mal.evil(1)));});
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT target FROM pgsandbox.suggest_masks('src_default') WHERE target LIKE 'app.%handle%' ORDER BY 1});
is($out, 'app.contacts.handle', 'suggest_masks() samples the trusted table');
like($err, qr/did not sample 3 tables of source "src_default": app\.handles, app\.items, mal\.notes\n/,
	'and warns of the tables it did not sample');
nothing_ran('suggest_masks()');
$node->safe_psql('src', 'DROP INDEX app.hostile; DROP INDEX app.hostile2');

# ---------------------------------------------------------------------
# a policy calling her function, read by a login without BYPASSRLS
# ---------------------------------------------------------------------
$node->safe_psql('src', q{ALTER TABLE app.items ENABLE ROW LEVEL SECURITY;
CREATE POLICY spying ON app.items USING (mal.spy(label));});
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.mask('src_reader', 'app.items.label', $$'x' || id$$)});
like($err, qr/query would be affected by row-level security policy for table "items"/,
	'mask() does not run the policy either: the check fails');
sq(q{INSERT INTO pgsandbox.source_rule (source, kind, target, schema_name, table_name, column_name, expression, added_by)
	VALUES ('src_reader', 'mask', 'app.items.label', 'app', 'items', 'label', $$'x' || id$$, current_user)});
like(failed_clone('src_reader', 'a hostile policy, a login without BYPASSRLS'),
	qr/row-level security/, 'the read fails rather than run the policy');
clear_rules('src_reader');
like(failed_clone('src_reader', 'a hostile policy, a plain dump'),
	qr/pg_dump/, 'so does a plain dump');
($sbx, $conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('src_default', schema_only => false)");
is(in_sandbox($conn, 'SELECT count(*) FROM app.items'), '50',
	'pgsandbox_reader bypasses the policy: every row, and no policy ran');
nothing_ran('a policy bypassed');
sq("SELECT pgsandbox.drop('$sbx')");

# a pgsandbox_user sees the step that failed, not what the source said
sq(q{SELECT pgsandbox.grant_source('src_reader', 'bob')});
($ret, $out, $err) = $node->psql('postgres',
	q{SET ROLE bob; SELECT name FROM pgsandbox.clone('src_reader', schema_only => false)});
like($err, qr/ERROR:  pg_dump/, 'a pgsandbox_user\'s failed clone names the step');
unlike($err, qr/row-level security|app\.items/, 'but not what the source said');
like($err, qr/shown to administrators only/, 'and says where it is');
is($node->safe_psql('postgres', q{SET ROLE bob;
	SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'failed' AND error ~ 'row-level security|\n'}),
	'0', 'the sandboxes view shows it the first line only');
is($node->safe_psql('postgres', q{SET ROLE bob;
	SELECT count(*) FROM pgsandbox.events WHERE action = 'failed' AND detail ~ 'row-level security|\n'}),
	'0', 'and so do its events');
ok(sq(q{SELECT count(*) FROM pgsandbox.sandboxes s WHERE s.owner = 'bob' AND s.error ~ 'row-level security'}) > 0,
	'an admin sees the whole error');
$node->safe_psql('src', q{DROP POLICY spying ON app.items; ALTER TABLE app.items DISABLE ROW LEVEL SECURITY;});

# ---------------------------------------------------------------------
# a view in a reduced table's place, between the check and the read
# ---------------------------------------------------------------------
$node->safe_psql('src', qq{CREATE SCHEMA vault;
CREATE TABLE vault.hidden (id int, customer text, note text);
INSERT INTO vault.hidden SELECT g, 'zq-secret' || '-5521', 'hidden' FROM generate_series(1, 1000) g;});
sq("SELECT pgsandbox.subset('src_default', 'app.orders', 'id <= 10')");
$node->append_conf('postgresql.conf', "pgsandbox.test_copy_pause = 4242\n");
$node->reload;
# the test's session holds the lock until the test ends it
my $holder = start_psql($node, "dbname=src user=$su", 'SELECT pg_advisory_lock(4242)',
	'SELECT pg_sleep(170)');
ok(wait_until(sub {
	sq(q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted}) eq '1' }, 30),
	'the test holds the advisory lock');
my $cloning = start_psql($node, "dbname=postgres user=$su",
	"SELECT name FROM pgsandbox.clone('src_default', schema_only => false)");
ok(wait_until(sub {
	sq(q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted}) eq '1' }, 60),
	'the reader waits before it reads a reduced table');
# the swap: a view with columns named ctid and tableoid, over a table the
# clone must never read
my $orders_oid = $node->safe_psql('src', q{SELECT 'app.orders'::regclass::oid});
my $lines_oid = $node->safe_psql('src', q{SELECT 'app.lines'::regclass::oid});
$node->safe_psql('src', qq{ALTER SCHEMA app RENAME TO app_real; CREATE SCHEMA app;
CREATE VIEW app.orders AS SELECT h.id, h.customer, h.note, t.ctid AS ctid, $orders_oid\::oid AS tableoid
  FROM vault.hidden h JOIN app_real.orders t ON t.id = h.id;
CREATE VIEW app.lines AS SELECT h.id, t.order_id, t.qty, t.ctid AS ctid, $lines_oid\::oid AS tableoid
  FROM vault.hidden h JOIN app_real.lines t ON t.id = h.id;
CREATE VIEW app.items AS SELECT * FROM app_real.items;});
sq(q{SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted});
my ($cret, $cout, $cerr) = finish_psql($cloning);
isnt($cret, 0, 'the clone with a view swapped in fails');
like($cerr, qr/gave 0 rows where \d+ were expected/,
	'it fails on the rows it did not get: the view\'s rows are not of the table\'s row type');
unlike($cerr, qr/\Q$secret\E/, 'the error quotes none of the view\'s rows');
is(untracked_sandboxes($node), '0', 'nothing of it is left');
$node->safe_psql('src', q{DROP SCHEMA app CASCADE; ALTER SCHEMA app_real RENAME TO app;});
finish_psql($holder);
$node->append_conf('postgresql.conf', "pgsandbox.test_copy_pause = 0\n");
$node->reload;
clear_rules('src_default');

# ---------------------------------------------------------------------
# a share of rows on a table without a key never reads a masked column
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.mask('src_default', 'app.pins.pin', $$'0000'$$)});
sq(q{SELECT pgsandbox.subset('src_default', 'app.pins', '30%')});
my @kept;
for my $round (1 .. 2)
{
	($sbx, $conn) = split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('src_default', schema_only => false)");
	push @kept, in_sandbox($conn, q{SELECT string_agg(holder, ',' ORDER BY holder) FROM app.pins});
	is(in_sandbox($conn, q{SELECT count(*) FROM app.pins WHERE pin <> '0000'}), '0',
		"round $round: every pin is masked");
	sq("SELECT pgsandbox.drop('$sbx')");
	# only the masked column changes on the source
	$node->safe_psql('src', q{UPDATE app.pins SET pin = lpad(((pin::int + 4111) % 10000)::text, 4, '0')});
}
my $n = () = $kept[0] =~ /,/g;
ok($n > 40 && $n < 200, "a share keeps some rows (" . ($n + 1) . ")");
is($kept[1], $kept[0], 'the same rows are kept when only the masked column changed');
sq(q{SELECT pgsandbox.mask('src_default', 'app.only_pin.pin', $$'0000'$$)});
sq(q{SELECT pgsandbox.subset('src_default', 'app.only_pin', '50%')});
like(failed_clone('src_default', 'a share of a table whose columns are all masked'),
	qr/a share of the rows of table app\.only_pin of source "src_default" would read masked columns only/,
	'a share that could only hash masked columns is refused');
clear_rules('src_default');

nothing_ran('the whole test');
$node->stop;

# ---------------------------------------------------------------------
# no worker, so pgsandbox_reader has no password: a source of the cluster
# that names no user is not read at all, rather than as the superuser
# ---------------------------------------------------------------------
my $lone = sandbox_node('no_worker', "max_worker_processes = 0\n");
$lone->safe_psql('postgres', q{SELECT pgsandbox.add_source('here', 'dbname=postgres')});
my $row = $lone->safe_psql('postgres',
	q{SELECT ok || ' ' || detail FROM pgsandbox.doctor() WHERE "check" = 'source "here" can be dumped'});
like($row, qr/^false Cannot connect: source "here" cannot be read yet\. Sources of this cluster that name no user are read as pgsandbox_reader/,
	'doctor() says the source cannot be read until the worker gives the reader its password');
is($lone->safe_psql('postgres',
		q{SELECT count(*) FROM pgsandbox.doctor() WHERE "check" = 'source "here" is not read as a superuser'}),
	'0', 'and never logged in to it, as a superuser or as anyone');
($ret, $out, $err) = $lone->psql('postgres',
	q{\set VERBOSITY verbose
	  SELECT * FROM pgsandbox.suggest_masks('here')});
like($err, qr/ERROR:  55000: source "here" cannot be read yet/,
	'suggest_masks() is refused with 55000 rather than reading as the superuser');
$lone->stop;
done_testing();
