
# 057_full_disk.pl: a disk that fills during a clone fails the clone, not
# the server (clone/bulk_copy.c).
#
# The server's databases and WAL sit on a small filesystem of their own
# (test/pg/cow.sh, whose mount point PGSANDBOX_SMALL_DISK_DIR names), with
# wal_level = minimal; the source, pgbench's tables, sits in a tablespace
# on the machine's disk.  Its largest table is copied by the clone worker,
# which loads it in the transaction that truncates it, so its rows skip the
# WAL: a clone of it into the little room left meets the full disk in the
# table's file, fails with SQLSTATE 53100 naming the table, leaves only its
# failed row, and the server stays up, having never written a PANIC.  With
# the room back, the same clone holds the source's rows and writes a
# fraction of the table's size in WAL, loaded by the worker, by the stream
# alone (the worker's copy turned off), and masked.

use strict;
use warnings FATAL => 'all';

use File::Path ();
use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $disk = $ENV{PGSANDBOX_SMALL_DISK_DIR} // '';
if ($disk eq '' || !-d $disk || !-w $disk)
{
  SKIP: { skip 'no small filesystem: PGSANDBOX_SMALL_DISK_DIR is not set or not writable '
		  . '(test/run-tests.sh and test/pg/check.sh make one with test/pg/cow.sh, as root)', 1; }
	done_testing();
	exit 0;
}

# the server's own directory there, removed at the end
my $home = "$disk/full_disk_$$";
mkdir $home or die "could not make $home: $!";
my $node = sandbox_node(
	'full',
	"wal_level = minimal\nmax_wal_senders = 0\nmin_wal_size = 64MB\nmax_wal_size = 128MB\n"
	  . "checkpoint_timeout = 1h\npgsandbox.bulk_copy_min_size = 0\n",
	undef,
	sub {
		# the databases and the WAL on the small filesystem
		my ($n) = @_;
		for my $dir ('base', 'pg_wal')
		{
			system('mv', $n->data_dir . "/$dir", "$home/$dir") == 0 or die "could not move $dir";
			symlink("$home/$dir", $n->data_dir . "/$dir") or die "could not link $dir: $!";
		}
	});
sub sq { return $node->safe_psql('postgres', $_[0]); }

sub avail_bytes
{
	my $out = `df -B1 --output=avail '$disk'`;
	my ($avail) = $out =~ /(\d+)\s*$/;
	return $avail;
}

# the source, on the machine's disk
my $big = PostgreSQL::Test::Utils::tempdir();
sq("CREATE TABLESPACE big LOCATION '$big'");
sq('CREATE DATABASE src TABLESPACE big');
$node->command_ok([ 'pgbench', '-i', '-q', '-s', '8', 'src' ], 'pgbench makes the source');
my $table_bytes = $node->safe_psql('src', q{SELECT pg_relation_size('pgbench_accounts')});
my $source_rows = $node->safe_psql('src',
	q{SELECT count(*) || ':' || sum(abalance + bid) || ':' || md5(string_agg(filler, '' ORDER BY aid))
	    FROM pgbench_accounts});
sq(q{SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true)});

# WAL segments made ahead, so that the WAL has room however full the disk
for (1 .. 4)
{
	sq('CREATE TABLE wal_filler (x int); DROP TABLE wal_filler; SELECT pg_switch_wal(); CHECKPOINT');
}

# ---------------------------------------------------------------------
# the disk fills during the worker's copy
# ---------------------------------------------------------------------
my $room = 40 * 1024 * 1024;
cmp_ok($table_bytes, '>', 2 * $room, "the table ($table_bytes bytes) is larger than the room left");
my $ballast = "$home/ballast";
system('fallocate', '-l', avail_bytes() - $room, $ballast) == 0 or die 'could not fill the disk';
my $started = sq('SELECT pg_postmaster_start_time()');

my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT name FROM pgsandbox.clone('src', schema_only => false)");
isnt($ret, 0, 'a clone that meets the full disk fails');
like($err, qr/ERROR:\s+53100: could not write the rows of table "public"\."pgbench_accounts" into the sandbox/,
	'with SQLSTATE 53100, naming the table the worker was copying');
like($err, qr/No space left on device/, 'and saying why');

($ret, $out) = $node->psql('postgres', 'SELECT pg_postmaster_start_time()');
is($ret, 0, 'the server is still up');
is($out, $started, 'and it never restarted');
unlike(slurp_file($node->logfile), qr/PANIC/, 'no PANIC was logged');
is(sq(q{SELECT string_agg(status, ',') FROM pgsandbox.sandbox WHERE kind = 'sandbox'}), 'failed',
	'the clone left only its failed row');
like(sq(q{SELECT error FROM pgsandbox.sandbox WHERE kind = 'sandbox'}), qr/No space left on device/,
	'which says the disk was full');
is(untracked_sandboxes($node), '0', 'no database or role is left');
cmp_ok(avail_bytes(), '>', $room / 2, 'and the room it took is given back');

# ---------------------------------------------------------------------
# with the room back, the same clone, and the WAL each way of loading the
# table writes: the worker's copy, the stream alone, a masked copy
# ---------------------------------------------------------------------
unlink $ballast or die "could not remove the ballast: $!";

sub clone_measuring_wal
{
	my ($way, $event_re, $rows_sql, $expected) = @_;
	my $lsn = sq('SELECT pg_current_wal_lsn()');
	my ($name, $conninfo) = split /\|/,
	  sq(q{SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)});
	my $end = sq('SELECT pg_current_wal_lsn()');
	my $wal = sq("SELECT pg_wal_lsn_diff('$end', '$lsn')::bigint");
	like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'"),
		$event_re, "$way: the ready event says how the table was loaded");
	my ($sret, $sout, $serr) = sandbox_psql($node, $conninfo, $rows_sql);
	is($sret, 0, "$way: the sandbox role logs in with the returned credentials") or diag $serr;
	is($sout, $expected, "$way: the sandbox holds the source's rows");
	cmp_ok($wal, '<', $table_bytes / 4,
		"$way: the clone wrote $wal bytes of WAL for a table of $table_bytes: its rows skipped the WAL")
	  or diag(scalar(`pg_waldump --stats=record -p '$home/pg_wal' -s $lsn -e $end 2>&1`));
	sq("SELECT pgsandbox.drop('$name')");
	is(untracked_sandboxes($node), '0', "$way: nothing untracked once dropped");
	return;
}

my $rows_sql = q{SELECT count(*) || ':' || sum(abalance + bid) || ':' || md5(string_agg(filler, '' ORDER BY aid))
	FROM pgbench_accounts};
clone_measuring_wal('the worker\'s copy',
	qr/the rows of table "public"\."pgbench_accounts" \(800000\) copied by the worker/,
	$rows_sql, $source_rows);

set_setting($node, 'bulk_copy_min_size', '-1');
clone_measuring_wal('the stream alone', qr/^cloned in [0-9.]+ s;(?!.*copied by the worker)/s, $rows_sql, $source_rows);

# a mask that keeps the rows' width (filler is char(84)), so the masked
# table is as large as the source's
sq(q{SELECT pgsandbox.mask('src', 'public.pgbench_accounts.filler', '''masked''')});
my ($count_sum, $count) = $source_rows =~ /^((\d+):\d+):/;
clone_measuring_wal('a masked copy', qr/masked by 1 rule in 1 table/,
	q{SELECT count(*) || ':' || sum(abalance + bid) || ':' || count(*) FILTER (WHERE filler = 'masked')
	    FROM pgbench_accounts},
	"$count_sum:$count");

$node->stop;
File::Path::rmtree($home);
done_testing();
