
# 050_relationships.pl: reduced clones of a source that declares no
# foreign key, followed through relationships declared with relate().
#
# A Rails-like source: accounts (with an owner among the users: a cycle),
# users (with invited_by into users), posts
# and photos of users, comments of users on posts or photos (the
# polymorphic pair commentable_type, commentable_id), taggings of posts with
# no primary key, and events partitioned by range.  Some references dangle:
# a post of no user, a comment on no post.  Two rule sets are cloned: a
# subset of users (everything else goes "down" through the relationships),
# and a subset of comments (everything they refer to comes "up", each
# polymorphic side only where its type says so).  For every table the rows
# of the sandbox are compared with the rows computed on the source by a
# query written here; every relationship holds in the sandbox but for the
# references that dangle on the source, which the ready event counts.  Then:
# a referred key that stops being unique fails the clone, naming the
# relationship, and leaves only the failed row.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('relationships', "pgsandbox.max_sandboxes_per_owner = 50\n");
sub sq { return $node->safe_psql('postgres', $_[0]); }
sub src { return $node->safe_psql('app', $_[0]); }

$node->safe_psql('postgres', 'CREATE DATABASE app');
src(q{
CREATE TABLE accounts (id int PRIMARY KEY, name text, owner_id int);
CREATE TABLE users (id int PRIMARY KEY, account_id int, invited_by int, email text);
CREATE TABLE posts (id bigint PRIMARY KEY, user_id int, title text);
CREATE TABLE photos (id bigint PRIMARY KEY, user_id int, url text);
CREATE TABLE comments (id int PRIMARY KEY, user_id int, commentable_type varchar(20),
	commentable_id bigint, body text);
CREATE TABLE tags (id int PRIMARY KEY, name text UNIQUE);
CREATE TABLE taggings (post_id bigint, tag_name text);
CREATE TABLE events (id int, user_id int, what text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE events_low PARTITION OF events FOR VALUES FROM (0) TO (300);
CREATE TABLE events_high PARTITION OF events FOR VALUES FROM (300) TO (100000);
CREATE TABLE event_notes (id int PRIMARY KEY, event_id int, note text);

INSERT INTO accounts SELECT g, 'account ' || g, CASE WHEN g % 2 = 0 THEN 13 * g + 1 END FROM generate_series(1, 12) g;
INSERT INTO users SELECT g, 1 + g % 12, CASE WHEN g > 7 AND g % 4 = 1 THEN g - 7 END, 'u' || g || '@app.test'
	FROM generate_series(1, 200) g;
INSERT INTO posts SELECT g, 1 + (g * 3) % 200, 'post ' || g FROM generate_series(1, 400) g;
INSERT INTO posts VALUES (401, 999, 'a post of no user'), (402, NULL, 'a post of nobody');
INSERT INTO photos SELECT g, 1 + (g * 7) % 200, 'photo ' || g FROM generate_series(1, 300) g;
INSERT INTO comments SELECT g, 1 + (g * 11) % 200,
	CASE WHEN g % 3 = 0 THEN 'Photo' ELSE 'Post' END,
	CASE WHEN g % 3 = 0 THEN 1 + g % 300 ELSE 1 + g % 402 END, 'comment ' || g
	FROM generate_series(1, 900) g;
INSERT INTO comments VALUES (901, 10, 'Post', 77777, 'on no post'), (902, 20, 'Video', 5, 'on a video'),
	(903, 30, 'Photo', 88888, 'on no photo');
INSERT INTO tags SELECT g, 'tag' || g FROM generate_series(1, 20) g;
INSERT INTO taggings SELECT p, 'tag' || (1 + (p + k) % 20) FROM generate_series(1, 402) p, generate_series(0, 1) k;
INSERT INTO events SELECT g, 1 + (g * 13) % 200, 'event ' || g FROM generate_series(1, 600) g;
INSERT INTO event_notes SELECT g, CASE WHEN g % 50 <> 0 THEN 1 + (g * 3) % 600 END, 'note ' || g
	FROM generate_series(1, 400) g;
ANALYZE;
});
sq("SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true)");
my @relations = (
	[ 'public.users(account_id)', 'public.accounts(id)', undef ],
	[ 'public.accounts(owner_id)', 'public.users(id)', undef ],
	[ 'public.users(invited_by)', 'public.users(id)', undef ],
	[ 'public.posts(user_id)', 'public.users(id)', undef ],
	[ 'public.photos(user_id)', 'public.users(id)', undef ],
	[ 'public.comments(user_id)', 'public.users(id)', undef ],
	[ 'public.comments(commentable_id)', 'public.posts(id)', q{commentable_type = 'Post'} ],
	[ 'public.comments(commentable_id)', 'public.photos(id)', q{commentable_type = 'Photo'} ],
	[ 'public.taggings(post_id)', 'public.posts(id)', undef ],
	[ 'public.taggings(tag_name)', 'public.tags(name)', undef ],
	[ 'public.events(user_id)', 'public.users(id)', undef ],
	[ 'public.event_notes(event_id)', 'public.events(id)', undef ],);
foreach my $r (@relations)
{
	sq("SELECT pgsandbox.relate('app', '$r->[0]', '$r->[1]'"
		  . (defined $r->[2] ? ", \$\$$r->[2]\$\$" : '') . ')');
}
is(sq("SELECT count(*) FROM pgsandbox.source_rules WHERE kind = 'relate'"), scalar @relations,
	'the relationships are listed in source_rules');

my %key = (
	accounts => 'id', users => 'id', posts => 'id', photos => 'id', comments => 'id',
	tags => 'id', taggings => 'post_id, tag_name', events => 'id', event_notes => 'id');

sub rows_in
{
	my ($run, $t, $from) = @_;
	return $run->("SELECT count(*) || ':' || coalesce(md5(string_agg(($key{$t})::text, ',' ORDER BY $key{$t})), '')"
		  . " FROM (SELECT $key{$t} FROM $from) s");
}

sub sandbox_rows
{
	my ($conn, $t) = @_;
	return rows_in(
		sub {
			my ($ret, $out, $err) = sandbox_psql($node, $conn, $_[0]);
			die "in sandbox: $err" if $ret;
			return $out;
		},
		$t, $t);
}

# The references that do not hold in a sandbox, relationship by
# relationship: "referring table:key of each row", sorted.
sub broken_references
{
	my ($run) = @_;
	my @broken;
	foreach my $r (@relations)
	{
		my ($ft, $fc) = $r->[0] =~ /^public\.(\w+)\((\w+)\)$/;
		my ($tt, $tc) = $r->[1] =~ /^public\.(\w+)\((\w+)\)$/;
		my $cond = defined $r->[2] ? " AND a.$r->[2]" : '';
		my $out = $run->("SELECT coalesce(string_agg('$ft:' || ($key{$ft}), ' ' ORDER BY ($key{$ft})::text), '')"
			  . " FROM $ft a WHERE a.$fc IS NOT NULL$cond"
			  . " AND NOT EXISTS (SELECT FROM $tt b WHERE b.$tc = a.$fc)");
		push @broken, "$r->[0]: $out" if $out ne '';
	}
	return join("\n", @broken);
}

sub sandbox_run
{
	my ($conn) = @_;
	return sub {
		my ($ret, $out, $err) = sandbox_psql($node, $conn, $_[0]);
		die "in sandbox: $err" if $ret;
		return $out;
	};
}

# The users and accounts kept rows bring in, in expect.<users>, up a cycle:
# whoever invited a kept user, the account of a kept user, the owner of a
# kept account (expect.<accounts>, made here).
sub close_users_sql
{
	my ($users, $accounts) = @_;
	return qq{
CREATE TABLE expect.$accounts (id int);
DO \$\$ DECLARE n int; total int; BEGIN
  LOOP
    total := 0;
    INSERT INTO expect.$users SELECT DISTINCT u.invited_by FROM users u JOIN expect.$users k USING (id)
      WHERE u.invited_by IN (SELECT id FROM users) AND u.invited_by NOT IN (SELECT id FROM expect.$users);
    GET DIAGNOSTICS n = ROW_COUNT; total := total + n;
    INSERT INTO expect.$accounts SELECT DISTINCT u.account_id FROM users u JOIN expect.$users k USING (id)
      WHERE u.account_id IN (SELECT id FROM accounts) AND u.account_id NOT IN (SELECT id FROM expect.$accounts);
    GET DIAGNOSTICS n = ROW_COUNT; total := total + n;
    INSERT INTO expect.$users SELECT DISTINCT a.owner_id FROM accounts a JOIN expect.$accounts k USING (id)
      WHERE a.owner_id IN (SELECT id FROM users) AND a.owner_id NOT IN (SELECT id FROM expect.$users);
    GET DIAGNOSTICS n = ROW_COUNT; total := total + n;
    EXIT WHEN total = 0;
  END LOOP;
END \$\$;
};
}

# ---------------------------------------------------------------------------
# a subset of users: the rest goes down through the relationships
# ---------------------------------------------------------------------------
sq(q{SELECT pgsandbox.subset('app', 'public.users', 'id % 3 <> 0')});
src(q{
CREATE SCHEMA expect;
CREATE TABLE expect.users AS SELECT id FROM users WHERE id % 3 <> 0;
});
src(close_users_sql('users', 'accounts'));
src(q{
-- down: a row is kept when each of its references is NULL, to a kept row,
-- or to no row of the source (dangling), or its condition does not hold
CREATE TABLE expect.posts AS SELECT id FROM posts p WHERE p.user_id IS NULL
  OR p.user_id IN (SELECT id FROM expect.users) OR p.user_id NOT IN (SELECT id FROM users);
CREATE TABLE expect.photos AS SELECT id FROM photos p WHERE p.user_id IS NULL
  OR p.user_id IN (SELECT id FROM expect.users) OR p.user_id NOT IN (SELECT id FROM users);
CREATE TABLE expect.comments AS SELECT id FROM comments c
  WHERE (c.user_id IS NULL OR c.user_id IN (SELECT id FROM expect.users) OR c.user_id NOT IN (SELECT id FROM users))
    AND (c.commentable_type IS DISTINCT FROM 'Post' OR c.commentable_id IS NULL
         OR c.commentable_id IN (SELECT id FROM expect.posts) OR c.commentable_id NOT IN (SELECT id FROM posts))
    AND (c.commentable_type IS DISTINCT FROM 'Photo' OR c.commentable_id IS NULL
         OR c.commentable_id IN (SELECT id FROM expect.photos) OR c.commentable_id NOT IN (SELECT id FROM photos));
CREATE TABLE expect.taggings AS SELECT post_id, tag_name FROM taggings t WHERE t.post_id IS NULL
  OR t.post_id IN (SELECT id FROM expect.posts) OR t.post_id NOT IN (SELECT id FROM posts);
CREATE TABLE expect.events AS SELECT id FROM events e WHERE e.user_id IS NULL
  OR e.user_id IN (SELECT id FROM expect.users) OR e.user_id NOT IN (SELECT id FROM users);
CREATE TABLE expect.event_notes AS SELECT id FROM event_notes n WHERE n.event_id IS NULL
  OR n.event_id IN (SELECT id FROM expect.events) OR n.event_id NOT IN (SELECT id FROM events);
});
my %expected;
foreach my $t (sort keys %key)
{
	my $from = src("SELECT to_regclass('expect.$t') IS NOT NULL") eq 't' ? "expect.$t" : $t;
	$expected{$t} = rows_in(\&src, $t, $from);
}
ok((split /:/, $expected{users})[0] >= 100 && (split /:/, $expected{users})[0] < 200
	  && (split /:/, $expected{comments})[0] < 800 && (split /:/, $expected{comments})[0] > 200
	  && (split /:/, $expected{event_notes})[0] < 400 && (split /:/, $expected{event_notes})[0] > 100,
	"the expected sets are a part of the source: users $expected{users}, comments $expected{comments}, event notes $expected{event_notes}");

my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
ok($sbx, 'a reduced clone of a source with no foreign key succeeds');
foreach my $t (sort keys %key)
{
	is(sandbox_rows($conn, $t), $expected{$t}, "table $t keeps exactly the rows the rules and the relationships define");
}
is(sandbox_rows($conn, 'tags'), rows_in(\&src, 'tags', 'tags'), 'a table only a down table refers to is copied whole');
is(sq("SELECT reduced FROM pgsandbox.sandboxes WHERE name = '$sbx'"), 't', 'the sandbox is reduced');

# Every relationship holds in sandbox $sbx, but for the kept references
# that dangle on the source, which its ready event counts.
sub check_relationships_hold
{
	my ($sbx, $conn, $what) = @_;
	my $dangling_on_source = broken_references(\&src);
	my $broken = broken_references(sandbox_run($conn));
	my @kept_dangling;
	foreach my $line (split /\n/, $dangling_on_source)
	{
		my ($rel, $rows) = split /: /, $line, 2;
		my @rows;
		foreach my $row (split / /, $rows)
		{
			my ($t, $k) = split /:/, $row, 2;
			my ($ret, $out, $err) = sandbox_psql($node, $conn,
				"SELECT count(*) FROM $t WHERE ($key{$t})::text = '$k'");
			push @rows, $row if $out eq '1';
		}
		push @kept_dangling, "$rel: " . join(' ', @rows) if @rows;
	}
	is($broken, join("\n", @kept_dangling),
		"$what: every relationship holds in the sandbox, but for the kept references that dangle on the source");
	my $ready = sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$sbx' AND action = 'ready'");
	my %count;
	foreach my $line (@kept_dangling)
	{
		my ($rel, $rows) = split /: /, $line, 2;
		$count{$rel} += scalar(split / /, $rows);
	}
	foreach my $r (@relations)
	{
		my $name = quotemeta("$r->[0] -> $r->[1]");
		my @rows = grep { /^\Q$r->[0]\E: / } @kept_dangling;
		# two relationships from one column: a row dangles through the one
		# whose condition holds
		my $n = 0;
		foreach my $row (map { (split /: /, $_, 2)[1] } @rows)
		{
			foreach my $one (split / /, $row)
			{
				my ($t, $k) = split /:/, $one, 2;
				my $cond = defined $r->[2] ? " AND $r->[2]" : '';
				$n++ if src("SELECT count(*) FROM $t WHERE ($key{$t})::text = '$k'$cond") eq '1';
			}
		}
		if ($n > 0)
		{
			like($ready, qr/relationship $name: $n kept rows? refers? to no row of the source/,
				"$what: the ready event counts the $n dangling references through $r->[0] -> $r->[1]");
		}
		else
		{
			unlike($ready, qr/relationship $name:/, "$what: no dangling reference through $r->[0] -> $r->[1]");
		}
	}
}
like(broken_references(\&src), qr/posts:401.*\n.*comments:901/s, 'the source has dangling references');
check_relationships_hold($sbx, $conn, 'down from users');

# a followed table: the posts of kept users, along the relationship
sq(q{SELECT pgsandbox.subset('app', 'public.users', 'id % 10 = 0')});
sq(q{SELECT pgsandbox.follow('app', 'public.posts')});
src(q{
CREATE TABLE expect.few_users AS SELECT id FROM users WHERE id % 10 = 0;
});
src(close_users_sql('few_users', 'few_accounts'));
src(q{
CREATE TABLE expect.followed_posts AS SELECT id FROM posts WHERE user_id IN (SELECT id FROM expect.few_users);
});
my ($fsbx, $fconn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
is(sandbox_rows($fconn, 'posts') . ' ' . sandbox_rows($fconn, 'users'),
	rows_in(\&src, 'posts', 'expect.followed_posts') . ' ' . rows_in(\&src, 'users', 'expect.few_users'),
	'a follow rule keeps the posts of kept users, along a relationship');
check_relationships_hold($fsbx, $fconn, 'follow');
sq(q{SELECT pgsandbox.unfollow('app', 'public.posts')});

# ---------------------------------------------------------------------------
# a subset of comments: what they refer to comes up, each polymorphic side
# only where its type says so
# ---------------------------------------------------------------------------
sq(q{SELECT pgsandbox.unsubset('app', 'public.users')});
sq(q{SELECT pgsandbox.subset('app', 'public.comments', 'id % 7 = 0')});
src(q{
DROP SCHEMA expect CASCADE;
CREATE SCHEMA expect;
CREATE TABLE expect.comments AS SELECT id FROM comments WHERE id % 7 = 0;
CREATE TABLE expect.posts AS SELECT DISTINCT p.id FROM comments c JOIN expect.comments USING (id)
  JOIN posts p ON p.id = c.commentable_id WHERE c.commentable_type = 'Post';
CREATE TABLE expect.photos AS SELECT DISTINCT p.id FROM comments c JOIN expect.comments USING (id)
  JOIN photos p ON p.id = c.commentable_id WHERE c.commentable_type = 'Photo';
CREATE TABLE expect.users AS
  SELECT c.user_id AS id FROM comments c JOIN expect.comments USING (id)
  UNION SELECT p.user_id FROM posts p JOIN expect.posts USING (id)
  UNION SELECT p.user_id FROM photos p JOIN expect.photos USING (id);
DELETE FROM expect.users WHERE id IS NULL OR id NOT IN (SELECT id FROM users);
});
src(close_users_sql('users', 'accounts'));
src(q{
CREATE TABLE expect.taggings AS SELECT post_id, tag_name FROM taggings t WHERE t.post_id IS NULL
  OR t.post_id IN (SELECT id FROM expect.posts) OR t.post_id NOT IN (SELECT id FROM posts);
CREATE TABLE expect.events AS SELECT id FROM events e WHERE e.user_id IS NULL
  OR e.user_id IN (SELECT id FROM expect.users) OR e.user_id NOT IN (SELECT id FROM users);
CREATE TABLE expect.event_notes AS SELECT id FROM event_notes n WHERE n.event_id IS NULL
  OR n.event_id IN (SELECT id FROM expect.events) OR n.event_id NOT IN (SELECT id FROM events);
});
foreach my $t (sort keys %key)
{
	my $from = src("SELECT to_regclass('expect.$t') IS NOT NULL") eq 't' ? "expect.$t" : $t;
	$expected{$t} = rows_in(\&src, $t, $from);
}
ok((split /:/, $expected{posts})[0] > 0 && (split /:/, $expected{photos})[0] > 0,
	"comments bring posts and photos: $expected{posts}, $expected{photos}");
my ($sbx2, $conn2) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
foreach my $t (sort keys %key)
{
	is(sandbox_rows($conn2, $t), $expected{$t}, "up from comments: table $t keeps exactly the rows it must");
}
check_relationships_hold($sbx2, $conn2, 'up from comments');

# ---------------------------------------------------------------------------
# a referred key that is no longer unique fails the clone, and leaves only
# its failed row
# ---------------------------------------------------------------------------
src('ALTER TABLE tags DROP CONSTRAINT tags_name_key');
my $rows = sq("SELECT count(*) FROM pgsandbox.sandbox");
my ($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('app', schema_only => false)");
like($err, qr/the referred columns of relationship "public\.taggings\(tag_name\) -> public\.tags\(name\)" of source "app" are not unique/,
	'a referred key that is no longer unique fails the clone, naming the relationship');
is(sq("SELECT count(*) - $rows || ' ' || (SELECT status FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1)"
	  . " FROM pgsandbox.sandbox"), '1 failed', 'and leaves only its failed row');
is(untracked_sandboxes($node), '0', 'and no database or role');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.relate('app', 'public.posts(user_id)', 'public.tags(name)')});
like($err, qr/cannot refer to column "name" of table "public\.tags"|are not unique/,
	'and relate() refuses it when set');
src('ALTER TABLE tags ADD UNIQUE (name)');
sq(q{SELECT pgsandbox.unrelate('app', 'public.taggings(tag_name)', 'public.tags(name)')});
my ($sbx3) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
ok($sbx3, 'without it, the clone succeeds again');

# ---------------------------------------------------------------------------
# a reduced clone of 60 tables and 45 relationships, each with references
# that dangle: its ready event holds every count, whole
# ---------------------------------------------------------------------------
my @n = (1 .. 45);
$node->safe_psql('postgres', 'CREATE DATABASE wide');
$node->safe_psql('wide', join("\n",
	(map { "CREATE TABLE w_p$_ (id int PRIMARY KEY, v text);"
		  . " INSERT INTO w_p$_ SELECT g, 'v' || g FROM generate_series(1, 20) g;" } @n),
	(map { "CREATE TABLE w_x$_ (id int); INSERT INTO w_x$_ SELECT generate_series(1, 5);" } 1 .. 14),
	'CREATE TABLE w_main (id int PRIMARY KEY, ' . join(', ', map { "p$_ int" } @n) . ');',
	'INSERT INTO w_main SELECT g, '
	  . join(', ', map { "CASE WHEN g % 2 = 0 THEN 1000 + g + $_ ELSE g END" } @n)
	  . ' FROM generate_series(1, 40) g;'));
sq(q{SELECT pgsandbox.add_source('wide', 'dbname=wide', allow_data => true)});
sq("SELECT pgsandbox.relate('wide', 'public.w_main(p$_)', 'public.w_p$_(id)')") foreach @n;
sq(q{SELECT pgsandbox.subset('wide', 'public.w_main', 'id <= 10')});
my ($wide) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => false)");
my $ready = sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$wide' AND action = 'ready'");
cmp_ok(length($ready), '>', 4096, 'the ready event of 60 tables and 45 relationships is long');
my $missing = 0;
foreach my $i (@n)
{
	my $dangling = $node->safe_psql('wide',
		"SELECT count(*) FROM w_main m WHERE id <= 10 AND NOT EXISTS (SELECT FROM w_p$i p WHERE p.id = m.p$i)");
	$missing++ unless $ready =~ /relationship public\.w_main\(p$i\) -> public\.w_p$i\(id\): $dangling kept rows refer to no row of the source(;|$)/;
}
is($missing, 0, 'it holds the count of every relationship, as the source has it');
unlike($ready, qr/more notes?, past/, 'and left no note out');
sq("SELECT pgsandbox.drop('$wide')");

done_testing();
