
# 053_live_exclude_data.pl: a live source's exclude_data rules leave the
# rows of the tables they match out of its live snapshot, from the build's
# dump on and in every change applied after it (clone/live_copy.c).
#
# A source on a server of its own, whose publication publishes a followed
# table, a table an exclude_data rule names and a partitioned table a
# pattern matches (its partitions published), beside an unpublished
# excluded table.  Each excluded table holds a marker string:
# - set_live() takes the source with its exclude_data rules (it refused
#   them before); the build's event says how many published tables'
#   changes are not applied, and its subscription keeps no state for them;
# - inserts, updates, deletes and a TRUNCATE of the excluded tables reach no
#   copy, while the followed table's reach every new copy; the apply fails
#   on none of them;
# - a copy that waits for the apply (held on a lock) shows as 'catching up'
#   in the progress view, and holds the change once the apply goes on;
# - no file of the live snapshot's database, nor of the host's WAL, holds a
#   marker (while they do hold the followed table's marker: the scan finds
#   what is there);
# - a table the pattern matches, added to the publication: a rebuild, and
#   the new live snapshot leaves it out too;
# - doctor() does not count the tables exclude_data leaves out among those
#   the publication leaves out; it finds the live snapshot keeping up, and
#   falling behind once
#   the source is stopped for longer than pgsandbox.live_max_lag;
# - a partition left out whose changes the publication sends through its
#   partitioned table (publish_via_partition_root): the build is refused
#   and leaves no database and no slot;
# - exclude_data rules cannot change while the source is live (55000), and
#   can once unset_live() has run, which leaves no subscription and no slot.

use strict;
use warnings FATAL => 'all';

use File::Find;
use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('live_excl',
	    "pgsandbox.max_sandboxes_per_owner = 50\n"
	  . "pgsandbox.live_look_interval = '1s'\n"
	  . "pgsandbox.copy_strategy = wal_log\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub in_sandbox { return sandbox_sql($node, @_); }

sub clone_of
{
	return split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)");
}

# how many files under $dir hold $needle
sub files_under_holding
{
	my ($dir, $needle) = @_;
	my $n = 0;
	find(
		sub {
			return unless -f $_;
			$n++ if index(slurp_file($_), $needle) >= 0;
		},
		$dir);
	return $n;
}

my $kept = 'zq7kept-3301';         # in the followed table
my $hidden = 'zq7hidden-4402';     # in every excluded table

my ($src, $conninfo) = logical_source('src', 'srcpw', 'postgres');
$src->safe_psql('postgres', qq{
CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL);
INSERT INTO orders (note) SELECT 'o' || g FROM generate_series(1, 100) g;
CREATE TABLE events (id bigserial PRIMARY KEY, payload text NOT NULL);
INSERT INTO events (payload) SELECT '$hidden before ' || g FROM generate_series(1, 50) g;
CREATE INDEX events_payload ON events (payload);
CREATE TABLE log_lines (id bigserial PRIMARY KEY, line text);
INSERT INTO log_lines (line) VALUES ('$hidden unpublished');
CREATE TABLE parted (id int NOT NULL, v text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (1000);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (1000) TO (2000);
INSERT INTO parted SELECT g, '$hidden parted ' || g FROM generate_series(1, 1999, 7) g;
CREATE TABLE "we""ird" (id int PRIMARY KEY, v text);
INSERT INTO "we""ird" VALUES (1, '$hidden quoted');
CREATE PUBLICATION pub FOR TABLE orders, events, parted, "we""ird";
});
my $src_counts = q{SELECT (SELECT count(*) FROM events) || ' ' || (SELECT count(*) FROM log_lines)
                    || ' ' || (SELECT count(*) FROM parted) || ' ' || (SELECT count(*) FROM "we""ird")};
my $orders = q{SELECT count(*) || ' ' || md5(string_agg(id || ':' || note, ',' ORDER BY id)) FROM orders};
my $empty = q{SELECT (SELECT count(*) FROM events) || ' ' || (SELECT count(*) FROM log_lines)
               || ' ' || (SELECT count(*) FROM parted) || ' ' || (SELECT count(*) FROM "we""ird")};

sq("SELECT pgsandbox.add_source('src', '$conninfo', allow_data => true)");
sq(q{SELECT pgsandbox.exclude_data('src', 'public.events')});
sq(q{SELECT pgsandbox.exclude_data('src', 'public.log_*')});
sq(q{SELECT pgsandbox.exclude_data('src', 'public.parted')});
sq(q{SELECT pgsandbox.exclude_data('src', 'public."we""ird"')});

