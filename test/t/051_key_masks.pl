
# 051_key_masks.pl: key masks, the same on every column keys tie together.
#
# A source whose users are keyed by email, referred to by two tables'
# foreign keys and by a relationship relate() declares, and whose accounts
# are keyed by an integer, referred to through a composite key and from a
# partitioned table.  With both keys masked by mask_key()'s defaults, a
# data clone holds no real email (readable values, statistics, and every
# file of the database), no account keeps its real id, every row is there,
# every constraint of the source is created and valid, and every reference
# still matches.  A second clone masks every key the same; so do a reduced
# one, whose closure runs on the real values, and a copy of a snapshot,
# which a change of the rules retires.  A key mask whose
# values collide fails the clone closed, naming the constraint, and leaves
# only the failed row.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('key_masks', "pgsandbox.max_sandboxes_per_owner = 50\n");
sub sq { return $node->safe_psql('postgres', $_[0]); }
sub src { return $node->safe_psql('keys', $_[0]); }

my $marker = 'zq-real';
$node->safe_psql('postgres', 'CREATE DATABASE keys');
src(qq{
CREATE TABLE users (email text PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE orders (id int PRIMARY KEY, user_email text NOT NULL REFERENCES users, total int);
CREATE TABLE reviews (id int PRIMARY KEY, author text REFERENCES users (email), body text);
CREATE TABLE notes (id int PRIMARY KEY, author_email text, body text);
CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE account_members (account_id int REFERENCES accounts, n int, PRIMARY KEY (account_id, n));
CREATE TABLE member_roles (id int PRIMARY KEY, account_id int NOT NULL, n int NOT NULL, role text,
	FOREIGN KEY (account_id, n) REFERENCES account_members);
CREATE TABLE payments (id int, account_id int NOT NULL REFERENCES accounts, amount int,
	PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE payments_low PARTITION OF payments FOR VALUES FROM (0) TO (500);
CREATE TABLE payments_high PARTITION OF payments FOR VALUES FROM (500) TO (100000);
-- a key declared on one partition only: its siblings' values are the same column
CREATE TABLE refunds (id int, account_id int NOT NULL, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE refunds_a PARTITION OF refunds FOR VALUES FROM (0) TO (100);
CREATE TABLE refunds_b PARTITION OF refunds FOR VALUES FROM (100) TO (1000);
ALTER TABLE refunds_a ADD FOREIGN KEY (account_id) REFERENCES accounts;
CREATE TABLE mentions (id int PRIMARY KEY, kind text, ref text);

INSERT INTO users SELECT 'person' || g || '\@$marker.test', 'name ' || g FROM generate_series(1, 300) g;
INSERT INTO orders SELECT g, 'person' || (1 + g % 300) || '\@$marker.test', g FROM generate_series(1, 1000) g;
INSERT INTO reviews SELECT g, CASE WHEN g % 10 <> 0 THEN 'person' || (1 + (g * 7) % 300) || '\@$marker.test' END,
	'review ' || g FROM generate_series(1, 400) g;
INSERT INTO notes SELECT g, CASE WHEN g % 5 <> 0 THEN 'person' || (1 + (g * 3) % 300) || '\@$marker.test' END,
	'note ' || g FROM generate_series(1, 200) g;
INSERT INTO accounts SELECT g, 'account ' || g FROM generate_series(1, 50) g;
INSERT INTO account_members SELECT a, n FROM generate_series(1, 50) a, generate_series(1, 4) n;
INSERT INTO member_roles SELECT g, 1 + g % 50, 1 + g % 4, 'role ' || g FROM generate_series(1, 150) g;
INSERT INTO payments SELECT g, 1 + (g * 11) % 50, g FROM generate_series(1, 900) g;
INSERT INTO refunds SELECT g, 1 + (g * 3) % 50 FROM generate_series(1, 200) g;
INSERT INTO mentions SELECT g, 'user', 'ref' || g FROM generate_series(1, 5) g;
ANALYZE;
});
sq("SELECT pgsandbox.add_source('keys', 'dbname=keys', allow_data => true)");
sq(q{SELECT pgsandbox.relate('keys', 'public.notes(author_email)', 'public.users(email)')});
sq(q{SELECT pgsandbox.mask_key('keys', 'public.users.email')});
sq(q{SELECT pgsandbox.mask_key('keys', 'public.accounts.id')});
is(sq("SELECT string_agg(target || ' ' || key_mask, ', ' ORDER BY target) FROM pgsandbox.source_rules WHERE kind = 'mask'"),
	'public.accounts.id true, public.users.email true', 'the key masks are listed');

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

my @tables = qw(users orders reviews notes accounts account_members member_roles payments refunds);
my $counts_q = join(" || ' ' || ", map { "(SELECT count(*) FROM $_)" } @tables);
my $refs_q = q{SELECT
	(SELECT count(*) FROM orders o JOIN users u ON u.email = o.user_email) || ' ' ||
	(SELECT count(*) FROM reviews r JOIN users u ON u.email = r.author) || ' ' ||
	(SELECT count(*) FROM notes n JOIN users u ON u.email = n.author_email) || ' ' ||
	(SELECT count(*) FROM account_members m JOIN accounts a ON a.id = m.account_id) || ' ' ||
	(SELECT count(*) FROM member_roles r JOIN account_members m USING (account_id, n)) || ' ' ||
	(SELECT count(*) FROM payments p JOIN accounts a ON a.id = p.account_id) || ' ' ||
	(SELECT count(*) FROM refunds r JOIN accounts a ON a.id = r.account_id)};
my $cons_q = q{SELECT count(*) || ' ' || string_agg(conname || ':' || contype::text || ':' || convalidated, ',' ORDER BY conname)
	FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype IN ('p', 'u', 'f')};
# who owns what, by the names no mask covers
my $pairs_q = q{SELECT md5(string_agg(u.name || '=' || u.email, ',' ORDER BY u.name)) || ' '
	|| (SELECT md5(string_agg(a.name || '=' || a.id, ',' ORDER BY a.name)) FROM accounts a) FROM users u};

my $src_counts = src("SELECT $counts_q");
my $src_refs = src($refs_q);
my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('keys', schema_only => false)");
ok($sbx, 'a clone with two key masks succeeds');
is(in_sandbox($conn, "SELECT $counts_q"), $src_counts, 'every row is there');
is(in_sandbox($conn, $cons_q), src($cons_q), 'every key and constraint of the source is created, and valid');
is(in_sandbox($conn, $refs_q), $src_refs, 'every reference still matches: two foreign keys, a relationship, a composite key, a partitioned table, a key of one partition (in every partition)');

# no real value anywhere
is(in_sandbox($conn, qq{ANALYZE;
SELECT (SELECT count(*) FROM users x WHERE x::text LIKE '%$marker%')
	+ (SELECT count(*) FROM orders x WHERE x::text LIKE '%$marker%')
	+ (SELECT count(*) FROM reviews x WHERE x::text LIKE '%$marker%')
	+ (SELECT count(*) FROM notes x WHERE x::text LIKE '%$marker%')
	+ (SELECT count(*) FROM pg_stats WHERE schemaname = 'public'
		AND (coalesce(most_common_vals::text, '') || coalesce(histogram_bounds::text, '')) LIKE '%$marker%')}),
	'0', 'no readable value, nor any statistic, holds a real email');
my $dboid = sq("SELECT oid FROM pg_database WHERE datname = '$sbx'");
is(files_holding($node, $dboid, $marker), 0, 'no file of the sandbox database holds a real email');
ok(files_holding($node, sq("SELECT oid FROM pg_database WHERE datname = 'keys'"), $marker) > 0,
	'while the source\'s files do');
is(in_sandbox($conn, q{SELECT count(*) || ' ' || count(*) FILTER (WHERE email ~ '^[0-9a-f]{16}@[0-9a-f]{8}\.invalid$')
	|| ' ' || count(DISTINCT split_part(email, '@', 2)) FROM users}), '300 300 1',
	'every email keeps its shape, and one domain stays one domain');
my %real_ids = map { split /\|/ } split /\n/, src('SELECT name, id FROM accounts');
my %masked_ids = map { split /\|/ } split /\n/, in_sandbox($conn, 'SELECT name, id FROM accounts');
is(scalar(grep { $real_ids{$_} == $masked_ids{$_} } keys %real_ids), 0, 'no account keeps its real id');
is(scalar(keys %masked_ids), 50, 'and every account is there, under a distinct id');

# the same masked keys in a second clone
my ($sbx2, $conn2) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('keys', schema_only => false)");
is(in_sandbox($conn2, $pairs_q), in_sandbox($conn, $pairs_q), 'a second clone masks every key the same');

# a reduced clone: the closure on the real values, the same masked keys
sq(q{SELECT pgsandbox.subset('keys', 'public.accounts', $$name LIKE 'account 1%'$$)});
my ($sbx3, $conn3) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('keys', schema_only => false)");
is(in_sandbox($conn3, q{SELECT string_agg(name, ',' ORDER BY name) FROM accounts}),
	src(q{SELECT string_agg(name, ',' ORDER BY name) FROM accounts WHERE name LIKE 'account 1%'}),
	'a reduced clone keeps the accounts its rule chooses');
is(in_sandbox($conn3, q{SELECT (SELECT count(*) FROM payments) || ' ' || (SELECT count(*) FROM account_members)}),
	src(q{SELECT (SELECT count(*) FROM payments p JOIN accounts a ON a.id = p.account_id WHERE a.name LIKE 'account 1%') || ' '
		|| (SELECT count(*) FROM account_members m JOIN accounts a ON a.id = m.account_id WHERE a.name LIKE 'account 1%')}),
	'and the rows that refer to them, followed on the real keys');
my %reduced_ids = map { split /\|/ } split /\n/, in_sandbox($conn3, 'SELECT name, id FROM accounts');
is(scalar(grep { $reduced_ids{$_} != $masked_ids{$_} } keys %reduced_ids), 0,
	'under the same masked ids as a full clone');
is(in_sandbox($conn3, $cons_q), src($cons_q), 'with every constraint created and valid');
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.subset('keys', 'public.accounts', 'id < 10')});
like($err, qr/subset condition for "public\.accounts" names masked column "id"/,
	'a subset condition may not name a key-masked column');
sq(q{SELECT pgsandbox.unsubset('keys', 'public.accounts')});

# a snapshot holds the masked keys; a change of the relationships retires it
sq("SELECT pgsandbox.snapshot('keys')");
my ($copy, $copy_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('keys', schema_only => false)");
is(sq("SELECT method || ' ' || masked FROM pgsandbox.sandboxes WHERE name = '$copy'") . ' ' . in_sandbox($copy_conn, $pairs_q),
	'snapshot true ' . in_sandbox($conn, $pairs_q), 'a copy of the snapshot holds the same masked keys');
is(in_sandbox($copy_conn, $refs_q), $src_refs, 'and every reference matches there');
my $snap = sq("SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'");
sq(q{SELECT pgsandbox.unrelate('keys', 'public.notes(author_email)', 'public.users(email)')});
ok(wait_until(sub { sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$snap'") eq 'dropped' }, 90),
	'a change of the relationships retires the snapshot made under the old ones');
# the worker takes it again at once, under the new ones; once that is done,
# the snapshot is dropped so that the changes of rules below retake none
ok(wait_until(sub {
	sq("SELECT string_agg(status, ',') FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND name <> '$snap'") =~ /^(ready|failed)$/ }, 90),
	'and takes it again under the new ones');
sq("SELECT pgsandbox.drop_snapshot('keys')");
ok(wait_until(sub { sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status IN ('cloning', 'ready')") eq '0' }, 90),
	'a dropped snapshot leaves nothing that a change of rules retakes');

# refused: a key mask of a partition; one reaching a column that a
# relationship ties only where its condition holds
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.mask_key('keys', 'public.refunds_a.account_id')});
like($err, qr/key mask "public\.refunds_a\.account_id" of source "keys" is of a partition or an inheritance child/,
	'a key mask of a partition is refused');
sq(q{SELECT pgsandbox.relate('keys', 'public.mentions(ref)', 'public.users(email)', $$kind = 'user'$$)});
my $rows = sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'");
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('keys', schema_only => false)");
like($err, qr/reaches column "ref" of public\.mentions through relationship "public\.mentions\(ref\) -> public\.users\(email\)", which has a condition/,
	'a key mask reaching a column through a relationship with a condition fails the clone');
is(sq("SELECT count(*) - $rows || ' ' || (SELECT status FROM pgsandbox.sandbox WHERE kind = 'sandbox' ORDER BY id DESC LIMIT 1)"
	  . " FROM pgsandbox.sandbox WHERE kind = 'sandbox'"), '1 failed', 'and leaves only its failed row');
sq(q{SELECT pgsandbox.unrelate('keys', 'public.mentions(ref)', 'public.users(email)')});

# a collision fails closed, naming the constraint
sq(q{SELECT pgsandbox.mask_key('keys', 'public.users.email', $$pg_catalog.left(email, 3)$$)});
$rows = sq("SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'");
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('keys', schema_only => false)");
like($err, qr/users_pkey/, 'a key mask whose values collide fails the clone, naming the constraint');
unlike($err, qr/\Q$marker\E/, 'and its error holds no real value');
unlike($err, qr/Key \([^)]*\)=\((?!masked values withheld\))/, 'nor any masked one, which a poor mask leaves part of a real one in');
like($err, qr/HINT:  Masked values may break a unique key/, 'the caller reads its hint');
like(sq("SELECT error FROM pgsandbox.sandbox WHERE kind = 'sandbox' ORDER BY id DESC LIMIT 1"),
	qr/\nHint: Masked values may break a unique key/, 'so does the sandbox\'s recorded error');
is(sq("SELECT count(*) - $rows || ' ' || (SELECT status FROM pgsandbox.sandbox WHERE kind = 'sandbox' ORDER BY id DESC LIMIT 1)"
	  . " FROM pgsandbox.sandbox WHERE kind = 'sandbox'"), '1 failed', 'and leaves only its failed row');
is(untracked_sandboxes($node), '0', 'and no database or role');

done_testing();
