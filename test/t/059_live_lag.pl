
# 059_live_lag.pl: a live snapshot's lag figures come from what is known
# (worker/live.c), never from a position that is missing.
#
# A source on a server of its own, live on the host:
# - while a copy holds the apply paused, rows written on the source: the
#   snapshots view says the apply is "paused", live_lag_bytes counts at
#   least those rows' WAL and never more than the source wrote since before
#   set_live() (0.13 counted the source's whole WAL position from 0/0),
#   live_as_of stays before the rows, and the metrics view reads the same
#   figure; once the copy is done, the apply catches up;
# - copies close together: on 15, one that finds the apply not started
#   again yet (the launcher waits wal_retrieve_retry_interval between two
#   starts) does not wait for it, holds what the copy before it held, and
#   says so in its ready event and its data_as_of (16 and later start the
#   apply again at once after a pause: the copy holds the source); once the
#   apply runs, copies hold the source again;
# - the source stopped: a live_lag event by the clock while it is away
#   (0.13 wrote none until the source answered), naming it unreachable, the
#   state "source unreachable", the lag held, doctor() saying so; the
#   source started again: a live_caught_up event.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('lag',
	    "wal_level = logical\n"
	  . "max_replication_slots = 10\n"
	  . "max_wal_senders = 10\n"
	  . "pgsandbox.live_max_lag = 0\n"
	  . "pgsandbox.live_look_interval = '1s'\n"
	  . "pgsandbox.live_catchup_timeout = '30s'\n"
	  . "pgsandbox.test_copy_pause = 4343\n");
my $su = superuser_name();
my $major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);

sub sq { return $node->safe_psql('postgres', $_[0]); }

my ($far, $far_conninfo) = logical_source('far', 'farpw', 'postgres');
$far->safe_psql('postgres', q{
CREATE TABLE orders (id bigserial PRIMARY KEY, note text NOT NULL);
INSERT INTO orders (note) SELECT 'o' || g FROM generate_series(1, 100) g;
CREATE PUBLICATION farpub FOR TABLE orders;
});
# the source's WAL before the live snapshot: nothing after it can be more
# than what the source wrote since
my $start_lsn = $far->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
sq("SELECT pgsandbox.add_source('far', '$far_conninfo', allow_data => true)");
sq(q{SELECT pgsandbox.set_live('far', 'farpub')});
my $snap = live_snapshot_of($node, 'far');
ok($snap, 'the source is live');
my $snap_name = sq("SELECT name FROM pgsandbox.sandbox WHERE id = $snap");

# what the source wrote since before set_live(), as the bound of any lag
sub bound
{
	return $far->safe_psql('postgres', "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$start_lsn')");
}

my $state_sql = q{SELECT live_state FROM pgsandbox.snapshots WHERE source = 'far' AND live};
is(poll_value($node, $state_sql, 'applying', 60), 'applying', 'the snapshots view says the apply is applying');

# ---------------------------------------------------------------------
# a copy holds the apply paused while the source writes
# ---------------------------------------------------------------------
my $lock_held = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343 AND granted};
my $lock_waited = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343 AND NOT granted};
my $holder = start_psql($node, "dbname=postgres user=$su", 'SELECT pg_advisory_lock(4343)',
	'SELECT pg_sleep(170)');
is(poll_value($node, $lock_held, '1'), '1', 'the test holds the advisory lock');
my $copy = start_psql($node, "dbname=postgres user=$su",
	"SELECT name FROM pgsandbox.clone('far', schema_only => false)");
is(poll_value($node, $lock_waited, '1', 60), '1', 'a copy waits, the apply paused');

my $lsn0 = $far->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
# the time once the rows' WAL is written, before they commit: no look the
# apply has passed can be later
my $rows_written_at = $far->safe_psql('postgres',
	q{BEGIN; INSERT INTO orders (note) SELECT repeat('p', 200) FROM generate_series(1, 3000);
	  SELECT clock_timestamp(); COMMIT;});
