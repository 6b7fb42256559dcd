
# 056_trust_values.pl: the trust check follows what a source's values and
# folded constraints can run (source_trust.c).
#
# mallory owns a schema in the source and a function, mal.evil(int), that
# logs that it ran and as whom.  Tables a superuser owns reach her code in
# ways a table's own indexes do not show:
#
# - a partition's, and an inheritance child's, CHECK constraint calling her
#   function (the planner folds such constraints);
# - a column whose type is her domain, a superuser's domain whose CHECK
#   calls her function, a superuser's domain over hers, an array of hers,
#   or a composite holding hers.
#
# Each is refused, naming the table, the object, the function and the role,
# on each path that plans or applies on the table: a reduced clone, a
# masked clone, a rule's check, suggest_masks() and set_live().  Nothing is left behind and her function
# never runs.  Beside each, the legitimate use: the same shapes with a
# superuser's function clone with their rows intact and are followed live.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('values',
	    "wal_level = logical\nmax_replication_slots = 10\nmax_wal_senders = 10\n"
	  . "pgsandbox.max_sandboxes_per_owner = 100\npgsandbox.max_sandboxes = 200\n"
	  . "autovacuum = off\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

# Nothing of mallory's ran since the test's own setup: the log from
# $log_start on holds no line of hers.
my $log_start = 0;
sub nothing_ran
{
	my ($what) = @_;
	unlike(substr(slurp_file($node->logfile), $log_start), qr/LOG:  mal\.evil ran/,
		"$what: her function did not run");
}

# A clone that must fail: its error, after checking that it added one
# failed row and left no database or role.
sub failed_clone
{
	my ($what) = @_;
	my $before = sq("SELECT COALESCE(max(id), 0) FROM pgsandbox.sandbox");
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT name FROM pgsandbox.clone('src', schema_only => false)");
	isnt($ret, 0, "$what: the clone fails");
	is(sq("SELECT string_agg(status, ',') FROM pgsandbox.sandbox WHERE id > $before"),
		'failed', "$what: it added one row, failed");
	is(untracked_sandboxes($node), '0', "$what: no database or role is left");
	nothing_ran($what);
	return $err;
}

sub set_rules
{
	my ($use, $table) = @_;
	sq("DELETE FROM pgsandbox.source_rule WHERE source = 'src'");
	if ($use eq 'reduced')
	{
		sq("SELECT pgsandbox.subset('src', '$table', 'id <= 10')");
	}
	else
	{
		sq(qq{SELECT pgsandbox.mask('src', '$table.note', \$\$'x' || id\$\$)});
	}
	return;
}

