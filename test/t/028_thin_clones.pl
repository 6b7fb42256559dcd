# 028_thin_clones.pl: copies of a snapshot with pgsandbox.copy_strategy =
# auto, the default.
#
# - On a filesystem that does not clone files (the test machine's own disk,
#   ext4), or on a server older than 18, a copy falls back to WAL_LOG and
#   its event says why.  Whether the disk clones is asked independently of
#   pgsandbox, with cp --reflink=always.
# - On PostgreSQL 18 with the data directory's base on an XFS filesystem
#   with reflink (test/pg/cow.sh, whose mount point PGSANDBOX_COW_DIR names;
#   test/pg/check.sh makes it for 18), a copy clones the snapshot's files:
#   its event says so, it has every row of its source, writes on either side
#   stay on that side, the filesystem's used space grows by far less than
#   the database's size, and a clone worker killed with -9, or an immediate
#   shutdown, while the copy waits for its checkpoint (the checkpointer is
#   stopped with SIGSTOP, so the wait is certain, not timed) leave nothing
#   untracked.  Without that filesystem this part is skipped, saying why.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $rows_sql = q{SELECT count(*) || ':' || md5(string_agg(id || '=' || payload, ',' ORDER BY id)) FROM big};

# a source with rows, added with data, and a data snapshot of it
sub make_source
{
	my ($node, $rows) = @_;
	$node->safe_psql('postgres', 'CREATE DATABASE thin_src');
	$node->safe_psql('thin_src', qq{
CREATE TABLE big (id int PRIMARY KEY, payload text);
INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, $rows) g;
});
	$node->safe_psql('postgres',
		q{SELECT pgsandbox.add_source('thin', 'dbname=thin_src', allow_data => true)});
	$node->safe_psql('postgres', q{SELECT pgsandbox.snapshot('thin')});
	return;
}

sub clone_copy
{
	my ($node) = @_;
	my ($name, $conninfo) = split /\|/, $node->safe_psql('postgres',
		q{SELECT name || '|' || conninfo FROM pgsandbox.clone('thin', schema_only => false)});
	is($node->safe_psql('postgres', qq{SELECT method FROM pgsandbox.sandboxes WHERE name = '$name'}),
		'snapshot', 'the clone is a copy of the snapshot');
	return ($name, $conninfo);
}

sub ready_event
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'});
}

sub in_sandbox
{
	my ($node, $conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# whether files in $dir share their blocks when copied, asked of the
# filesystem without pgsandbox
sub dir_clones_files
{
	my ($dir) = @_;
	my $probe = "$dir/reflink_probe_$$";
	open my $fh, '>', $probe or die "could not write $probe: $!";
	print $fh 'x' x 8192;
	close $fh;
	my $ok = system('cp', '--reflink=always', $probe, "$probe.copy") == 0;
	unlink $probe, "$probe.copy";
	return $ok;
}

# ---------------------------------------------------------------------
# the fallback, on the machine's own disk
# ---------------------------------------------------------------------
my $node = sandbox_node('fallback');
my $major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);
is($node->safe_psql('postgres', 'SHOW pgsandbox.copy_strategy'), 'auto', 'copy_strategy is auto by default');
make_source($node, 2000);
my $disk_clones = dir_clones_files($node->data_dir . '/base');
SKIP:
{
	skip 'the test machine\'s own disk clones files, so nothing falls back here', 3
	  if $disk_clones && $major >= 18;
	my ($name, $conninfo) = clone_copy($node);
	my $why =
	  $major >= 18
	  ? qr/the filesystem of "base\/pgsql_tmp" does not clone files: \S/
	  : qr/cloning files needs PostgreSQL 18/;
	like(ready_event($node, $name), qr/^copied from a snapshot in [0-9.]+ s \(WAL log; $why[^)]*\); steps \(ms from the request\): /,
		"PostgreSQL $major on a disk that does not clone: the copy falls back to WAL_LOG, and its event says why");
	is(in_sandbox($node, $conninfo, $rows_sql), $node->safe_psql('thin_src', $rows_sql),
		'and has every row of the source');
}
$node->safe_psql('postgres', q{ALTER SYSTEM SET pgsandbox.copy_strategy = 'wal_log'});
$node->reload;
my ($wname) = clone_copy($node);
like(ready_event($node, $wname), qr/^copied from a snapshot in [0-9.]+ s \(WAL log\); steps \(ms from the request\): /,
	'copy_strategy = wal_log: the event names the strategy and nothing more');
is(untracked_sandboxes($node), '0', 'nothing untracked');
$node->stop;

# ---------------------------------------------------------------------
# thin clones: PostgreSQL 18 on XFS with reflink
# ---------------------------------------------------------------------
my $cow = $ENV{PGSANDBOX_COW_DIR} // '';
if ($major < 18)
{
	note "thin clones need PostgreSQL 18; this is $major";
	done_testing();
	exit 0;
}
if ($cow eq '' || !-d $cow || !-w $cow)
{
	# skipped, visibly: prove counts and prints a skip
  SKIP: { skip "no copy-on-write filesystem: PGSANDBOX_COW_DIR is not set or not writable "
		  . '(test/pg/check.sh 18 makes one with test/pg/cow.sh, as root)', 1; }
	done_testing();
	exit 0;
}
ok(dir_clones_files($cow), "$cow clones files (cp --reflink=always)");

