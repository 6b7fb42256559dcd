# 043_parallel.pl: parallel dump and restore (pgsandbox.clone_jobs).
#
# A data clone of a source of pgsandbox.parallel_min_size or more goes
# through a directory archive, pg_dump --jobs and pg_restore --jobs, taking
# a clone slot per job beyond the first.  It must restore exactly what a
# serial clone restores, take no more jobs than max_concurrent_clones
# leaves free, leave nothing but a failed row when a process dies in the
# middle, end every process it started (pg_dump's and pg_restore's own
# workers too) when its caller cancels, and keep masking's guarantees.
# The steps of a clone are told in its ready event.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('parallel',
	    "pgsandbox.max_concurrent_clones = 4\n"
	  . "pgsandbox.clone_jobs = 3\n"
	  . "pgsandbox.parallel_min_size = 0\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

# A digest of every table's rows, read through $conninfo or in database $db.
my $digest_sql = q{
SELECT string_agg(format('%s:%s', c.relname,
		(xpath('/row/d/text()', query_to_xml(format(
			'SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) AS d FROM %s t',
			'|', '', c.oid::regclass), false, true, '')))[1]), ',' ORDER BY c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'r' AND n.nspname = 'public'};
my $shape_sql = q{
SELECT (SELECT count(*) FROM pg_indexes WHERE schemaname = 'public') || '/'
	|| (SELECT count(*) FROM pg_constraint WHERE contype = 'f') || '/'
	|| (SELECT count(*) FROM pg_views WHERE schemaname = 'public')};

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	is($ret, 0, 'the sandbox role logs in with the returned credentials') or diag $err;
	return $out;
}

# ---------------------------------------------------------------------------
# a source of several related tables
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', q{
CREATE TABLE customer (id int PRIMARY KEY, name text NOT NULL, email text UNIQUE, born date);
CREATE TABLE product (id int PRIMARY KEY, title text, price numeric(10,2) CHECK (price >= 0), tags text[]);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int REFERENCES customer, at timestamptz, note jsonb);
CREATE TABLE line (order_id bigint REFERENCES orders, product_id int REFERENCES product, qty int,
	PRIMARY KEY (order_id, product_id));
CREATE INDEX ON orders (customer_id, at);
CREATE INDEX ON line (product_id);
CREATE VIEW big_orders AS SELECT o.id, sum(l.qty) AS qty FROM orders o JOIN line l ON l.order_id = o.id GROUP BY o.id;
INSERT INTO customer SELECT g, 'name ' || md5(g::text), 'c' || g || '@example.test', date '1950-01-01' + g % 20000
  FROM generate_series(1, 20000) g;
INSERT INTO product SELECT g, 'product ' || g, g % 1000 + 0.99, ARRAY['t' || g % 7, 't' || g % 11]
  FROM generate_series(1, 2000) g;
INSERT INTO orders SELECT g, 1 + g % 20000, timestamptz '2026-01-01' + g * interval '1 minute',
	jsonb_build_object('n', g, 'm', md5(g::text)) FROM generate_series(1, 60000) g;
INSERT INTO line SELECT o, 1 + (o * 7 + k) % 2000, k FROM generate_series(1, 60000) o, generate_series(1, 3) k;
VACUUM ANALYZE;
});
sq("SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true)");
my $source_digest = $node->safe_psql('shop', $digest_sql);
my $source_shape = $node->safe_psql('shop', $shape_sql);