my $written = $far->safe_psql('postgres', "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')");
cmp_ok($written, '>', 500000, "the source wrote $written bytes of WAL the paused apply has not");

# the worker's next look finds the apply paused and measures the rows' WAL
is( poll_value(
		$node,
		"SELECT live_state || ' ' || (live_lag_bytes >= $written) FROM pgsandbox.snapshots"
		  . " WHERE source = 'far' AND live",
		'paused true', 60),
	'paused true',
	'the snapshots view says the apply is paused, and counts the WAL written meanwhile');
my ($lag, $as_of_before, $metric_same) = split /\|/,
  sq("SELECT s.live_lag_bytes, s.live_as_of < '$rows_written_at'::timestamptz,"
	  . "       m.value::bigint = s.live_lag_bytes"
	  . "  FROM pgsandbox.snapshots s, pgsandbox.metrics m"
	  . " WHERE s.source = 'far' AND s.live"
	  . "   AND m.name = 'pgsandbox_live_lag_bytes' AND m.labels ->> 'source' = 'far'");
my $bound = bound();
cmp_ok($lag, '<=', $bound, "the lag ($lag bytes) is no more than the source wrote since ($bound)");
is($as_of_before, 't', 'live_as_of stays before the rows the apply has not');
is($metric_same, 't', 'the metrics view reads the same figure');
like(sq("SELECT live_state_since <= now() FROM pgsandbox.snapshots WHERE source = 'far' AND live"),
	qr/^t$/, 'and says since when');

sq(q{SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343 AND granted});
finish_psql($holder);
my ($r, $o, $e) = finish_psql($copy);
is($r, 0, 'the copy is ready') or diag $e;
my $after_rows = $far->safe_psql('postgres', 'SELECT now()');
live_caught_up($node, 'far', $after_rows, 'the apply resumed');
is( poll_value(
		$node,
		"SELECT live_state || ' ' || (live_lag_bytes < $written) FROM pgsandbox.snapshots"
		  . " WHERE source = 'far' AND live",
		'applying true', 60),
	'applying true',
	'and the lag comes down');

# ---------------------------------------------------------------------
# copies close together: PostgreSQL starts an apply again at most once per
# wal_retrieve_retry_interval, and a copy does not wait for it
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf', "wal_retrieve_retry_interval = '20s'\n");
$node->reload;
my $running_sql = "SELECT count(*) FROM pg_stat_subscription a JOIN pgsandbox.sandbox x"
  . " ON x.name = a.subname WHERE x.id = $snap AND a.relid IS NULL AND a.pid IS NOT NULL";
my $digest = q{SELECT count(*) || ' ' || md5(string_agg(id || ':' || note, ',' ORDER BY id)) FROM orders};

sub clone_far
{
	return split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('far', schema_only => false)");
}

sub as_of_of
{
	return sq("SELECT data_as_of FROM pgsandbox.sandboxes WHERE name = '$_[0]'");
}

# a copy, and the apply started again after it: so the next copy's resume
# comes within the interval of that start, and PostgreSQL delays it
clone_far();
is(poll_value($node, $running_sql, '1', 60), '1', 'the apply runs again after a copy');
my ($k_name) = clone_far();
my $k_as_of = as_of_of($k_name);
my $k_digest = $far->safe_psql('postgres', $digest);
my $late_row_at = $far->safe_psql('postgres',
	q{BEGIN; INSERT INTO orders (note) VALUES ('after the burst'); SELECT clock_timestamp(); COMMIT;});
