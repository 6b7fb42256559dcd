
# 046_verified_copies.pl: no copy is served that lacks what its source or
# template holds (clone/verify.c), and no crash leaves disk that pgsandbox
# does not see, count and, where it is its own, give back (worker/orphans.c).
#
# A pg_restore in pgsandbox.bin_dir that, as told by a file beside it,
# lists nothing (as one whose output hit a full disk), lists the header of
# the table of contents only, drops a table's entry or its rows' entry from
# the list, or drops a table or its rows from a streamed archive: each clone fails,
# naming what is missing, leaves only its failed row, and no snapshot is
# made that way.  A snapshot whose database lost a table fails its copies.
# A directory of base/ recorded as a database pgsandbox was making is
# removed at the next start, with an event; one it did not make is reported
# by doctor() and left alone; and a clone worker killed while it copies a
# large snapshot leaves a directory that the restart removes, giving the
# disk back.

use strict;
use warnings FATAL => 'all';

use File::Path qw(make_path);
use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes;

my $node = sandbox_node('verify',
	"pgsandbox.max_sandboxes_per_owner = 50\npgsandbox.copy_strategy = wal_log\n");
my $bindir = $node->config_data('--bindir');

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# A clone that must fail: its error, after checking that only its failed
# row is left.
sub failed_clone
{
	my ($source, $what) = @_;
	my $before = sq("SELECT count(*) FROM pgsandbox.sandbox");
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT name FROM pgsandbox.clone('$source', schema_only => false)");
	isnt($ret, 0, "$what: the clone fails");
	is(sq("SELECT count(*) FROM pgsandbox.sandbox") - $before, 1, "$what: one row was added");
	is(sq("SELECT status FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1"), 'failed',
		"$what: it is failed");
	is(untracked_sandboxes($node), '0', "$what: no database or role is left");
	return $err;
}

# ---------------------------------------------------------------------
# a source, streamed (src), and the same with an event trigger, which
# takes it through an archive (srcx)
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE TABLE a (id int PRIMARY KEY, v text);
CREATE TABLE b (id int PRIMARY KEY, a_id int REFERENCES a, v text);
CREATE TABLE c (id int PRIMARY KEY, v text);
CREATE TABLE d (id int PRIMARY KEY, v text);
CREATE TABLE e (id int PRIMARY KEY, v text);
CREATE TABLE f (id int PRIMARY KEY, v text);
CREATE TABLE g (id int PRIMARY KEY, v text);
INSERT INTO a SELECT x, 'a' || x FROM generate_series(1, 100) x;
INSERT INTO b SELECT x, x, 'b' || x FROM generate_series(1, 100) x;
INSERT INTO c SELECT x, 'c' || x FROM generate_series(1, 100) x;
INSERT INTO d SELECT x, 'd' || x FROM generate_series(1, 100) x;
INSERT INTO e SELECT x, 'e' || x FROM generate_series(1, 100) x;
CREATE INDEX c_v ON c (v);
CREATE VIEW av AS SELECT id FROM a;
CREATE SEQUENCE s;
CREATE FUNCTION twice(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
-- an untrusted owner's table with no row but a block, whose index folds a
-- function that fails if the reader plans a query on it
CREATE ROLE mallory;
CREATE FUNCTION evil(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	IF current_user = 'pgsandbox_reader' THEN
		RAISE EXCEPTION 'evil ran as %', current_user;
	END IF;
	RETURN 0;
END $f$;
CREATE TABLE hollow (id int) WITH (autovacuum_enabled = false);
INSERT INTO hollow VALUES (1);
DELETE FROM hollow;
CREATE INDEX hollow_evil ON hollow ((id + evil(1)));
ALTER TABLE hollow OWNER TO mallory;});
$node->safe_psql('postgres', 'CREATE DATABASE srcx TEMPLATE src');
$node->safe_psql('srcx', q{
CREATE FUNCTION noop() RETURNS event_trigger LANGUAGE plpgsql AS 'BEGIN END';
CREATE EVENT TRIGGER noop ON ddl_command_start EXECUTE FUNCTION noop();});
sq(q{SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true);
SELECT pgsandbox.add_source('srcx', 'dbname=srcx', allow_data => true);});