# ---------------------------------------------------------------------
# the source: mallory's function, and the legitimate shapes
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE ROLE mallory LOGIN;
CREATE ROLE repl LOGIN REPLICATION PASSWORD 'replpw' IN ROLE pg_read_all_data;
CREATE DATABASE src;
});
$node->safe_psql('src', q{
CREATE SCHEMA mal AUTHORIZATION mallory;
SET ROLE mallory;
-- disarmed while the test itself writes values (mal.armed = off)
CREATE FUNCTION mal.evil(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	IF current_setting('mal.armed', true) IS DISTINCT FROM 'off' THEN
		RAISE LOG 'mal.evil ran as %', current_user;
	END IF;
	RETURN true;
END
$f$;
CREATE DOMAIN mal.d_her AS int CHECK (mal.evil(VALUE));
RESET ROLE;
CREATE SCHEMA app;
CREATE FUNCTION app.fine(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > 0';
CREATE DOMAIN app.d_ok AS int CHECK (app.fine(VALUE));
CREATE TYPE app.pair_ok AS (a int, b app.d_ok);
CREATE TABLE app.parts (id int, note text) PARTITION BY RANGE (id);
CREATE TABLE app.parts_1 PARTITION OF app.parts FOR VALUES FROM (0) TO (1000);
ALTER TABLE app.parts_1 ADD CONSTRAINT fine_id CHECK (app.fine(id + 1));
CREATE TABLE app.base (id int PRIMARY KEY, note text);
CREATE TABLE app.kid (CONSTRAINT fine_kid CHECK (app.fine(id + 1))) INHERITS (app.base);
CREATE TABLE app.vals (id int PRIMARY KEY, note text, v app.d_ok, a app.d_ok[], p app.pair_ok);
INSERT INTO app.parts SELECT g, 'p' || g FROM generate_series(1, 50) g;
INSERT INTO app.base SELECT g, 'b' || g FROM generate_series(1, 20) g;
INSERT INTO app.kid SELECT g, 'k' || g FROM generate_series(21, 40) g;
INSERT INTO app.vals SELECT g, 'v' || g, g, ARRAY[g, g + 1], ROW(g, g)::app.pair_ok
  FROM generate_series(1, 50) g;
CREATE PUBLICATION pub FOR TABLE app.vals;
});
$node->safe_psql('src', 'SET ROLE mallory; SELECT mal.evil(1)');
like(slurp_file($node->logfile), qr/LOG:  mal\.evil ran as mallory/, 'her function logs that it ran');
$log_start = -s $node->logfile;

sq(q{SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true)});
sq(q{SELECT pgsandbox.add_source('live', 'dbname=src user=repl password=replpw', allow_data => true)});

my $digest_parts = q{SELECT count(*) || ' ' || md5(string_agg(id || ':' || note, ',' ORDER BY id)) FROM app.parts};
my $digest_base = q{SELECT count(*) || ' ' || md5(string_agg(id || ':' || note, ',' ORDER BY id)) FROM app.base};
my $digest_vals = q{SELECT count(*) || ' ' || md5(string_agg(id || ':' || v || ':' || a::text || ':' || p::text, ',' ORDER BY id)) FROM app.vals};

# the legitimate shapes clone, reduced and masked, with their rows
foreach my $t ([ 'app.parts', $digest_parts ], [ 'app.base', $digest_base ], [ 'app.vals', $digest_vals ])
{
	my ($table, $digest) = @$t;
	foreach my $use ('reduced', 'masked')
	{
		set_rules($use, $table);
		my ($name, $conninfo) = split /\|/,
		  sq("SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)");
		like($name, qr/^sbx_/, "$table, $use, trusted code: it clones");
		# a subset rule holds its table's own rows; a child of its own is
		# another table, copied whole
		my $want = $node->safe_psql('src', $use eq 'masked' ? "SELECT count(*) FROM $table"
			: $table eq 'app.base'
			? "SELECT (SELECT count(*) FROM ONLY app.base WHERE id <= 10) + (SELECT count(*) FROM app.kid)"
			: "SELECT count(*) FROM $table WHERE id <= 10");
		is(sandbox_sql($node, $conninfo, "SELECT count(*) FROM $table"), $want,
			"$table, $use, trusted code: the rows it should have");
		is(sandbox_sql($node, $conninfo, $digest), $node->safe_psql('src', $digest),
			"$table, $use, trusted code: the same values as the source")
		  if $use eq 'masked' && $table eq 'app.vals';
		sq("SELECT pgsandbox.drop('$name')");
	}
}
nothing_ran('the legitimate shapes');

# ---------------------------------------------------------------------
# her function in a folded CHECK: a partition's and an inheritance child's
# ---------------------------------------------------------------------
foreach my $c ([ 'app.parts', 'app.parts_1', 'evil_id' ], [ 'app.base', 'app.kid', 'evil_kid' ])
{
	my ($table, $child, $con) = @$c;
	foreach my $use ('reduced', 'masked')
	{
		set_rules($use, $table);
		$node->safe_psql('src',
			"SET mal.armed = off; ALTER TABLE $child ADD CONSTRAINT $con CHECK (mal.evil(id))");
		like(failed_clone("a CHECK of $child, $use"),
			qr/constraint $con of table \Q$child\E of source "src" calls function mal\.evil\(integer\), which belongs to role "mallory", which the source does not trust/,
			"$child: a CHECK calling her function is refused on a $use clone, naming them");
		$node->safe_psql('src', "ALTER TABLE $child DROP CONSTRAINT $con");
	}
	# the rule's own check plans on the table too
	$node->safe_psql('src',
		"SET mal.armed = off; ALTER TABLE $child ADD CONSTRAINT $con CHECK (mal.evil(id))");
	sq("DELETE FROM pgsandbox.source_rule WHERE source = 'src'");
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.subset('src', '$table', 'id <= 10')");
	like($err, qr/constraint $con of table \Q$child\E of source "src" calls function mal\.evil/,
		"$child: subset() refuses it as well");
	is(sq("SELECT count(*) FROM pgsandbox.source_rule WHERE source = 'src'"), '0', 'and sets no rule');
	($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgsandbox.suggest_masks('src')");
	like($err, qr/suggest_masks\(\) did not sample [^\n]*\Q$table\E\b/,
		"$child: suggest_masks() does not sample it, and says so");
	$node->safe_psql('src', "ALTER TABLE $child DROP CONSTRAINT $con");
}
# her domain named by a cast in a superuser's CHECK: its constraint runs
# when the CHECK is folded
sq("DELETE FROM pgsandbox.source_rule WHERE source = 'src'");
set_rules('reduced', 'app.parts');
$node->safe_psql('src',
	'SET mal.armed = off; ALTER TABLE app.parts_1 ADD CONSTRAINT casts CHECK (id::mal.d_her IS NOT NULL)');
like(failed_clone('a cast to her domain in a CHECK'),
	qr/domain mal\.d_her, named by an expression of table app\.parts_1 of source "src", belongs to role "mallory"/,
	'a CHECK that casts to her domain is refused, naming the domain and the table');
$node->safe_psql('src', 'ALTER TABLE app.parts_1 DROP CONSTRAINT casts');
nothing_ran('folded CHECKs');

# ---------------------------------------------------------------------
# her code in a column's type
# ---------------------------------------------------------------------
my $su = superuser_name();
my @types = (
	[ 'her domain', 'mal.d_her', '',
		qr/domain mal\.d_her, in the type of column w of table app\.vals of source "(\w+)", belongs to role "mallory", which the source does not trust/ ],
	[ 'a trusted domain whose CHECK calls her function', 'app.d_calls',
		'CREATE DOMAIN app.d_calls AS int CONSTRAINT calls CHECK (mal.evil(VALUE))',
		qr/constraint calls of domain app\.d_calls, in the type of column w of table app\.vals of source "(\w+)", calls function mal\.evil\(integer\), which belongs to role "mallory"/ ],
	[ 'a trusted domain over hers', 'app.d_over', 'CREATE DOMAIN app.d_over AS mal.d_her',
		qr/domain mal\.d_her, in the type of column w of table app\.vals of source "(\w+)", belongs to role "mallory"/ ],
	[ 'an array of hers', 'mal.d_her[]', '',
		qr/domain mal\.d_her, in the type of column w of table app\.vals of source "(\w+)", belongs to role "mallory"/ ],
	[ 'a composite holding hers', 'app.pair_her', 'CREATE TYPE app.pair_her AS (a int, b mal.d_her)',
		qr/domain mal\.d_her, in the type of column w of table app\.vals of source "(\w+)", belongs to role "mallory"/ ]);
my $ok_shape = "a trusted domain, array and composite";

foreach my $t (@types)
{
	my ($what, $type, $create, $msg) = @$t;
	$node->safe_psql('src', "SET mal.armed = off; $create") if $create;
	foreach my $use ('reduced', 'masked')
	{
		# the rules first: their checks would refuse the table now
		set_rules($use, 'app.vals');
		$node->safe_psql('src', "SET mal.armed = off; ALTER TABLE app.vals ADD COLUMN w $type");
		like(failed_clone("$what, $use"), $msg, "$what: refused on a $use clone, naming it");
		$node->safe_psql('src', "ALTER TABLE app.vals DROP COLUMN w");
	}
	sq("DELETE FROM pgsandbox.source_rule WHERE source = 'src'");
	$node->safe_psql('src', "SET mal.armed = off; ALTER TABLE app.vals ADD COLUMN w $type");
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.mask('src', 'app.vals.note', 'id::text')");
	like($err, $msg, "$what: mask() refuses to check its rule on the table");
	($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.set_live('live', 'pub')});
	like($err, $msg, "$what: set_live() refuses it, naming it");
	is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'live' AND kind = 'snapshot'")
		  . ' ' . sq("SELECT count(*) FROM pg_replication_slots")
		  . ' ' . sq("SELECT count(*) FROM pg_subscription")
		  . ' ' . sq("SELECT count(*) FROM pgsandbox.source_rule WHERE source = 'src'"),
		'0 0 0 0', "$what: set_live() built nothing, mask() set no rule");
	$node->safe_psql('src', "ALTER TABLE app.vals DROP COLUMN w");
	$node->safe_psql('src', "DROP TYPE $type") if $create;
}
nothing_ran('types');

# a trusted domain, array and composite are followed live
sq(q{SELECT pgsandbox.set_live('live', 'pub')});
ok(live_snapshot_of($node, 'live'), "$ok_shape: set_live() builds a live snapshot");
my $at = $node->safe_psql('src', q{INSERT INTO app.vals VALUES (51, 'v51', 51, ARRAY[51, 52], ROW(51, 51));
SELECT now()});
live_caught_up($node, 'live', $at, $ok_shape);
my ($name, $conninfo) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('live', schema_only => false)");
is(sandbox_sql($node, $conninfo, $digest_vals), $node->safe_psql('src', $digest_vals),
	"$ok_shape: a clone of the live snapshot holds the source's values, the new row too");
sq("SELECT pgsandbox.drop('$name')");
sq(q{SELECT pgsandbox.unset_live('live')});
nothing_ran('live');

$node->stop;
done_testing();