# ---------------------------------------------------------------------
# the build
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.set_live('src', 'pub')});
my $snap = live_snapshot_of($node, 'src');
ok($snap, 'set_live() takes a source with exclude_data rules, and builds its live snapshot');
like(sq("SELECT detail FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $snap AND e.action = 'snapshot'"),
	qr/the changes of 4 published tables whose rows exclude_data leaves out are not applied/,
	'its event says the changes of the excluded published tables (events, two partitions, "we""ird") are not applied');
my $snap_db = sq("SELECT db_oid FROM pgsandbox.sandbox WHERE id = $snap");
# (pg_subscription_rel is each database's own)
is( $node->safe_psql(sq("SELECT name FROM pgsandbox.sandbox WHERE id = $snap"),
		"SELECT string_agg(srrelid::regclass::text, ',' ORDER BY 1) FROM pg_subscription_rel"),
	'orders', 'its subscription keeps a state for the followed table alone');

my ($a_name, $a_conn) = clone_of();
is(in_sandbox($a_conn, $orders), $src->safe_psql('postgres', $orders),
	'a copy holds the followed table as the source does');
is(in_sandbox($a_conn, $empty), '0 0 0 0', 'and no row of the excluded tables');
is(in_sandbox($a_conn, q{SELECT count(*) FROM pg_indexes WHERE indexname = 'events_payload'}),
	'1', 'whose definitions it keeps');
isnt($src->safe_psql('postgres', $src_counts), '0 0 0 0', 'while the source holds rows in them');

# ---------------------------------------------------------------------
# changes
# ---------------------------------------------------------------------
$src->safe_psql('postgres', qq{
INSERT INTO events (payload) SELECT '$hidden after ' || g FROM generate_series(1, 20) g;
UPDATE events SET payload = payload || ' $hidden updated' WHERE id % 3 = 0;
DELETE FROM events WHERE id % 5 = 0;
INSERT INTO parted VALUES (1500, '$hidden parted later'), (2, '$hidden parted later');
UPDATE parted SET v = '$hidden moved' WHERE id = 8;
INSERT INTO "we""ird" VALUES (2, '$hidden quoted later');
INSERT INTO orders (note) VALUES ('$kept');
UPDATE orders SET note = note || ' changed' WHERE id <= 10;
DELETE FROM orders WHERE id BETWEEN 90 AND 95;
});
my $at = $src->safe_psql('postgres', 'SELECT now()');
live_caught_up($node, 'src', $at, 'changes to followed and excluded tables');
my ($b_name, $b_conn) = clone_of();
is(in_sandbox($b_conn, $orders), $src->safe_psql('postgres', $orders),
	'a new copy holds the followed table\'s changes');
is(in_sandbox($b_conn, $empty), '0 0 0 0', 'and no row of the excluded tables');
isnt(in_sandbox($a_conn, $orders), in_sandbox($b_conn, $orders), 'the earlier copy does not change');

$src->safe_psql('postgres', q{TRUNCATE events; INSERT INTO orders (note) VALUES ('after the truncate')});
$at = $src->safe_psql('postgres', 'SELECT now()');
live_caught_up($node, 'src', $at, 'a TRUNCATE of an excluded table');
my ($c_name, $c_conn) = clone_of();
is(in_sandbox($c_conn, $orders), $src->safe_psql('postgres', $orders), 'changes after it arrive');
is(in_sandbox($c_conn, q{SELECT last_value FROM events_id_seq}),
	$src->safe_psql('postgres', q{SELECT last_value FROM events_id_seq}),
	'an excluded table\'s sequence is the source\'s, as every sequence of a copy');
is(sq("SELECT COALESCE(sum(st.apply_error_count), 0) FROM pg_stat_subscription_stats st"
		  . " JOIN pg_subscription s ON s.oid = st.subid WHERE s.subdbid = $snap_db"),
	'0', 'the apply failed on no change');
is(sq("SELECT live_errors FROM pgsandbox.sandbox WHERE id = $snap"), '0', 'the live snapshot is sound');
is(sq(q{SELECT count(*) FROM pgsandbox.events WHERE action = 'live_rebuild'}), '0', 'and not rebuilt');

# ---------------------------------------------------------------------
# progress: a copy waiting for the apply is 'catching up'; the apply is
# held on a lock in the live snapshot's database until the view shows it
# ---------------------------------------------------------------------
set_setting($node, 'live_catchup_timeout', '2min');
my $snap_name = sq("SELECT name FROM pgsandbox.sandbox WHERE id = $snap");
my $holder = start_psql($node, "dbname=$snap_name application_name=holder",
	'BEGIN', 'LOCK TABLE public.orders IN ACCESS EXCLUSIVE MODE', 'SELECT pg_sleep(300)');