my $inventory = $node->safe_psql('src', q{SELECT count(*) FROM pg_class c
	JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'});
for my $source ('src', 'srcx')
{
	my ($name, $conn) = split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	# the check of the stream's rows reads hollow without planning on it
	is(in_sandbox($conn, q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public'}), $inventory, "$source: a good clone holds every relation");
	like(sq("SELECT objects_digest FROM pgsandbox.sandbox WHERE name = '$name'"),
		qr/^\d+:[0-9a-f]{32}$/, "$source: what it holds is recorded");
	sq("SELECT pgsandbox.drop('$name')");
}

# ---------------------------------------------------------------------
# a pg_restore that loses entries, as a file beside it says
# ---------------------------------------------------------------------
my $wrap = PostgreSQL::Test::Utils::tempdir();
chmod 0755, $wrap;
my $tmp = PostgreSQL::Test::Utils::tempdir();
chmod 0777, $tmp;
open my $fh, '>', "$wrap/pg_restore" or die $!;
print $fh qq{#!/bin/sh
mode=\$(cat '$wrap/mode' 2>/dev/null)
arg=\$(cat '$wrap/arg' 2>/dev/null)
case " \$* " in
*" --list "*)
	case "\$mode" in
	empty) exit 0 ;;
	header) '$bindir/pg_restore' "\$\@" | grep '^;'; exit 0 ;;
	drop) '$bindir/pg_restore' "\$\@" | grep -v -E -- "\$arg"; exit 0 ;;
	esac ;;
*)
	if [ "\$mode" = skip ]; then
		# a restore that skips an entry of the list it was given
		for a in "\$\@"; do
			shift
			case "\$a" in
			--use-list=*)
				grep -v -E -- "\$arg" "\${a#--use-list=}" > '$tmp/skip.list'
				set -- "\$\@" --use-list='$tmp/skip.list' ;;
			*) set -- "\$\@" "\$a" ;;
			esac
		done
	fi
	if [ "\$mode" = stream ] && [ -z "\$(echo " \$* " | grep -- ' -L \\| --use-list')" ]; then
		# a streamed archive: keep it, list it, restore all but one table
		cat > '$tmp/stream.dump'
		'$bindir/pg_restore' --list '$tmp/stream.dump' | grep -v -E -- "\$arg" > '$tmp/stream.list'
		exec '$bindir/pg_restore' "\$\@" --use-list='$tmp/stream.list' '$tmp/stream.dump'
	fi ;;
esac
exec '$bindir/pg_restore' "\$\@"
};
close $fh;
chmod 0755, "$wrap/pg_restore";
symlink("$bindir/pg_dump", "$wrap/pg_dump") or die $!;