# ---------------------------------------------------------------------------
# parallel and serial clones restore the same rows
# ---------------------------------------------------------------------------
my ($par, $par_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
my $event = sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$par' AND action = 'ready'");
like($event, qr/dumped and restored with 3 jobs/, 'parallel: the clone took 3 jobs');
like($event,
	qr/steps \(ms from the request\): queued 0\.0, taken [0-9.]+, role and database made [0-9.]+, clone worker started [0-9.]+, source read [0-9.]+, pg_dump started [0-9.]+, pg_dump done [0-9.]+, restored [0-9.]+, verified [0-9.]+, finished [0-9.]+, worker reported [0-9.]+, marked ready [0-9.]+$/,
	'parallel: the ready event tells each step of the clone');
is(in_sandbox($par_conn, $digest_sql), $source_digest, 'parallel: every table holds the source\'s rows');
is(in_sandbox($par_conn, $shape_sql), $source_shape, 'parallel: the same indexes, foreign keys and views');
is(in_sandbox($par_conn,
		"SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE c.relnamespace = 'public'::regnamespace AND r.rolname <> current_user"),
	'0', 'parallel: every restored object belongs to the sandbox role');
is(scalar tmp_entries($node), 0, 'parallel: the archive directory is removed');

set_setting($node, 'clone_jobs', '1');
my ($ser, $ser_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
unlike(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$ser' AND action = 'ready'"),
	qr/jobs/, 'serial: the clone streams with one job');
is(in_sandbox($ser_conn, $digest_sql), $source_digest, 'serial: every table holds the source\'s rows');
is(in_sandbox($ser_conn, $shape_sql), $source_shape, 'serial: the same indexes, foreign keys and views');
sq("SELECT pgsandbox.drop('$ser')");

# more jobs than max_concurrent_clones allows: it takes what is free
set_setting($node, 'clone_jobs', '8');
my $many = sq("SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$many' AND action = 'ready'"),
	qr/dumped and restored with 4 jobs/, 'no more jobs than max_concurrent_clones');
sq("SELECT pgsandbox.drop('$many')");

# a source below parallel_min_size streams
set_setting($node, 'parallel_min_size', '1TB');
my $small = sq("SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
unlike(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$small' AND action = 'ready'"),
	qr/jobs/, 'a source below parallel_min_size streams');
sq("SELECT pgsandbox.drop('$small')");
set_setting($node, 'parallel_min_size', '0');
set_setting($node, 'clone_jobs', '3');

# three tables alike: no one of them holds half the pages
make_slow_source($node, 'slow', 3000, 5,
	'CREATE TABLE slow2 (id int PRIMARY KEY, payload text CHECK (slow_ok(payload)));'
	  . ' INSERT INTO slow2 SELECT * FROM slow;'
	  . ' CREATE TABLE slow3 (id int PRIMARY KEY, payload text CHECK (slow_ok(payload)));'
	  . ' INSERT INTO slow3 SELECT * FROM slow; VACUUM ANALYZE;');
sq("SELECT pgsandbox.add_source('slow', 'dbname=slow', allow_data => true)");

# every process descending from $pid: [pid, command line]
sub descendants
{
	my ($pid) = @_;
	my @all;
	for my $kid (child_processes($pid))
	{
		push @all, $kid, descendants($kid->[0]);
	}
	return @all;
}

# Start a clone of the slow source from a session named $app and wait until
# pg_restore runs with its workers; returns (handle, name, the clone
# worker's pid and every process under it, the pg_restore worker's pid).
sub start_parallel_clone
{
	my ($app) = @_;
	my $h = start_psql($node, $node->connstr('postgres') . " application_name=$app",
		"SELECT name FROM pgsandbox.clone('slow', schema_only => false)");
	my ($wpid, $restore, @all);
	ok( wait_until(
			sub {
				my @w = clone_worker_pids($node);
				return 0 unless @w == 1;
				$wpid = $w[0];
				@all = descendants($wpid);
				($restore) = grep { $_->[1] =~ m{/pg_restore\s} && $_->[1] !~ /--list/ } child_processes($wpid);
				return 0 unless defined $restore;
				# its workers: the tables' data loads in parallel
				return child_processes($restore->[0]) >= 2;
			},
			60),
		"$app: pg_restore runs with its workers");
	my $name = sq("SELECT name FROM pgsandbox.sandboxes WHERE status = 'cloning'");
	my ($worker) = child_processes($restore->[0]);
	return ($h, $name, [ $wpid, map { $_->[0] } @all, child_processes($restore->[0]) ],
		$worker->[0]);
}

# ---------------------------------------------------------------------------
# a pg_restore worker killed in the middle of the data: nothing is left
# ---------------------------------------------------------------------------
my ($h, $name, $pids, $victim) = start_parallel_clone('killed');
is(poll_value($node, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_restore'", '3', 30),
	'3', 'killed: three pg_restore sessions load the sandbox');
kill 'KILL', $victim;
my ($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'killed: the clone fails');
like($err, qr/pg_restore into sandbox "\Q$name\E" failed/, 'killed: the caller is told pg_restore failed');
check_clone_cleaned_up($node, $name, 'killed', 30, @$pids);
is(untracked_sandboxes($node), '0', 'killed: no database or role is left untracked');

# ---------------------------------------------------------------------------
# a cancel of a parallel clone ends every process under it
# ---------------------------------------------------------------------------
($h, $name, $pids) = start_parallel_clone('canceled');
cmp_ok(scalar @$pids, '>=', 5, 'canceled: the clone worker, pg_restore and its workers are watched')
  or diag explain $pids;
sq("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'canceled'");
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'canceled: the clone call fails');
check_clone_cleaned_up($node, $name, 'canceled', 30, @$pids);
is( sq("SELECT string_agg(action, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
	'clone,failed', 'canceled: events record the clone and its failure');

# ---------------------------------------------------------------------------
# an immediate shutdown during a parallel clone: every process goes
# ---------------------------------------------------------------------------
($h, $name, $pids) = start_parallel_clone('crash');
$node->stop('immediate');
finish_psql($h);
ok(wait_until(sub { !grep { process_alive($_) } @$pids }, 30),
	'crash: the clone worker, pg_restore and its workers died with the server')
  or diag "still alive: " . join(' ', grep { process_alive($_) } @$pids);
$node->start;
check_clone_cleaned_up($node, $name, 'crash', 60);
is(untracked_sandboxes($node), '0', 'crash: no database or role is left untracked');

# ---------------------------------------------------------------------------
# masking with a parallel restore
# ---------------------------------------------------------------------------
my $marker = 'real-email-marker@corp.test';
$node->safe_psql('shop', "UPDATE customer SET email = '$marker' WHERE id = 1");
sq("SELECT pgsandbox.add_source('shopmasked', 'dbname=shop', allow_data => true)");
sq(q{SELECT pgsandbox.mask('shopmasked', 'public.customer.email', $$'c' || id || '@example.invalid'$$)});
my ($m, $m_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('shopmasked', schema_only => false)");
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$m' AND action = 'ready'"),
	qr/dumped and restored with 3 jobs/, 'masked: the clone took 3 jobs');
is(in_sandbox($m_conn,
		"SELECT count(*) || '/' || count(*) FILTER (WHERE email LIKE '%\@example.invalid') || '/' || count(*) FILTER (WHERE email = '$marker') FROM customer"),
	'20000/20000/0', 'masked: every email is masked, none is real');
is(in_sandbox($m_conn, 'SELECT count(*) FROM line'), '180000', 'masked: the other tables are whole');
is(in_sandbox($m_conn,
		"SELECT count(*) FROM pg_constraint WHERE conrelid = 'customer'::regclass AND contype = 'u'"),
	'1', 'masked: post-data ran after the masked rows (the unique key on email)');
sq("SELECT pgsandbox.drop('$m')");

my $wrap = pg_dump_keeping_all_rows($node);
set_bin_dir($node, $wrap);
($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('shopmasked', schema_only => false)");
isnt($ret, 0, 'masked: a directory archive holding the masked rows fails the clone');
like($err, qr/the source's archive holds the rows of a table that masking rules public\.customer\.email cover/,
	'masked: the check names the rule');
is(sq("SELECT string_agg(status, ',' ORDER BY created_at) FROM pgsandbox.sandboxes WHERE source = 'shopmasked' AND status <> 'dropped'"),
	'failed', 'masked: only a failed row is left');
is(untracked_sandboxes($node), '0', 'masked: no database or role is left untracked');
set_bin_dir($node, '');

sq("SELECT pgsandbox.drop('$par')");
done_testing();
