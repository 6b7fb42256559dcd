# 049_live_snapshots.pl: a live source's data snapshot follows it by
# logical replication (worker/live.c, clone/live_copy.c), and its copies
# hold the source as it was when they were asked for.
#
# A source in this cluster and one in another, each with a publication and
# a login with REPLICATION:
# - set_live() builds a live snapshot: a slot on the source, a subscription
#   owned by pgsandbox_live, which no client logs in as;
# - inserts, updates, deletes and a TRUNCATE reach new copies and not the
#   earlier ones, with every sequence as the source has it, and data_as_of
#   no earlier than the changes;
# - two copies at once share one pause of the apply, which resumes after;
# - a host restart while the apply is paused for a copy: the worker resumes
#   it, and changes flow again;
# - a column added on the source: a live_rebuild event, copies meanwhile,
#   then a new live snapshot with the column; a table added to the
#   publication: the same;
# - the other cluster stopped: clones still served, from what was applied;
#   started again: its changes arrive;
# - masking and subset rules refused on a live source;
# - a live build killed once its slot is made: the worker drops the slot;
# - unset_live() and remove_source() leave no subscription here and no slot
#   pgsandbox made on the source.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('live',
	    "wal_level = logical\n"
	  . "max_replication_slots = 10\n"
	  . "max_wal_senders = 10\n"
	  . "pgsandbox.max_sandboxes_per_owner = 50\n"
	  . "pgsandbox.live_look_interval = '1s'\n"
	  . "pgsandbox.copy_strategy = wal_log\n"
	  . "pgsandbox.test_copy_pause = 4242\n"
	  . "restart_after_crash = on\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub in_sandbox { return sandbox_sql($node, @_); }

# what a database holds of table orders, as one line
my $digest = q{SELECT count(*) || ' ' || COALESCE(sum(amount), 0) || ' '
                    || md5(COALESCE(string_agg(id || ':' || note || ':' || amount, ',' ORDER BY id), ''))
                 FROM orders};

# a clone of source $source with data: (name, conninfo)
sub clone_of
{
	my ($source) = @_;
	return split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
}

sub caught_up { return live_caught_up($node, @_); }
sub live_snapshot { return live_snapshot_of($node, @_); }

$node->safe_psql('postgres', q{
CREATE DATABASE shop;
CREATE ROLE repl LOGIN REPLICATION PASSWORD 'replpw' IN ROLE pg_read_all_data;
});
$node->safe_psql('shop', q{
CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL, amount int NOT NULL);
INSERT INTO orders (note, amount) SELECT 'o' || g, g FROM generate_series(1, 500) g;
CREATE TABLE audit (id bigserial PRIMARY KEY, what text);
INSERT INTO audit (what) VALUES ('before');
CREATE PUBLICATION pub FOR TABLE orders;
});
sq(q{SELECT pgsandbox.add_source('shop', 'dbname=shop user=repl password=replpw', allow_data => true)});

# ---------------------------------------------------------------------
# the live snapshot
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.set_live('shop', 'pub')});
my $snap = live_snapshot('shop');
ok($snap, 'set_live() builds a live snapshot');
like(sq("SELECT detail FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $snap AND e.action = 'snapshot'"),
	qr/following publication "pub" of the source through slot "pgsandbox_[a-z0-9]{12}"/,
	'its snapshot event names the publication and the slot');
my $slot = sq("SELECT live_slot FROM pgsandbox.sandbox WHERE id = $snap");
is(sq("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND database = 'shop'"),
	'1', 'the slot is on the source');
is(sq("SELECT s.subowner::regrole || ' ' || s.subenabled::int FROM pg_subscription s"
		  . " JOIN pgsandbox.sandbox x ON x.db_oid = s.subdbid AND x.name = s.subname"
		  . " WHERE x.id = $snap"),
	'pgsandbox_live 1', 'its subscription is pgsandbox_live\'s and enabled');
is(sq("SELECT rolcanlogin::int || ' ' || rolsuper::int FROM pg_roles r JOIN pgsandbox.sandbox x"
		  . " ON x.role_oid = r.oid WHERE x.id = $snap"),
	'0 0', 'the snapshot\'s own role cannot log in');