sub wrap_mode
{
	my ($mode, $arg) = @_;
	for my $f ([ 'mode', $mode ], [ 'arg', $arg // '' ])
	{
		open my $o, '>', "$wrap/$f->[0]" or die $!;
		print $o $f->[1];
		close $o;
	}
}
wrap_mode('none');
set_bin_dir($node, $wrap);

wrap_mode('empty');
like(failed_clone('srcx', 'a table of contents listed empty'),
	qr/could not list the contents of the source's archive/,
	'a listing that holds no table of contents fails the clone');
$node->psql('postgres', "SELECT * FROM pgsandbox.snapshot('srcx')");
is(sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'}), '0',
	'and no snapshot is made that way');

wrap_mode('header');
my $err = failed_clone('srcx', 'a table of contents without entries');
like($err, qr/the archive of source "srcx" holds rows that its table of contents does not list/,
	'a listing that names none of the archive\'s rows fails the clone');
$node->psql('postgres', "SELECT * FROM pgsandbox.snapshot('srcx')");
is(sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'}), '0',
	'and no snapshot is made that way');
wrap_mode('drop', '.');
like(failed_clone('srcx', 'a listing without its header'),
	qr/could not list the contents of the source's archive/,
	'a listing without its header fails the clone');

wrap_mode('skip', '.');
$err = failed_clone('srcx', 'a restore that skips every entry');
like($err, qr/sandbox "sbx_\w+" lacks \d+ of the \d+ objects of source "srcx" it was restored from/,
	'a restore that made nothing fails the clone');
like($err, qr/Missing: .*table public\.a\b/, 'naming what is missing');

wrap_mode('skip', ' public (c|c_v) ');
$err = failed_clone('srcx', 'a restore that skips a table');
like($err, qr/lacks 4 of the \d+ objects/, 'a restore without one table fails the clone');
like($err, qr/Missing: .*table public\.c\b/, 'naming the table');
like($err, qr/index public\.c_v/, 'and its index');

wrap_mode('drop', ' TABLE DATA public d ');
like(failed_clone('srcx', 'the rows of a table dropped from the list'),
	qr/the archive of source "srcx" holds rows that its table of contents does not list/,
	'rows the listing leaves out fail the clone');

wrap_mode('skip', ' TABLE DATA public d ');
like(failed_clone('srcx', 'a restore that skips the rows of a table'),
	qr/1 table of the sandbox received no row, though the archive of source "srcx" holds rows for it.*Empty: public\.d\./s,
	'a table that received none of its rows fails the clone');

wrap_mode('stream', ' public e ');
$err = failed_clone('src', 'a table dropped from a streamed archive');
like($err, qr/lacks \d+ of the \d+ objects of source "src".*table public\.e\b/s,
	'a streamed restore without one table fails the clone');

wrap_mode('stream', ' TABLE DATA public e ');
$err = failed_clone('src', 'the rows of a table dropped from a streamed archive');
like($err,
	qr/1 table of the sandbox received no row, though source "src" held rows for it in the snapshot it was dumped in.*Empty: public\.e\./s,
	'a streamed restore without one table\'s rows fails the clone, naming the table');
unlike($err, qr/public\.[fg]\b/, 'and not the tables that held no row in the source');

wrap_mode('none');
set_bin_dir($node, '');

# ---------------------------------------------------------------------
# a copy of a snapshot that lost a table
# ---------------------------------------------------------------------
sq(q{SELECT * FROM pgsandbox.snapshot('src')});
my ($snap) = split /\|/, sq(q{SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'});
my ($name, $conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)");
is(in_sandbox($conn, 'SELECT count(*) FROM e'), '100', 'a copy of the snapshot holds its rows');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'"),
	qr/copied from a snapshot/, 'it is a copy');
sq("SELECT pgsandbox.drop('$name')");
sq("ALTER DATABASE $snap ALLOW_CONNECTIONS true");
$node->safe_psql($snap, 'DROP TABLE g');
sq("ALTER DATABASE $snap ALLOW_CONNECTIONS false");
like(failed_clone('src', 'a copy of a snapshot that lost a table'),
	qr/the copy "sbx_\w+" of "\Q$snap\E" does not hold what it copies/,
	'the copy is checked against what its snapshot recorded, and fails');
sq(q{SELECT pgsandbox.drop_snapshot('src')});

# ---------------------------------------------------------------------
# directories that no database owns
# ---------------------------------------------------------------------
my $base = $node->data_dir . '/base';
my $failed = sq(q{SELECT name FROM pgsandbox.sandbox WHERE status = 'failed' ORDER BY id LIMIT 1});
sq("UPDATE pgsandbox.sandbox SET planned_db_oid = 4000000 WHERE name = '$failed'");
for my $dir ("$base/4000000", "$base/4000001")
{
	make_path($dir);
	open my $o, '>', "$dir/16384" or die $!;
	print $o 'x' x (1024 * 1024);
	close $o;
}
my $doctor = sq(q{SELECT ok || ' ' || detail FROM pgsandbox.doctor() WHERE "check" = 'no database directory is orphaned'});
like($doctor, qr/^false .*base\/4000000 \(1024 kB, pgsandbox's, removed when the worker next starts\)/,
	'doctor() reports pgsandbox\'s orphaned directory');
like($doctor, qr/base\/4000001 \(1024 kB, not pgsandbox's, left alone\)/, 'and one that is not pgsandbox\'s');
$node->restart;
ok(wait_until(sub {
	sq("SELECT count(*) FROM pgsandbox.events WHERE sandbox = '$failed' AND action = 'cleanup'"
	  . " AND detail LIKE 'removed directory base/4000000 %'") eq '1' }, 60),
	'at the next start the worker removes its own, with an event');
ok(!-e "$base/4000000", 'the directory is gone');
ok(-e "$base/4000001/16384", 'the one it did not make is left alone');
like(sq(q{SELECT detail FROM pgsandbox.doctor() WHERE "check" = 'no database directory is orphaned'}),
	qr/^Directories of base\/ that no database owns: base\/4000001 \(1024 kB, not pgsandbox's, left alone\)\.$/,
	'and still reported');
unlink "$base/4000001/16384";
rmdir "$base/4000001";

# ---------------------------------------------------------------------
# a clone worker killed while it copies a large snapshot
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE big');
$node->safe_psql('big', q{CREATE TABLE t (id int, pad text);
INSERT INTO t SELECT x, repeat('p', 200) FROM generate_series(1, 3000000) x;});
sq(q{SELECT pgsandbox.add_source('big', 'dbname=big', allow_data => true)});
sq(q{SELECT * FROM pgsandbox.snapshot('big')});
my $du_before = `du -sk $base`;
$du_before =~ s/\s.*//s;
my $cloning = start_psql($node, 'dbname=postgres', "SELECT name FROM pgsandbox.clone('big', schema_only => false)");
# the OID is recorded before the copy begins; then the directory appears,
# and the copy of some 700 MB takes seconds to fill it
my $planned;
ok(wait_until(sub {
	$planned = sq(q{SELECT planned_db_oid FROM pgsandbox.sandbox WHERE status = 'cloning' AND kind = 'sandbox'});
	return $planned ne '';
}, 60), 'the copy\'s database OID is recorded first');
my $deadline = time + 60;
Time::HiRes::usleep(5_000) until -d "$base/$planned" || time > $deadline;
ok(-d "$base/$planned", 'the copy has begun writing its directory');
my ($pid) = clone_worker_pids($node);
ok(defined $pid && kill('KILL', $pid), "the clone worker ($pid) is killed mid copy");
finish_psql($cloning);
# A process of the server killed: with restart_after_crash off (the test
# library's default) the postmaster ends every process and stops by itself.
# Wait for that: an immediate stop racing with it could find no server, fail,
# and end the whole file.
ok(wait_until(sub { !-e $node->data_dir . '/postmaster.pid' }, 120),
	'the server stops by itself after the crash (restart_after_crash = off)');
$node->stop('immediate', fail_ok => 1);
ok(-d "$base/$planned", "the crash left base/$planned");
$node->start;
ok(wait_until(sub {
	sq("SELECT count(*) FROM pgsandbox.events WHERE action = 'cleanup'"
	  . " AND detail LIKE 'removed directory base/$planned %'") eq '1' }, 60),
	'the restart removes it, with an event');
ok(!-e "$base/$planned", 'the directory is gone');
my $du_after = `du -sk $base`;
$du_after =~ s/\s.*//s;
cmp_ok(abs($du_after - $du_before), '<', 0.05 * $du_before + 10240,
	"the disk is back to what it was ($du_before kB before, $du_after kB after)");
is(untracked_sandboxes($node), '0', 'no database or role is left');

$node->stop;
done_testing();
