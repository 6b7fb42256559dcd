
# SandboxTest.pm: helpers shared by the pgsandbox TAP tests.
#
# A node made here preloads pgsandbox, has the extension created in
# "postgres", and checks passwords for every role but the bootstrap
# superuser, so that a test logging in as a sandbox role proves that the
# password pgsandbox returned really works.

package SandboxTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use File::Find;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT = qw(
  sandbox_node superuser_name
  sandbox_psql sandbox_sql start_psql finish_psql
  wait_until poll_value try_psql
  clone_worker_pids child_processes process_alive wait_for_clone_children
  check_clone_cleaned_up processes_matching
  tmp_entries sandbox_leftovers untracked_sandboxes
  make_slow_source replace_password
  set_bin_dir set_setting pg_dump_keeping_all_rows files_holding
  live_snapshot_of live_caught_up logical_source foreign_ports foreign_psql
);

# The nodes made by sandbox_node, for the watchdog below
my @watched_nodes;

# A watchdog for the whole test file.  A test that waits without a bound
# (a psql call blocked on a lock, a clone() whose worker never answers)
# must fail with what its servers were doing, not hang until CI gives up on
# the whole run.  PGSANDBOX_TEST_FILE_TIMEOUT (seconds, default 900; 0 turns
# it off, e.g. under valgrind) bounds each file.
my $file_timeout = $ENV{PGSANDBOX_TEST_FILE_TIMEOUT} // 900;
$SIG{ALRM} = sub {
	diag("this test file ran past ${file_timeout} s; what its servers were doing:");
	foreach my $node (@watched_nodes)
	{
		my ($ret, $out, $err) = $node->psql(
			'postgres', q{
SELECT pid, backend_type, usename, datname, state, wait_event_type, wait_event,
       now() - query_start AS running_for, left(query, 160) AS query
  FROM pg_stat_activity ORDER BY pid;
SELECT locktype, database, relation, transactionid, mode, pid
  FROM pg_locks WHERE NOT granted;
SELECT gid, owner, database FROM pg_prepared_xacts;},
			timeout => 20);
		diag($node->name . ":\n" . ($out // '') . ($err // ''));
	}
	die "test file timed out after ${file_timeout} s\n";
};
alarm $file_timeout if $file_timeout > 0;

# The bootstrap superuser: initdb names it after the OS user.
sub superuser_name
{
	return scalar getpwuid($<);
}

# A started node with pgsandbox preloaded and installed in "postgres".
# $conf is appended to postgresql.conf; $version, if given, is the version
# of the extension to install instead of the default one; $before_start, if
# given, is called with the node after initdb, before the server starts.
sub sandbox_node
{
	my ($name, $conf, $version, $before_start) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	my $su = superuser_name();

	$node->init;
	$node->append_conf('postgresql.conf',
		    "shared_preload_libraries = 'pgsandbox'\n"
		  . "max_connections = 40\n"
		  . "max_worker_processes = 16\n"
		  . "password_encryption = 'scram-sha-256'\n"
		  . ($conf // ''));

	# the superuser (the tests, pg_dump of local sources) is trusted; every
	# other role, sandbox roles included, must give its password
	open my $hba, '>', $node->data_dir . '/pg_hba.conf'
	  or die "could not write pg_hba.conf: $!";
	print $hba "local all $su trust\n";
	print $hba "local all all scram-sha-256\n";
	close $hba;

	# e.g. to move the data directory's base onto another filesystem
	$before_start->($node) if defined $before_start;
	$node->start;
	push @watched_nodes, $node;
	$node->safe_psql('postgres',
		'CREATE EXTENSION pgsandbox' . (defined $version ? " VERSION '$version'" : ''));
	return $node;
}

# Run SQL through psql with a full connection string (e.g. a sandbox's
# conninfo).  Returns (exit code, stdout, stderr).  Never prompts.
sub sandbox_psql
{
	my ($node, $connstr, $sql) = @_;
	my ($stdout, $stderr) = ('', '');
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port);
	delete $ENV{PGPASSWORD};
	delete $ENV{PGUSER};
	my $in = $sql;
	IPC::Run::run(
		[
			$node->installed_command('psql'), '-XAtqw',
			'-v', 'ON_ERROR_STOP=1', '-d', $connstr, '-f', '-'
		],
		'<', \$in, '>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout(120));
	my $ret = $? >> 8;
	chomp $stdout;
	chomp $stderr;
	return ($ret, $stdout, $stderr);
}

# Run $sql in a sandbox through $conninfo, as sandbox_psql does; its output,
# or die with its error.
sub sandbox_sql
{
	my ($node, $conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# Start psql in the background, running each SQL command of @cmds with -c
# in one session.  $connstr is a full connection string.  Returns a handle
# for finish_psql.
sub start_psql
{
	my ($node, $connstr, @cmds) = @_;
	my $h = { stdout => '', stderr => '' };
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port);
	delete $ENV{PGPASSWORD};
	delete $ENV{PGUSER};
	my @argv = ($node->installed_command('psql'), '-XAtqw', '-v',
		'ON_ERROR_STOP=1', '-d', $connstr);
	push @argv, '-c', $_ for @cmds;
	$h->{run} = IPC::Run::start(\@argv, '<', '/dev/null',
		'>', \$h->{stdout}, '2>', \$h->{stderr},
		IPC::Run::timeout(180));
	return $h;
}

# Wait for a background psql to end.  Returns (exit code, stdout, stderr).
sub finish_psql
{
	my ($h) = @_;
	eval { $h->{run}->finish; };
	my $ret = $h->{run}->full_result(0);
	$ret = defined $ret ? $ret >> 8 : -1;
	chomp $h->{stdout};
	chomp $h->{stderr};
	return ($ret, $h->{stdout}, $h->{stderr});
}

# Call $check every 100 ms until it returns true or $timeout seconds have
# passed.  Returns whether it became true.
sub wait_until
{
	my ($check, $timeout) = @_;
	my $deadline = time() + ($timeout // 30);
	while (1)
	{
		return 1 if $check->();
		return 0 if time() > $deadline;
		usleep(100_000);
	}
}

# Run $sql in database $db: its output, or '' if it failed or the server
# is away.  A psql that cannot connect (the server restarting after a
# crash) exits without reading its input, and IPC::Run dies of the broken
# pipe: that is caught here too.
sub try_psql
{
	my ($node, $db, $sql) = @_;
	my ($ret, $out) = eval { $node->psql($db, $sql) };
	return defined $ret && $ret == 0 ? $out : '';
}

# Run $sql in "postgres" until it prints $expected (or $timeout seconds
# pass); returns the last output.
sub poll_value
{
	my ($node, $sql, $expected, $timeout) = @_;
	my $out;
	wait_until(
		sub {
			$out = try_psql($node, 'postgres', $sql);
			return $out eq $expected;
		},
		$timeout);
	return $out;
}

# pids of the running "pgsandbox clone" workers
sub clone_worker_pids
{
	my ($node) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone' ORDER BY pid"
	);
	return grep { $_ ne '' } split /\n/, $out;
}

# The processes whose parent is $ppid: a list of [pid, command line].
sub child_processes
{
	my ($ppid) = @_;
	my @children;
	opendir my $dh, '/proc' or die "could not read /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		my $stat;
		next unless open my $fh, '<', "/proc/$pid/stat";
		$stat = <$fh>;
		close $fh;
		next unless defined $stat && $stat =~ /\)\s+\S+\s+(\d+)/;
		next unless $1 == $ppid;
		my $cmd = '';
		if (open my $ch, '<', "/proc/$pid/cmdline")
		{
			local $/;
			$cmd = <$ch> // '';
			close $ch;
			$cmd =~ s/\0/ /g;
		}
		push @children, [ $pid, $cmd ];
	}
	closedir $dh;
	return @children;
}

# Wait (up to $timeout s) until exactly one clone worker runs and has a
# child for each program named in @programs ('pg_dump', 'pg_restore').
# Returns (worker pid, [pid, command line] of each of its children), or
# nothing if that did not happen.
sub wait_for_clone_children
{
	my ($node, $timeout, @programs) = @_;
	my ($wpid, @kids);
	my $ok = wait_until(
		sub {
			my @w = clone_worker_pids($node);
			return 0 unless @w == 1;
			$wpid = $w[0];
			@kids = child_processes($wpid);
			for my $p (@programs)
			{
				return 0 unless grep { $_->[1] =~ m{(?:^|/)\Q$p\E\s} } @kids;
			}
			return 1;
		},
		$timeout);
	return $ok ? ($wpid, @kids) : ();
}

# After a clone of sandbox $name was stopped: check, waiting up to
# $timeout s for the worker to finish, that the sandbox is failed with an
# error, that its database and role, the processes in @pids, every clone
# worker and every pg_dump/pg_restore session are gone, and that
# pgsandbox_tmp is empty.  $what prefixes the test names.
sub check_clone_cleaned_up
{
	my ($node, $name, $what, $timeout, @pids) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$timeout //= 30;

	is(poll_value($node,
			"SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'",
			'failed', $timeout),
		'failed', "$what: sandbox becomes failed");
	is( $node->safe_psql('postgres',
			"SELECT error IS NOT NULL AND error <> '' FROM pgsandbox.sandboxes WHERE name = '$name'"),
		't', "$what: the reason is recorded");
	is(sandbox_leftovers($node, $name), '0|0', "$what: its database and role are gone");
	ok(wait_until(sub { !grep { process_alive($_) } @pids }, $timeout),
		"$what: the clone worker and its pg_dump/pg_restore processes are gone")
	  or diag "still alive: " . join(' ', grep { process_alive($_) } @pids);
	ok(wait_until(sub { !processes_matching(qr/\Q$name\E/) }, $timeout),
		"$what: no process names the sandbox (pg_restore, clone worker, backend)")
	  or diag explain [ processes_matching(qr/\Q$name\E/) ];
	is(poll_value($node,
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'"
			  . " OR application_name IN ('pg_dump', 'pg_restore')",
			'0', $timeout),
		'0', "$what: no clone worker, pg_dump or pg_restore session remains");
	my @left = tmp_entries($node);
	is(scalar @left, 0, "$what: pgsandbox_tmp is empty") or diag "@left";
	return;
}

# Running processes whose command line (or process title) matches $re: a
# list of [pid, command line].
sub processes_matching
{
	my ($re) = @_;
	my @found;
	opendir my $dh, '/proc' or die "could not read /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		next if $pid == $$;
		my $cmd;
		next unless open my $ch, '<', "/proc/$pid/cmdline";
		{
			local $/;
			$cmd = <$ch> // '';
		}
		close $ch;
		$cmd =~ s/\0/ /g;
		push @found, [ $pid, $cmd ] if $cmd =~ $re && process_alive($pid);
	}
	closedir $dh;
	return @found;
}

# Is a process running (not gone, not a zombie)?
sub process_alive
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return 0;
	my $stat = <$fh>;
	close $fh;
	return 0 unless defined $stat;
	return $stat =~ /\)\s+Z\s/ ? 0 : 1;
}