# no client logs in as pgsandbox_live, even where pg_hba.conf would let it
my $hba = $node->data_dir . '/pg_hba.conf';
my $hba_text = slurp_file($hba);
open my $fh, '>', $hba or die $!;
print $fh "local all pgsandbox_live trust\n" . $hba_text;
close $fh;
$node->reload;
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT 1', extra_params => [ '-U', 'pgsandbox_live' ]);
isnt($ret, 0, 'a client login as pgsandbox_live fails');
like($err, qr/role "pgsandbox_live" is the apply of live snapshots, and no client logs in as it/,
	'the login check refuses it');
open $fh, '>', $hba or die $!;
print $fh $hba_text;
close $fh;
$node->reload;

# ---------------------------------------------------------------------
# changes reach new copies, not earlier ones
# ---------------------------------------------------------------------
my ($a_name, $a_conn) = clone_of('shop');
my $before = $node->safe_psql('shop', $digest);
is(in_sandbox($a_conn, $digest), $before, 'a copy holds the source as it is');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$a_name' AND action = 'ready'"),
	qr/the live snapshot's apply was paused for [0-9.]+ s; 2 sequences set as the source has them/,
	'its ready event tells the pause and the sequences');

$node->safe_psql('shop', q{
INSERT INTO orders (note, amount) SELECT 'n' || g, 1000 + g FROM generate_series(1, 50) g;
UPDATE orders SET amount = amount * 2 WHERE id % 7 = 0;
DELETE FROM orders WHERE id % 11 = 0;
SELECT nextval('orders_id_seq') FROM generate_series(1, 5);
});
my $changed_at = $node->safe_psql('shop', 'SELECT now()');
caught_up('shop', $changed_at, 'inserts, updates and deletes');
my ($b_name, $b_conn) = clone_of('shop');
my $after = $node->safe_psql('shop', $digest);
isnt($after, $before, 'the source changed');
is(in_sandbox($b_conn, $digest), $after, 'a new copy holds the changes');
is(in_sandbox($a_conn, $digest), $before, 'the earlier copy does not');
is(in_sandbox($b_conn, 'SELECT last_value FROM orders_id_seq'),
	$node->safe_psql('shop', 'SELECT last_value FROM orders_id_seq'),
	'the copy\'s sequence is the source\'s, five calls past the last row');
is(sq("SELECT data_as_of >= '$changed_at'::timestamptz FROM pgsandbox.sandboxes WHERE name = '$b_name'"),
	't', 'its data_as_of is no earlier than the changes');

$node->safe_psql('shop', q{TRUNCATE orders; INSERT INTO orders (note, amount) VALUES ('after truncate', 1)});
$changed_at = $node->safe_psql('shop', 'SELECT now()');
caught_up('shop', $changed_at, 'a TRUNCATE');
my ($c_name, $c_conn) = clone_of('shop');
is(in_sandbox($c_conn, $digest), $node->safe_psql('shop', $digest), 'a copy after a TRUNCATE holds one row');

# ---------------------------------------------------------------------
# two copies share one pause; the apply resumes after them
# ---------------------------------------------------------------------
my $su = superuser_name();
my $lock_held = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted};
my $lock_waited = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted};
my $holder = start_psql($node, "dbname=postgres user=$su", 'SELECT pg_advisory_lock(4242)',
	'SELECT pg_sleep(170)');
