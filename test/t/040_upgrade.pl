
# 040_upgrade.pl: ALTER EXTENSION pgsandbox UPDATE from every earlier
# version gives what a fresh install of the current version gives, and the
# sandboxes made before it keep working.
#
# For each earlier version: install it (CREATE EXTENSION ... VERSION, which
# runs the base script and the upgrade chain up to it), add a source, grant it, make a ready
# sandbox, update to the default version; then compare every object of the
# extension (definitions, columns, constraints, indexes, privileges, the
# tables a dump keeps) with a fresh install on another node, log into the
# old sandbox with its credentials, run SQL in it, drop it and clone anew.
# Also: the packaging files agree with the control file, and META.json has
# what the PGXN meta spec 1.0.0 requires.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $top = "$FindBin::RealBin/../..";

# versions compared part by part (0.10 comes after 0.9)
sub version_cmp
{
	my @a = split /\./, $_[0];
	my @b = split /\./, $_[1];
	return $a[0] <=> $b[0] || $a[1] <=> $b[1];
}

# the default version, and every earlier one: the base script's and each
# that the upgrade chain starts from, installed through the chain
my $control = slurp_file("$top/pgsandbox.control");
my ($current) = $control =~ /default_version\s*=\s*'([^']+)'/;
ok(defined $current, "the control file names the default version ($current)");
my @full = sort map { m{/pgsandbox--([0-9.]+)\.sql$} ? $1 : () } glob("$top/pgsandbox--*.sql");
my %steps = map { m{/pgsandbox--([0-9.]+)--([0-9.]+)\.sql$} ? ($1 => $2) : () }
  glob("$top/updates/pgsandbox--*--*.sql");
is_deeply(\@full, [ '0.1', $current ],
	'two full install scripts: the base one and the default version\'s');
my %from = map { $_ => 1 } ('0.1', keys %steps);
my @earlier = sort { version_cmp($a, $b) } grep { $_ ne $current } keys %from;
my $v = '0.1';
$v = $steps{$v} while exists $steps{$v};
is($v, $current, 'the upgrade chain leads from the base script to the default version');
ok(scalar(@earlier) > 0, 'there are earlier versions to upgrade from: ' . join(', ', @earlier));