# Entries left in $PGDATA/pgsandbox_tmp (none if it does not exist).
sub tmp_entries
{
	my ($node) = @_;
	my $dir = $node->data_dir . '/pgsandbox_tmp';
	return () unless -d $dir;
	opendir my $dh, $dir or die "could not read $dir: $!";
	my @e = grep { $_ ne '.' && $_ ne '..' } readdir $dh;
	closedir $dh;
	return @e;
}

# "databases|roles" that still carry the given name, or, without a name,
# the number of sbx_ databases and roles.
sub sandbox_leftovers
{
	my ($node, $name) = @_;
	my $cond =
	  defined $name
	  ? "= '$name'"
	  : "LIKE 'sbx\\_%'";
	return $node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM pg_database WHERE datname $cond) || '|' ||"
		  . " (SELECT count(*) FROM pg_roles WHERE rolname $cond)");
}

# How many files under database $dboid's directory of $node hold the
# string $needle, after a checkpoint has written what is in memory.
sub files_holding
{
	my ($node, $dboid, $needle) = @_;
	my @found;
	$node->safe_psql('postgres', 'CHECKPOINT');
	find(
		sub {
			return unless -f $_;
			my $content = slurp_file($_);
			push @found, $File::Find::name if index($content, $needle) >= 0;
		},
		$node->data_dir . "/base/$dboid");
	return scalar @found;
}