is(poll_value($node, $lock_held, '1'), '1', 'the test holds the advisory lock');
my @bg = map {
	start_psql($node, "dbname=postgres user=$su",
		"SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
} 1 .. 2;
is(poll_value($node, $lock_waited, '2', 60), '2', 'both copies wait, the apply paused');
is(sq("SELECT s.subenabled FROM pg_subscription s JOIN pgsandbox.sandbox x"
		  . " ON x.db_oid = s.subdbid AND x.name = s.subname WHERE x.id = $snap"),
	'f', 'the subscription is disabled while they copy');
$node->safe_psql('shop', q{INSERT INTO orders (note, amount) VALUES ('during the pause', 2)});
sq(q{SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted});
finish_psql($holder);
foreach my $h (@bg)
{
	my ($r, $o, $e) = finish_psql($h);
	is($r, 0, 'a copy made during the shared pause is ready') or diag $e;
}
my @pair = split /\n/, sq("SELECT data_as_of FROM pgsandbox.sandboxes ORDER BY created_at DESC LIMIT 2");
is($pair[0], $pair[1], 'the two copies hold the same moment of the source');
is( poll_value(
		$node,
		"SELECT s.subenabled FROM pg_subscription s JOIN pgsandbox.sandbox x"
		  . " ON x.db_oid = s.subdbid AND x.name = s.subname WHERE x.id = $snap",
		't'),
	't',
	'the apply resumes after the last copy');
$changed_at = $node->safe_psql('shop', 'SELECT now()');
caught_up('shop', $changed_at, 'a row written during the pause');

# ---------------------------------------------------------------------
# a restart while the apply is paused for a copy
# ---------------------------------------------------------------------
$holder = start_psql($node, "dbname=postgres user=$su", 'SELECT pg_advisory_lock(4242)',
	'SELECT pg_sleep(170)');
is(poll_value($node, $lock_held, '1'), '1', 'the test holds the advisory lock again');
my $bgc = start_psql($node, "dbname=postgres user=$su",
	"SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
is(poll_value($node, $lock_waited, '1', 60), '1', 'a copy waits, the apply paused');
$node->stop('immediate');
finish_psql($holder);
finish_psql($bgc);
$node->start;
is( poll_value(
		$node,
		"SELECT s.subenabled FROM pg_subscription s JOIN pgsandbox.sandbox x"
		  . " ON x.db_oid = s.subdbid AND x.name = s.subname WHERE x.id = $snap",
		't', 60),
	't',
	'after a restart mid-pause the worker resumes the apply');
$node->safe_psql('shop', q{INSERT INTO orders (note, amount) VALUES ('after the restart', 3)});
$changed_at = $node->safe_psql('shop', 'SELECT now()');
caught_up('shop', $changed_at, 'a row written after the restart');
my ($d_name, $d_conn) = clone_of('shop');
is(in_sandbox($d_conn, $digest), $node->safe_psql('shop', $digest), 'and a copy holds it');

# ---------------------------------------------------------------------
# the source's schema changes: a rebuild, with copies meanwhile
# ---------------------------------------------------------------------
$node->safe_psql('shop', q{
ALTER TABLE orders ADD COLUMN extra int;
INSERT INTO orders (note, amount, extra) VALUES ('with extra', 4, 44);
});
my $old_snap = $snap;
is( poll_value(
		$node,
		"SELECT count(*) > 0 FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $old_snap AND e.action = 'live_rebuild'",
		't', 60),
	't',
	'a column added on the source: a live_rebuild event');
like(sq("SELECT detail FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $old_snap AND e.action = 'live_rebuild'"),
	qr/its apply failed \d+ times, .*a new live snapshot of source "shop" is built/,
	'which says why');
$snap = live_snapshot('shop', $old_snap);
ok($snap, 'a new live snapshot replaces it');
my ($e_name, $e_conn) = clone_of('shop');
is(in_sandbox($e_conn, q{SELECT extra FROM orders WHERE note = 'with extra'}), '44',
	'its copies have the new column and its rows');
is( poll_value(
		$node,
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'", '0', 60),
	'0',
	'the replaced snapshot\'s slot is dropped with it');

# a table added to the publication: a rebuild that follows it
$node->safe_psql('shop', q{ALTER PUBLICATION pub ADD TABLE audit});
$old_snap = $snap;
$snap = live_snapshot('shop', $old_snap);
ok($snap, 'a table added to the publication: a new live snapshot');
like(sq("SELECT detail FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $old_snap AND e.action = 'live_rebuild'"),
	qr/publication "pub" publishes other tables than the subscription follows/,
	'the old one\'s event says the publication changed');
$node->safe_psql('shop', q{INSERT INTO audit (what) VALUES ('followed')});
$changed_at = $node->safe_psql('shop', 'SELECT now()');
caught_up('shop', $changed_at, 'a row of the added table');
my ($f_name, $f_conn) = clone_of('shop');
is(in_sandbox($f_conn, q{SELECT string_agg(what, ',' ORDER BY id) FROM audit}), 'before,followed',
	'its copies follow the added table');

# ---------------------------------------------------------------------
# a published table locked on the source does not hold the worker: its
# look at the source (which reads the publication's tables, and waits for
# their locks from PostgreSQL 16 on) gives up after a second
# ---------------------------------------------------------------------
my $locker = start_psql($node, 'dbname=shop',
	q{BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(12); COMMIT;});
my $blocked = wait_until(
	sub {
		sq(q{SELECT count(*) FROM pg_stat_activity WHERE datname = 'shop' AND wait_event_type = 'Lock'})
		  ne '0';
	},
	8);
note($blocked ? 'a look at the source waited for the lock'
	: 'no look waited for the lock (PostgreSQL 15 reads the publication without it)');
my ($k_name, $k_conn) = clone_of('shop');
ok($k_name, 'with a published table locked on the source, the worker still serves clones');
is(in_sandbox($k_conn, 'SELECT count(*) > 0 FROM orders'), 't', 'and the copy holds the rows');
is((finish_psql($locker))[0], 0, 'the lock is let go');

# ---------------------------------------------------------------------
# a source whose server does not ask for the password: refused by
# set_live(), since the subscription (which no superuser owns) must use it
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	q{CREATE ROLE trusty LOGIN REPLICATION PASSWORD 'trustypw' IN ROLE pg_read_all_data});
open $fh, '>', $hba or die $!;
print $fh "local all trusty trust\n" . $hba_text;
close $fh;
$node->reload;
sq(q{SELECT pgsandbox.add_source('trusting', 'dbname=shop user=trusty password=trustypw', allow_data => true)});
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.set_live('trusting', 'pub')});
like($err, qr/did not use its password.*DETAIL:  A live snapshot's subscription logs in with the source's password/s,
	'set_live() refuses a source whose server does not ask for the password');