my $base = "$cow/thin_base_$$";
$node = sandbox_node(
	'thin', "checkpoint_timeout = 1h\nrestart_after_crash = on\n", undef,
	sub {
		# the databases' files on the copy-on-write filesystem; WAL stays
		# on the machine's disk, so the used space counts database files only
		my ($n) = @_;
		system('mv', $n->data_dir . '/base', $base) == 0 or die 'could not move base';
		symlink($base, $n->data_dir . '/base') or die "could not link base: $!";
	});
make_source($node, 100_000);
my $snap_size = $node->safe_psql('postgres',
	q{SELECT size_bytes FROM pgsandbox.snapshots WHERE source = 'thin' AND NOT schema_only});
my $source_rows = $node->safe_psql('thin_src', $rows_sql);

sub used_bytes
{
	$node->safe_psql('postgres', 'CHECKPOINT');
	my $out = `df -B1 --output=used '$cow'`;
	my ($used) = $out =~ /(\d+)\s*$/;
	return $used;
}

my $used_before = used_bytes();
my ($name, $conninfo) = clone_copy($node);
my $used_after = used_bytes();
like(ready_event($node, $name), qr/^copied from a snapshot in [0-9.]+ s \(file clone\); steps \(ms from the request\): /,
	'on PostgreSQL 18 with XFS reflink, the copy clones the files, and its event says so');
is(in_sandbox($node, $conninfo, $rows_sql), $source_rows, 'the copy has every row of its source');
my $grown = $used_after - $used_before;
cmp_ok($grown, '<', $snap_size / 4,
	"the filesystem's used space grew by $grown bytes for a copy of $snap_size bytes");

# writes in the copy stay in the copy
in_sandbox($node, $conninfo, q{UPDATE big SET payload = 'changed in the copy' WHERE id <= 1000});
my ($name2, $conninfo2) = clone_copy($node);
is(in_sandbox($node, $conninfo2, $rows_sql), $source_rows,
	'writes in a copy do not reach the snapshot: the next copy has the source\'s rows');
is(in_sandbox($node, $conninfo, q{SELECT count(*) FROM big WHERE payload = 'changed in the copy'}), '1000',
	'and the copy keeps its writes');

# writes in the source after a refresh do not reach an earlier copy
$node->safe_psql('thin_src', q{UPDATE big SET payload = 'changed in the source' WHERE id > 99000});
$node->safe_psql('postgres', q{SELECT pgsandbox.snapshot('thin')});
my ($name3, $conninfo3) = clone_copy($node);
is(in_sandbox($node, $conninfo3, $rows_sql), $node->safe_psql('thin_src', $rows_sql),
	'a copy of the refreshed snapshot has the source\'s later rows');
is(in_sandbox($node, $conninfo2, $rows_sql), $source_rows,
	'an earlier copy keeps the rows it was made with');

# a clone worker killed with -9 while its copy waits for a checkpoint
sub stop_checkpointer
{
	my $pid = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'});
	kill 'STOP', $pid;
	return $pid;
}

sub copy_waits_for_checkpoint
{
	return wait_until(
		sub {
			$node->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'
				   AND wait_event LIKE 'Checkpoint%'}) eq '1';
		},
		30);
}

sub try_sq { return try_psql($node, 'postgres', $_[0]); }

# The snapshot the refresh above retired is dropped by the lifecycle
# worker, and a DROP DATABASE waits for a checkpoint: were the
# checkpointer stopped first, the worker would wait on it and serve no
# clone.  So its drop is waited for, and what is left to write is written.
ok( wait_until(
		sub {
			$node->safe_psql('postgres',
				q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status <> 'dropped'})
			  eq '1';
		},
		60),
	'the snapshot the refresh retired is dropped');
$node->safe_psql('postgres', 'CHECKPOINT');

my $checkpointer = stop_checkpointer();
my $h = start_psql($node, 'dbname=postgres', q{SELECT name FROM pgsandbox.clone('thin', schema_only => false)});
ok(copy_waits_for_checkpoint(), 'a copy is under way, waiting for the (stopped) checkpointer');
my ($cw) = clone_worker_pids($node);
kill 'KILL', $cw;
kill 'CONT', $checkpointer;
finish_psql($h);
ok( wait_until(
		sub {
			try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'}) eq '0'
			  && untracked_sandboxes($node) eq '0';
		},
		60),
	'kill -9 of the copying clone worker leaves no database or role untracked');

$checkpointer = stop_checkpointer();
$h = start_psql($node, 'dbname=postgres', q{SELECT name FROM pgsandbox.clone('thin', schema_only => false)});
ok(copy_waits_for_checkpoint(), 'another copy is under way');
$node->stop('immediate');
finish_psql($h);
kill 'CONT', $checkpointer;
$node->start;
ok( wait_until(
		sub {
			try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'}) eq '0'
			  && untracked_sandboxes($node) eq '0';
		},
		60),
	'an immediate shutdown mid-copy leaves no database or role untracked after restart');
my ($name4, $conninfo4) = clone_copy($node);
is(in_sandbox($node, $conninfo4, $rows_sql), $node->safe_psql('thin_src', $rows_sql),
	'and copies work again');
$node->stop;
done_testing();