# The sandbox databases and roles that no live row of pgsandbox's catalog
# accounts for, waiting up to 30 s for the count to reach 0: a drop marks its
# row dropped once the database is gone, and drops the role in the worker's
# next statement, so a role may outlive its row for a moment.  Returns the
# last count.
sub untracked_sandboxes
{
	my ($node) = @_;
	my $count = '';
	wait_until(
		sub {
			my ($ret, $out) = $node->psql('postgres', q{
SELECT count(*) FROM (
	SELECT datname FROM pg_database WHERE datname LIKE 'sbx\_%'
	EXCEPT SELECT name FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready', 'dropping')
	UNION ALL
	SELECT rolname FROM pg_roles WHERE rolname LIKE 'sbx\_%'
	EXCEPT SELECT name FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready', 'dropping')) x});
			$count = $ret == 0 ? $out : '';
			return $count eq '0';
		},
		30);
	return $count;
}

# A source database whose restore is slow and steady: each row copied into
# a sandbox passes a CHECK that sleeps $ms_per_row milliseconds, but only
# inside a sandbox (so filling the source stays fast).  The table holds
# ~100 bytes per row, so with a few thousand rows pg_dump outlives the pipe
# buffer and both pg_dump and pg_restore run for the whole clone.
# $extra_sql, if given, is run in the new database too.
sub make_slow_source
{
	my ($node, $dbname, $rows, $ms_per_row, $extra_sql) = @_;
	my $secs = $ms_per_row / 1000.0;
	$node->safe_psql('postgres', "CREATE DATABASE $dbname");
	$node->safe_psql(
		$dbname, qq{
CREATE FUNCTION slow_ok(text) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	IF current_database() LIKE 'sbx\\_%' THEN
		PERFORM pg_sleep($secs);
	END IF;
	RETURN true;
END
\$f\$;
CREATE TABLE slow (id int PRIMARY KEY, payload text CHECK (slow_ok(payload)));
INSERT INTO slow SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, $rows) g;
});
	$node->safe_psql($dbname, $extra_sql) if defined $extra_sql;
	return;
}

# A connection string with its password replaced.
sub replace_password
{
	my ($conninfo, $password) = @_;
	(my $c = $conninfo) =~ s/password=\S+/password=$password/;
	return $c;
}

# Set pgsandbox.$name to $value and wait until new sessions see it.
sub set_setting
{
	my ($node, $name, $value) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->safe_psql('postgres', "ALTER SYSTEM SET pgsandbox.$name = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	ok(wait_until(sub { $node->safe_psql('postgres', "SHOW pgsandbox.$name") eq $value }),
		"pgsandbox.$name is $value");
	return;
}

# The id of the live snapshot of source $source on $node that serves (other
# than $not, if given), once one does; '' after 120 s without one.
sub live_snapshot_of
{
	my ($node, $source, $not) = @_;
	my $id;
	wait_until(
		sub {
			$id = $node->safe_psql('postgres',
				    "SELECT s.id FROM pgsandbox._current_snapshots() c"
				  . " JOIN pgsandbox.sandbox s ON s.id = c.id"
				  . " WHERE c.source = '$source' AND NOT c.schema_only"
				  . "   AND s.live_slot IS NOT NULL AND s.live_errors = 0"
				  . ($not ? " AND s.id <> $not" : ''));
			return $id ne '';
		},
		120);
	return $id;
}

# Pass if the live snapshot of $source on $node comes to hold every change
# the source committed up to time $at (the source's clock) within 60 s.
sub live_caught_up
{
	my ($node, $source, $at, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is( poll_value(
			$node,
			"SELECT live_as_of >= '$at'::timestamptz FROM pgsandbox.snapshots"
			  . " WHERE source = '$source' AND NOT schema_only AND live",
			't', 60),
		't',
		"$what: the live snapshot of $source holds the changes");
	return;
}

# A server of its own, ready to be a live source: wal_level logical, logins
# by password (scram) but for the bootstrap superuser's own, and a role
# "repl" with REPLICATION, pg_read_all_data and password $password.
# Returns the node and the conninfo of "repl" to database $db.
sub logical_source
{
	my ($name, $password, $db) = @_;
	my $src = PostgreSQL::Test::Cluster->new($name);
	$src->init;
	$src->append_conf('postgresql.conf',
		    "wal_level = logical\nmax_wal_senders = 5\nmax_replication_slots = 5\n"
		  . "password_encryption = 'scram-sha-256'\n");
	open my $fh, '>', $src->data_dir . '/pg_hba.conf' or die $!;
	print $fh "local all " . superuser_name() . " trust\nlocal all all scram-sha-256\n";
	close $fh;
	$src->start;
	$src->safe_psql('postgres',
		"CREATE ROLE repl LOGIN REPLICATION PASSWORD '$password' IN ROLE pg_read_all_data");
	return ($src,
		'host=' . $src->host . ' port=' . $src->port . " dbname=$db user=repl password=$password");
}

# The servers of other majors test/pg/foreign.sh started, from
# PGSANDBOX_FOREIGN: a hash of major => port (empty without them).
sub foreign_ports
{
	return map { split /:/ } split ' ', ($ENV{PGSANDBOX_FOREIGN} // '');
}

# SQL on the foreign server at $port, as its superuser, with $node's psql;
# dies on error.
sub foreign_psql
{
	my ($node, $port, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', "host=127.0.0.1 port=$port user=postgres dbname=$db", '-c', $sql
		],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or die "on the server at port $port: $err";
	chomp $out;
	return $out;
}

# Set pgsandbox.bin_dir and wait until new processes see it.
sub set_bin_dir
{
	my ($node, $dir) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET pgsandbox.bin_dir = '$dir'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	ok(wait_until(sub { $node->safe_psql('postgres', 'SHOW pgsandbox.bin_dir') eq $dir }),
		"pgsandbox.bin_dir is '$dir'");
	return;
}

# A directory for pgsandbox.bin_dir whose pg_dump leaves out no table's
# rows, whatever it is told (--exclude-table-data is dropped), and whose
# pg_restore is the node's: for the checks of the archive's contents.
sub pg_dump_keeping_all_rows
{
	my ($node) = @_;
	my $bindir = $node->config_data('--bindir');
	my $wrap = PostgreSQL::Test::Utils::tempdir();
	chmod 0755, $wrap;
	open my $fh, '>', "$wrap/pg_dump" or die $!;
	print $fh qq{#!/bin/sh
# a pg_dump that leaves out no table's rows, whatever it is told
for a in "\$\@"; do
	shift
	case "\$a" in --exclude-table-data=*) ;; *) set -- "\$\@" "\$a" ;; esac
done
exec '$bindir/pg_dump' "\$\@"
};
	close $fh;
	chmod 0755, "$wrap/pg_dump";
	symlink("$bindir/pg_restore", "$wrap/pg_restore") or die $!;
	return $wrap;
}

1;