# PGSANDBOX_UPGRADE_FROM=last tries only the last step: a run of several
# majors tries every earlier version on one of them (test/run-tests.sh),
# since the upgrade scripts are the same SQL on every major
if (($ENV{PGSANDBOX_UPGRADE_FROM} // 'all') eq 'last')
{
	@earlier = ($earlier[-1]);
	note("PGSANDBOX_UPGRADE_FROM=last: from $earlier[0] only");
}

# Everything that makes up the installed extension, one line per fact.
my $describe = q{
WITH ext AS (SELECT oid, extconfig FROM pg_extension WHERE extname = 'pgsandbox'),
members AS (
	SELECT d.classid, d.objid FROM pg_depend d, ext
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
SELECT line FROM (
	SELECT 'member ' || pg_describe_object(classid, objid, 0) AS line FROM members
	UNION ALL
	SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl ' || coalesce(p.proacl::text, 'default')
	  FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
	 WHERE p.prokind IN ('f', 'p')
	UNION ALL
	SELECT 'relation ' || c.relname || ' kind ' || c.relkind::text || ' acl ' || coalesce(c.relacl::text, 'default')
	       || ' options ' || coalesce(c.reloptions::text, '') || ' rls ' || c.relrowsecurity
	  FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
	UNION ALL
	SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
	  FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
	 WHERE c.relkind = 'v'
	UNION ALL
	SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
	       || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '')
	       || ' acl ' || coalesce(a.attacl::text, 'default')
	  FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
	  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
	UNION ALL
	SELECT 'constraint ' || c.relname || ' ' || pg_get_constraintdef(k.oid)
	  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
	  JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
	UNION ALL
	SELECT 'index ' || pg_get_indexdef(i.indexrelid)
	  FROM pg_index i JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = i.indrelid
	UNION ALL
	SELECT 'trigger ' || pg_get_triggerdef(t.oid)
	  FROM pg_trigger t JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = t.tgrelid
	 WHERE NOT t.tgisinternal
	UNION ALL
	SELECT 'comment ' || pg_describe_object(m.classid, m.objid, 0) || ': ' || d.description
	  FROM members m JOIN pg_description d ON d.classoid = m.classid AND d.objoid = m.objid
	UNION ALL
	SELECT 'dumped ' || x::regclass::text FROM ext, unnest(ext.extconfig) x
	UNION ALL
	SELECT 'schema acl ' || coalesce(nspacl::text, 'default') FROM pg_namespace WHERE nspname = 'pgsandbox'
) facts ORDER BY line};

sub facts
{
	my ($node) = @_;
	return [ split /\n/, $node->safe_psql('postgres', $describe) ];
}

my $fresh = sandbox_node('fresh', "pgsandbox.gc_interval = 3600\n");
is($fresh->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox'"),
	$current, "a fresh install is version $current");
my $fresh_facts = facts($fresh);
cmp_ok(scalar(@$fresh_facts), '>', 50, 'the fresh install has its objects described');
$fresh->stop;

# whether version $v is $w or later, part by part (0.10 comes after 0.9)
sub at_least
{
	my ($v, $w) = @_;
	return version_cmp($v, $w) >= 0;
}

foreach my $from (@earlier)
{
	my $node = sandbox_node("from_$from", "pgsandbox.gc_interval = 3600\n", $from);
	$node->safe_psql('postgres', q{
CREATE DATABASE shop;
CREATE ROLE dev LOGIN PASSWORD 'dev-pw-40' IN ROLE pgsandbox_user;
SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
SELECT pgsandbox.grant_source('shop', 'dev');
});
	$node->safe_psql('shop',
		'CREATE TABLE item (id int PRIMARY KEY, name text); INSERT INTO item SELECT g, md5(g::text) FROM generate_series(1, 50) g');
	my $dev = $node->connstr('postgres') . ' user=dev password=dev-pw-40';
	my ($rc, $out, $err) = sandbox_psql($node, $dev,
		"SELECT name || ' ' || conninfo FROM pgsandbox.clone('shop', schema_only => false)");
	is($rc, 0, "from $from: a sandbox is made before the update") or diag $err;
	my ($old, $old_conninfo) = split / /, $out, 2;
	my $kept = $node->safe_psql('postgres', 'SELECT pgsandbox.clone(\'shop\')');
	# a snapshot taken before the update (from 0.3 on)
	my $old_snapshot;
	if (at_least($from, '0.3'))
	{
		$node->safe_psql('postgres', "SELECT pgsandbox.snapshot('shop', schema_only => true)");
		$old_snapshot = $node->safe_psql('postgres', "SELECT max(id) FROM pgsandbox.sandbox WHERE kind = 'snapshot'");
	}

	$node->safe_psql('postgres', 'ALTER EXTENSION pgsandbox UPDATE');
	is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox'"),
		$current, "from $from: ALTER EXTENSION UPDATE reaches $current");
	is_deeply(facts($node), $fresh_facts,
		"from $from: every object matches a fresh install of $current");

	if (defined $old_snapshot)
	{
		my $from_old = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('shop')");
		is($node->safe_psql('postgres', "SELECT snapshot_id FROM pgsandbox.sandbox WHERE name = '$from_old'"),
			$old_snapshot, "from $from: the snapshot taken before the update still serves clones");
	}

	# the sandbox made before the update still works
	my (undef, $rows) = sandbox_psql($node, $old_conninfo // '', 'SELECT count(*) FROM item');
	is($rows, '50', "from $from: the old sandbox's credentials still log in, its rows are there");
	($rc, $out, $err) = sandbox_psql($node, $dev,
		"SELECT pgsandbox.run_sql('$old', 'SELECT count(*) FROM item') -> 'results' -> 0 -> 'rows' -> 0 ->> 0");
	is($out, '50', "from $from: run_sql works in the old sandbox") or diag $err;
	# it resets and saves like a new one (0.8)
	sandbox_psql($node, $old_conninfo // '', 'DELETE FROM item WHERE id > 10');
	($rc, $out, $err) = sandbox_psql($node, $dev,
		"SELECT pgsandbox.save('$old', 'ten') IS NOT NULL, pgsandbox.reset('$old') IS NOT NULL");
	is($rc, 0, "from $from: its owner saves it and resets it") or diag $err;
	(undef, $rows) = sandbox_psql($node, $old_conninfo // '', 'SELECT count(*) FROM item');
	is($rows, '50', "from $from: the reset brought its rows back, under the old credentials");
	($rc, $out, $err) = sandbox_psql($node, $dev,
		"SELECT pgsandbox.reset('$old', 'ten') IS NOT NULL");
	(undef, $rows) = sandbox_psql($node, $old_conninfo // '', 'SELECT count(*) FROM item');
	is($rows, '10', "from $from: and a reset to its save brought the saved state") or diag $err;
	($rc, $out, $err) = sandbox_psql($node, $dev, "SELECT pgsandbox.drop('$old')");
	is($rc, 0, "from $from: its owner drops it") or diag $err;
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$old'"),
		'0', "from $from: and its database is gone");
	($rc, $out, $err) = sandbox_psql($node, $dev, "SELECT name FROM pgsandbox.clone('shop')");
	is($rc, 0, "from $from: a new clone works after the update") or diag $err;
	$node->safe_psql('postgres', "SELECT pgsandbox.snapshot('shop', schema_only => true)");
	my $copy = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('shop')");
	is($node->safe_psql('postgres', "SELECT method FROM pgsandbox.sandboxes WHERE name = '$copy'"),
		'snapshot', "from $from: and so does a clone copied from a snapshot");
	$node->safe_psql('postgres', "SELECT pgsandbox.protect('$copy', now() + interval '1 hour')");
	is( $node->safe_psql('postgres',
			"SELECT protected_until > now() FROM pgsandbox.sandboxes WHERE name = '$copy'"),
		't', "from $from: protect() works after the update");
	is( $node->safe_psql('postgres',
			"SELECT sum(value) FROM pgsandbox.metrics WHERE name = 'pgsandbox_clones_total'"
			  . " AND labels ->> 'outcome' = 'ok'"),
		(defined $old_snapshot ? 3 : 2) + (at_least($from, '0.7') ? 2 : 0),
		"from $from: the metrics count the clones made after the update (and, from 0.7, before)");
	is( $node->safe_psql('postgres',
			"SELECT last_used_at IS NOT NULL FROM pgsandbox.sandboxes WHERE name = '$copy'"),
		't', "from $from: and sandboxes record their last use");

	# masking rules apply to a data clone after the update
	$node->safe_psql('postgres', q{SELECT pgsandbox.mask('shop', 'public.item.name', $$'n' || id$$)});
	my ($masked, $masked_conninfo) = split / /,
	  $node->safe_psql('postgres', "SELECT name || ' ' || conninfo FROM pgsandbox.clone('shop', schema_only => false)"), 2;
	(undef, $rows) = sandbox_psql($node, $masked_conninfo // '', 'SELECT string_agg(name, \',\' ORDER BY id) FROM item WHERE id < 4');
	is($rows . ' ' . $node->safe_psql('postgres', "SELECT masked FROM pgsandbox.sandboxes WHERE name = '$masked'"),
		'n1,n2,n3 t', "from $from: and a masked clone after the update has masked rows");

	# a dump of the admin database now keeps the grants, the snapshot plans,
	# the rules and the sources' generations too
	my $dump = $node->safe_psql('postgres', q{
SELECT string_agg(x::regclass::text, ',' ORDER BY x::regclass::text) FROM pg_extension, unnest(extconfig) x
 WHERE extname = 'pgsandbox'});
	is($dump, 'pgsandbox.snapshot_plan,pgsandbox.source,pgsandbox.source_generation,pgsandbox.source_grant,'
		  . 'pgsandbox.source_rule',
		"from $from: the sources, their grants, snapshot plans, rules and generations are kept by pg_dump");
	$node->stop;
}

# ---------------------------------------------------------------------------
# the packaging files
# ---------------------------------------------------------------------------

my $meta = decode_json(slurp_file("$top/META.json"));
foreach my $key (qw(name abstract version maintainer license provides meta-spec))
{
	ok(defined $meta->{$key}, "META.json has $key, as the PGXN meta spec requires");
}
is($meta->{'meta-spec'}{version}, '1.0.0', 'META.json follows meta spec 1.0.0');
is($meta->{name}, 'pgsandbox', 'META.json names the distribution');
like($meta->{version}, qr/^\d+\.\d+\.\d+$/, 'its version is a semantic version');
is($meta->{license}, 'postgresql', 'under the PostgreSQL License');
ok(-f "$top/LICENSE" && slurp_file("$top/LICENSE") =~ /Permission to use, copy, modify, and distribute/,
	'LICENSE holds the license text');
my $provided = $meta->{provides}{pgsandbox};
ok($provided && $provided->{file} && -f "$top/$provided->{file}", 'the extension it provides names a file that exists');
is($provided->{version}, "$current.0", 'the provided version is the control file\'s default version');
is($provided->{file}, "pgsandbox--$current.sql", 'and its file is that version\'s install script');
is($meta->{prereqs}{runtime}{requires}{PostgreSQL}, '15.0.0', 'it needs PostgreSQL 15');

done_testing();