is(sq(q{SELECT live_publication IS NULL FROM pgsandbox.source WHERE name = 'trusting'}), 't',
	'and changes nothing');
sq(q{SELECT pgsandbox.remove_source('trusting')});
open $fh, '>', $hba or die $!;
print $fh $hba_text;
close $fh;
$node->reload;

# ---------------------------------------------------------------------
# rules refused on a live source
# ---------------------------------------------------------------------
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.mask('shop', 'public.orders.note', $$'x'$$)});
like($err, qr/source "shop" is live, and a mask rule cannot apply to its snapshot/,
	'mask() is refused on a live source');
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.subset('shop', 'public.orders', '10%')});
like($err, qr/source "shop" is live, and a subset rule cannot apply to its snapshot/,
	'subset() too');

# ---------------------------------------------------------------------
# code of an untrusted role that the apply would run: refused by set_live()
# and, when it appears later, by the rebuild
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{CREATE DATABASE wide});
$node->safe_psql('postgres', q{CREATE ROLE mallory LOGIN});
$node->safe_psql('wide', q{
CREATE TABLE t (id int PRIMARY KEY);
INSERT INTO t VALUES (1);
CREATE PUBLICATION allpub FOR ALL TABLES;
CREATE SCHEMA mal AUTHORIZATION mallory;
});
sq(q{SELECT pgsandbox.add_source('wide', 'dbname=wide user=repl password=replpw', allow_data => true)});
sq(q{SELECT pgsandbox.set_live('wide', 'allpub')});
my $wide_snap = live_snapshot('wide');
ok($wide_snap, 'a publication FOR ALL TABLES is followed');
# a table of a trusted owner, whose trigger, enabled for the apply, calls
# mallory's function
$node->safe_psql('wide', q{
SET ROLE mallory;
CREATE FUNCTION mal.spy() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
RESET ROLE;
CREATE TABLE later (id int PRIMARY KEY);
CREATE TRIGGER spy BEFORE INSERT ON later FOR EACH ROW EXECUTE FUNCTION mal.spy();
ALTER TABLE later ENABLE ALWAYS TRIGGER spy;
});
is( poll_value(
		$node,
		"SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'wide' AND kind = 'snapshot'"
		  . " AND status = 'failed' AND error LIKE '%trigger spy of table public.later%mallory%'",
		'1', 120),
	'1',
	'a table added since, whose trigger calls an untrusted role\'s function: the rebuild fails, naming them');