ok( wait_until(
		sub {
			sq(q{SELECT count(*) FROM pg_stat_activity
			      WHERE application_name = 'holder' AND query LIKE '%pg_sleep%'}) eq '1';
		}),
	'a session holds the followed table\'s lock in the live snapshot');
$src->safe_psql('postgres', q{INSERT INTO orders (note) VALUES ('while the apply waits')});
my $cloning = start_psql($node, 'dbname=postgres',
	q{SELECT name || '|' || conninfo FROM pgsandbox.clone('src', schema_only => false)});
is( poll_value(
		$node,
		q{SELECT phase || ' ' || (total > 0) FROM pgsandbox.progress WHERE source = 'src'},
		'catching up true', 60),
	'catching up true',
	'the progress view shows the copy catching up, with the WAL the apply has left');
sq(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'});
finish_psql($holder);
my ($ret_c, $out_c, $err_c) = finish_psql($cloning);
is($ret_c, 0, 'the copy ends once the apply goes on') or diag($err_c);
my ($e_name, $e_conn) = split /\|/, $out_c;
is(in_sandbox($e_conn, $orders), $src->safe_psql('postgres', $orders),
	'and holds the change the apply was held on');
set_setting($node, 'live_catchup_timeout', '5s');

# ---------------------------------------------------------------------
# what the host stores
# ---------------------------------------------------------------------
sq('CHECKPOINT');
my $data = $node->data_dir;
is(files_under_holding("$data/base/$snap_db", $hidden), 0,
	'no file of the live snapshot\'s database holds a row of an excluded table');
is(files_under_holding("$data/pg_wal", $hidden), 0, 'nor does the host\'s WAL');
ok(files_under_holding("$data/pg_wal", $kept) > 0, 'which holds the followed table\'s new row');
is(files_under_holding("$data/base", $hidden), 0, 'nor any database of the host');
ok(files_under_holding("$data/base/$snap_db", $kept) > 0,
	'while its files hold the followed table\'s new row');
$src->safe_psql('postgres', 'CHECKPOINT');
ok(files_under_holding($src->data_dir . '/base', $hidden) > 0, 'and the source\'s hold the excluded rows');

# ---------------------------------------------------------------------
# a table the pattern matches, published later: a rebuild leaves it out too
# ---------------------------------------------------------------------
$src->safe_psql('postgres', qq{
CREATE TABLE log_more (id int PRIMARY KEY, line text);
INSERT INTO log_more VALUES (1, '$hidden more');
ALTER PUBLICATION pub ADD TABLE log_more;
});
my $snap2 = live_snapshot_of($node, 'src', $snap);
ok($snap2, 'a table added to the publication: a new live snapshot');
like(sq("SELECT detail FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
		  . " WHERE s.id = $snap2 AND e.action = 'snapshot'"),
	qr/the changes of 5 published tables whose rows exclude_data leaves out are not applied/,
	'which leaves out the new table\'s changes too');
$src->safe_psql('postgres', qq{INSERT INTO log_more VALUES (2, '$hidden more later');
INSERT INTO orders (note) VALUES ('after the rebuild')});
$at = $src->safe_psql('postgres', 'SELECT now()');
live_caught_up($node, 'src', $at, 'the new live snapshot');
my ($d_name, $d_conn) = clone_of();
is(in_sandbox($d_conn, $orders), $src->safe_psql('postgres', $orders), 'its copies hold the followed table');
is(in_sandbox($d_conn, q{SELECT count(*) FROM log_more}), '0', 'and no row of the new table');
my $snap2_db = sq("SELECT db_oid FROM pgsandbox.sandbox WHERE id = $snap2");
sq('CHECKPOINT');
is(files_under_holding("$data/base/$snap2_db", $hidden), 0, 'nor does any file of its database');

# ---------------------------------------------------------------------
# doctor(): the live snapshot keeps up, until the source is away for longer
# than pgsandbox.live_max_lag
# ---------------------------------------------------------------------
my $keeps_up = q{SELECT ok || ' ' || detail FROM pgsandbox.doctor()
                  WHERE "check" = 'the live snapshot of source "src" keeps up'};
like(sq($keeps_up), qr/^true It holds every change the source made up to /,
	'doctor() finds the live snapshot keeping up');
my $publishes = q{SELECT ok || ' ' || detail FROM pgsandbox.doctor()
                   WHERE "check" = 'live source "src" publishes every table'};
is(sq($publishes), 'true Publication "pub" publishes every table of the source.',
	'doctor() does not count a table exclude_data leaves out among those the publication leaves out');
$src->safe_psql('postgres', q{CREATE TABLE unpublished (id int)});
is(sq($publishes),
	'false Publication "pub" leaves out public.unpublished: their rows stay as the live snapshot\'s build found them.',
	'while it names one that no rule leaves out');
$src->safe_psql('postgres', q{DROP TABLE unpublished});
set_setting($node, 'live_max_lag', '1s');
$src->stop;
ok(wait_until(sub { sq($keeps_up) =~ /^false / }, 60),
	'with the source stopped past live_max_lag, doctor() says the live snapshot falls behind');
like(sq($keeps_up), qr/\([0-9.]+ s ago, by this server's clock\); its WAL not applied yet: [0-9]+ (bytes|kB|MB); pgsandbox.live_max_lag is 1 s\./,
	'saying how far');
$src->start;

# ---------------------------------------------------------------------
# rules while live, and unset_live()
# ---------------------------------------------------------------------
# a partition left out whose changes the publication sends through its
# partitioned table: the apply would route them into it, so the build is
# refused, before its dump, and leaves no slot
$src->safe_psql('postgres', q{
CREATE TABLE rooted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE rooted_1 PARTITION OF rooted FOR VALUES FROM (0) TO (100);
CREATE TABLE rooted_2 PARTITION OF rooted FOR VALUES FROM (100) TO (200);
CREATE PUBLICATION viaroot FOR TABLE rooted WITH (publish_via_partition_root = true);
});
sq("SELECT pgsandbox.add_source('rooted', '$conninfo', allow_data => true)");
sq(q{SELECT pgsandbox.exclude_data('rooted', 'public.rooted_1')});
sq(q{SELECT pgsandbox.set_live('rooted', 'viaroot')});
is( poll_value(
		$node,
		q{SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'rooted' AND kind = 'snapshot'
		     AND status = 'failed' AND error LIKE '%publication "viaroot" of source "rooted" sends the changes of table "public"."rooted_1" through "public"."rooted", whose rows exclude_data does not leave out%'},
		'1', 60),
	'1', 'a partition left out whose changes come through its partitioned table: the build is refused, saying why');
is( sq(q{SELECT count(*) FROM pgsandbox.sandbox s JOIN pg_database d ON d.oid = s.db_oid
          WHERE s.source = 'rooted'}),
	'0', 'leaving no database');
my $kept_slot = sq("SELECT live_slot FROM pgsandbox.sandbox WHERE id = $snap2");
ok( wait_until(
		sub {
			$src->safe_psql('postgres',
				"SELECT count(*) FROM pg_replication_slots WHERE slot_name <> '$kept_slot'") eq '0';
		},
		60),
	'and no slot on the source');
sq(q{SELECT pgsandbox.remove_source('rooted')});

my $rules = q{SELECT string_agg(target, ',' ORDER BY target) FROM pgsandbox.source_rules WHERE source = 'src'};
my $rules_before = sq($rules);
foreach my $call (q{pgsandbox.exclude_data('src', 'public.orders')},
	q{pgsandbox.include_data('src', 'public.events')})
{
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT $call", extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/55000: cannot change the exclude_data rules of live source "src"/,
		"$call refused while the source is live (55000)");
}
is(sq($rules), $rules_before, 'the rules are as they were');

my $slot = sq("SELECT live_slot FROM pgsandbox.sandbox WHERE id = $snap2");
sq(q{SELECT pgsandbox.unset_live('src')});
ok( wait_until(
		sub {
			sq(q{SELECT count(*) FROM pg_subscription}) eq '0'
			  && $src->safe_psql('postgres',
				"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'pgsandbox_%'") eq '0';
		},
		60),
	'unset_live() leaves no subscription here and no slot on the source');
sq(q{SELECT pgsandbox.include_data('src', 'public.events')});
is(sq(q{SELECT count(*) FROM pgsandbox.source_rules WHERE source = 'src'}), '3',
	'once the source is not live, its exclude_data rules can change');

foreach my $n ($a_name, $b_name, $c_name, $d_name, $e_name)
{
	sq("SELECT pgsandbox.drop('$n')");
}
sq(q{SELECT pgsandbox.remove_source('src')});
is(untracked_sandboxes($node), 0, 'no database or role is left that pgsandbox does not track');

$src->stop;
$node->stop;
done_testing();