my ($b_name, $b_conn) = clone_far();
my $b_note = sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$b_name' AND action = 'ready'");
my $not_running = qr/the apply was not running \(PostgreSQL starts it again at most once per wal_retrieve_retry_interval\): the copy holds what it had applied, up to /;
# PostgreSQL 16 and later start an apply that a DISABLE ended again at
# once: there, the copy finds it running, or starting within the moment
if ($major < 16 || $b_note =~ $not_running)
{
	like($b_note, $not_running,
		'a copy right after another does not wait for the apply PostgreSQL has not started again, and says so');
	is(sandbox_sql($node, $b_conn, $digest), $k_digest, 'it holds what the copy before it held');
	is( sq("SELECT data_as_of >= '$k_as_of'::timestamptz AND data_as_of < '$late_row_at'::timestamptz"
			  . " FROM pgsandbox.sandboxes WHERE name = '$b_name'"),
		't', 'and its data_as_of says so: from the copy before it, before the row it lacks');
}
else
{
	is(sandbox_sql($node, $b_conn, $digest), $far->safe_psql('postgres', $digest),
		"on PostgreSQL $major the apply runs again at once: a copy right after another holds the row");
	is( sq("SELECT data_as_of >= '$late_row_at'::timestamptz FROM pgsandbox.sandboxes WHERE name = '$b_name'"),
		't', 'and its data_as_of says so');
}
live_caught_up($node, 'far', $late_row_at, 'the apply started again');
my (undef, $c_conn) = clone_far();
is(sandbox_sql($node, $c_conn, $digest), $far->safe_psql('postgres', $digest),
	'a copy once it runs holds the row');
$node->append_conf('postgresql.conf', "wal_retrieve_retry_interval = '5s'\n");
$node->reload;

# ---------------------------------------------------------------------
# the source away: an event by the clock, and another once it is back
# ---------------------------------------------------------------------
$far->stop('immediate');
$node->append_conf('postgresql.conf', "pgsandbox.live_max_lag = 4\n");
$node->reload;
is( poll_value(
		$node,
		"SELECT count(*) > 0 FROM pgsandbox.events WHERE sandbox = '$snap_name' AND action = 'live_lag'",
		't', 90),
	't',
	'with the source stopped, a live_lag event comes once the snapshot is behind by the clock');
like(
	sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$snap_name' AND action = 'live_lag' ORDER BY at LIMIT 1"),
	qr/^the live snapshot of source "far" holds its changes up to .* only, more than pgsandbox.live_max_lag behind; the source cannot be reached \(/,
	'it says the source cannot be reached');
my ($outage_state, $outage_lag) = split /\|/,
  sq("SELECT live_state, live_lag_bytes FROM pgsandbox.snapshots WHERE source = 'far' AND live");
is($outage_state, 'source unreachable', 'the snapshots view says the source is unreachable');
like(
	sq(q{SELECT ok || ' ' || detail FROM pgsandbox.doctor() AS d(c, ok, detail)
		  WHERE c = 'the live snapshot of source "far" keeps up'}),
	qr/^false It holds every change the source made up to .* Its apply: source unreachable since /,
	'doctor() says it does not keep up, and why');

$far->start;
$bound = bound();
cmp_ok($outage_lag, '<=', $bound,
	"the lag it held meanwhile ($outage_lag bytes) is no more than the source wrote ($bound)");
is( poll_value(
		$node,
		"SELECT count(*) > 0 FROM pgsandbox.events WHERE sandbox = '$snap_name' AND action = 'live_caught_up'",
		't', 90),
	't',
	'with the source back, a live_caught_up event');
like(
	sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$snap_name' AND action = 'live_caught_up' ORDER BY at LIMIT 1"),
	qr/^the live snapshot of source "far" is back within pgsandbox.live_max_lag: it holds every change up to /,
	'it says up to when the snapshot holds the source');
# a bound of 4 s is below what looks 5 s apart can tell: after the catch-up,
# a look that finds a little WAL not yet confirmed may count as behind again
$node->append_conf('postgresql.conf', "pgsandbox.live_max_lag = 0\n");
$node->reload;
is( sq("SELECT count(*) FROM pgsandbox.event WHERE sandbox = '$snap_name' AND action = 'live_lag'"
		  . " AND id < (SELECT min(id) FROM pgsandbox.event WHERE sandbox = '$snap_name' AND action = 'live_caught_up')"),
	'1', 'one live_lag event for the outage');

$node->stop;
$far->stop;
done_testing();