is( poll_value(
		$node,
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'pgsandbox\\_%'"
		  . " AND slot_name NOT IN (SELECT live_slot FROM pgsandbox.sandbox WHERE status = 'ready'"
		  . "                         AND live_slot IS NOT NULL)",
		'0', 60),
	'0', 'and leaves no slot behind');
sq(q{SELECT pgsandbox.add_source('wide2', 'dbname=wide user=repl password=replpw', allow_data => true)});
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.set_live('wide2', 'allpub')});
like($err, qr/trigger spy of table public\.later of source "wide2" calls function mal\.spy\(\), which belongs to role "mallory", which the source does not trust/,
	'set_live() refuses it too');
sq(q{SELECT pgsandbox.remove_source('wide2')});
sq(q{SELECT pgsandbox.remove_source('wide')});

# ---------------------------------------------------------------------
# a source on another server, stopped and started again
# ---------------------------------------------------------------------
my ($far, $far_conninfo) = logical_source('far', 'farpw', 'postgres');
$far->safe_psql('postgres', q{
CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL, amount int NOT NULL);
INSERT INTO orders (note, amount) SELECT 'f' || g, g FROM generate_series(1, 100) g;
CREATE PUBLICATION farpub FOR TABLE orders;
});
sq("SELECT pgsandbox.add_source('far', '$far_conninfo', allow_data => true)");
sq(q{SELECT pgsandbox.set_live('far', 'farpub')});
my $far_snap = live_snapshot('far');
ok($far_snap, 'a source on another server is live');
my $far_slot = sq("SELECT live_slot FROM pgsandbox.sandbox WHERE id = $far_snap");
$far->safe_psql('postgres', q{INSERT INTO orders (note, amount) VALUES ('before the stop', 5)});
$changed_at = $far->safe_psql('postgres', 'SELECT now()');
caught_up('far', $changed_at, 'the other server');
my $far_digest = $far->safe_psql('postgres', $digest);
$far->stop('immediate');
my ($g_name, $g_conn) = clone_of('far');
is(in_sandbox($g_conn, $digest), $far_digest, 'with the source stopped, a copy holds what was applied');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$g_name' AND action = 'ready'"),
	qr/the source could not be reached .*: the copy holds what the apply had reached.*the source could not be reached .*: its sequences hold the snapshot's values/,
	'and says so, of its rows and of its sequences');
$far->start;
$far->safe_psql('postgres', q{INSERT INTO orders (note, amount) VALUES ('after the start', 6)});
$changed_at = $far->safe_psql('postgres', 'SELECT now()');
caught_up('far', $changed_at, 'the source back');
my ($h_name, $h_conn) = clone_of('far');
is(in_sandbox($h_conn, $digest), $far->safe_psql('postgres', $digest), 'its changes arrive again');

# ---------------------------------------------------------------------
# a live build killed once its slot is made leaves no slot behind
# ---------------------------------------------------------------------
my $bindir = $node->config_data('--bindir');
my $wrap = PostgreSQL::Test::Utils::tempdir();
chmod 0755, $wrap;
my $gate = PostgreSQL::Test::Utils::tempdir();
chmod 0777, $gate;
open $fh, '>', "$wrap/pg_restore" or die $!;
print $fh qq{#!/bin/sh
# the restore of a live build waits at the gate, then fails
touch '$gate/waiting'
while [ ! -e '$gate/open' ]; do sleep 0.1; done
exit 1
};
close $fh;
chmod 0755, "$wrap/pg_restore";
symlink("$bindir/pg_dump", "$wrap/pg_dump") or die $!;
set_bin_dir($node, $wrap);
$node->safe_psql('postgres', 'CREATE DATABASE blip');
$node->safe_psql('blip', q{CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1);
                           CREATE PUBLICATION blippub FOR TABLE t});
sq(q{SELECT pgsandbox.add_source('blip', 'dbname=blip user=repl password=replpw', allow_data => true)});
sq(q{SELECT pgsandbox.set_live('blip', 'blippub')});
ok(wait_until(sub { -e "$gate/waiting" }, 60), 'a live build of blip is restoring');
is( poll_value(
		$node,
		"SELECT count(*) FROM pg_replication_slots s JOIN pgsandbox.sandbox b ON b.live_slot = s.slot_name"
		  . " WHERE b.source = 'blip' AND b.status = 'cloning'",
		'1', 60),
	'1', 'its slot is made');
my $dead_slot = sq(q{SELECT live_slot FROM pgsandbox.sandbox WHERE source = 'blip' AND status = 'cloning'});
my ($victim) = clone_worker_pids($node);
kill 'KILL', $victim;
ok(wait_until(sub { try_psql($node, 'postgres', 'SELECT 1') eq '1' }, 60),
	'the server restarts after the clone worker is killed');
set_bin_dir($node, '');
open $fh, '>', "$gate/open" or die $!;
close $fh;
is(poll_value($node, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$dead_slot'", '0', 60),
	'0', 'the worker drops the slot of the build that died');
is(poll_value($node, "SELECT count(*) FROM pgsandbox.sandbox WHERE live_slot = '$dead_slot'", '0', 60),
	'0', 'and forgets it');
ok(live_snapshot('blip'), 'a later build makes the live snapshot');
sq(q{SELECT pgsandbox.remove_source('blip')});

# ---------------------------------------------------------------------
# unset_live() and remove_source() leave nothing behind
# ---------------------------------------------------------------------
# the slot of the live snapshot that serves now (a rebuild makes another)
$far_slot = sq("SELECT live_slot FROM pgsandbox.sandbox WHERE id = " . live_snapshot('far'));
$far->stop('immediate');
sq(q{SELECT pgsandbox.unset_live('far')});
is( poll_value(
		$node,
		"SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'far' AND kind = 'snapshot'"
		  . " AND status IN ('cloning', 'ready', 'dropping')",
		'0', 60),
	'0',
	'unset_live() with the source away: the live snapshot is dropped all the same');
is(sq(q{SELECT count(*) FROM pg_database d JOIN pgsandbox.sandbox s ON s.name = d.datname
         WHERE s.source = 'far' AND s.kind = 'snapshot'}),
	'0', 'its database is gone');
is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE live_slot = '$far_slot'"), '1',
	'and the catalog keeps the name of its slot');
$far->start;
is( poll_value(
		$node, "SELECT count(*) FROM pgsandbox.sandbox WHERE live_slot = '$far_slot'", '0', 60),
	'0', 'the source back, the worker drops the slot');
is($far->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$far_slot'"),
	'0', 'and it is gone from the source');
sq(q{SELECT pgsandbox.remove_source('shop')});
is( poll_value(
		$node,
		"SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'shop' AND kind = 'snapshot'"
		  . " AND status IN ('cloning', 'ready', 'dropping')",
		'0', 60),
	'0',
	'remove_source(): the live snapshot is dropped');
is(sq("SELECT count(*) FROM pg_subscription"), '0', 'no subscription is left here');
is(poll_value($node, "SELECT count(*) FROM pg_replication_slots", '0', 30), '0', 'and no slot on the source');
is(sq("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'logical replication worker'"),
	'0', 'no apply runs');

# the passwords of the sources appear in the statements that gave them, and
# nowhere else: not in a subscription's statement, error or warning
my @leaks = grep { /replpw|farpw/ && !/statement: SELECT pgsandbox\.add_source|CREATE ROLE repl / }
  split /\n/, slurp_file($node->logfile);
is(scalar(@leaks), 0, 'no password of a source in the server log')
  or diag(join("\n", @leaks[0 .. ($#leaks < 4 ? $#leaks : 4)]));

$far->stop;
$node->stop;
done_testing();
