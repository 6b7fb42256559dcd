
# 037_subset.pl: reduced data clones.
#
# A source with chains of keys, a self-reference, a composite key, keys
# from and into partitioned tables, a cycle of two tables with a nullable
# deferrable key, and a table no key ties to the others.  Subset rules keep
# the orders whose id is a multiple of 10 and half the stores (a stable
# share); a follow rule keeps every staff member of a kept store.  For every
# table the rows of the sandbox are compared with the rows the rules and
# the closure define, computed on the source by a query written here, table
# by table; every foreign key of the source exists in the sandbox (created
# by the restore's post-data section, which checked it); a table no key
# ties is copied whole.  Then: masking together with a subset, a condition
# that names a masked column, a non-superuser admin's condition that reads
# pg_authid, the archive check, snapshots and pools of a subset source, and
# a change of rules that retires them.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('subset', "pgsandbox.max_sandboxes_per_owner = 50\n");
sub sq { return $node->safe_psql('postgres', $_[0]); }
sub src { return $node->safe_psql('shop', $_[0]); }

$node->safe_psql('postgres', 'CREATE DATABASE shop');
src(q{
CREATE TABLE regions (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE customers (id int PRIMARY KEY, region_id int NOT NULL REFERENCES regions,
	email text NOT NULL, referred_by int REFERENCES customers);
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers,
	placed date NOT NULL);
CREATE INDEX ON orders (customer_id);
CREATE TABLE order_lines (order_id int REFERENCES orders, line_no int,
	product_id int NOT NULL REFERENCES products, qty int NOT NULL, PRIMARY KEY (order_id, line_no));
CREATE TABLE shipments (id serial PRIMARY KEY, order_id int NOT NULL, line_no int NOT NULL,
	FOREIGN KEY (order_id, line_no) REFERENCES order_lines);
CREATE TABLE comments (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers,
	parent_id int REFERENCES comments, body text);
CREATE TABLE invoices (id int NOT NULL, order_id int NOT NULL REFERENCES orders, amount numeric,
	PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE invoices_low PARTITION OF invoices FOR VALUES FROM (0) TO (500);
CREATE TABLE invoices_high PARTITION OF invoices FOR VALUES FROM (500) TO (100000);
CREATE TABLE invoice_notes (id serial PRIMARY KEY, invoice_id int NOT NULL REFERENCES invoices, note text);
CREATE TABLE stores (id int PRIMARY KEY, manager_id int);
CREATE TABLE staff (id int PRIMARY KEY, store_id int NOT NULL REFERENCES stores);
CREATE INDEX ON staff (store_id);
ALTER TABLE stores ADD FOREIGN KEY (manager_id) REFERENCES staff DEFERRABLE INITIALLY DEFERRED;
CREATE TABLE settings (key text PRIMARY KEY, value text);

INSERT INTO regions SELECT g, 'region ' || g FROM generate_series(1, 8) g;
INSERT INTO customers SELECT g, 1 + g % 8, 'c' || g || '@shop.test',
	CASE WHEN g > 5 THEN g - 3 END FROM generate_series(1, 300) g;
INSERT INTO products SELECT g, 'product ' || g FROM generate_series(1, 50) g;
INSERT INTO orders SELECT g, 1 + (g * 7) % 300, date '2026-01-01' + g % 300 FROM generate_series(1, 1000) g;
INSERT INTO order_lines SELECT o, l, 1 + (o + l) % 50, l FROM generate_series(1, 1000) o, generate_series(1, 3) l;
INSERT INTO shipments (order_id, line_no) SELECT o, 1 FROM generate_series(1, 1000, 2) o;
INSERT INTO comments SELECT g, 1 + g % 300, CASE WHEN g > 100 THEN g - 100 END, 'comment ' || g
	FROM generate_series(1, 400) g;
INSERT INTO invoices SELECT g, g, g * 2.5 FROM generate_series(1, 1000) g;
INSERT INTO invoice_notes (invoice_id, note) SELECT g, 'note ' || g FROM generate_series(1, 1000, 3) g;
BEGIN;
INSERT INTO stores SELECT g, g * 100 FROM generate_series(1, 20) g;
INSERT INTO staff SELECT s * 100 + k, s FROM generate_series(1, 20) s, generate_series(0, 4) k;
COMMIT;
INSERT INTO settings SELECT 'k' || g, 'v' || g FROM generate_series(1, 10) g;
ANALYZE;
});
sq("SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true)");
sq(q{SELECT pgsandbox.subset('shop', 'public.orders', 'id % 10 = 0')});
sq(q{SELECT pgsandbox.subset('shop', 'public.stores', '50%')});
sq(q{SELECT pgsandbox.follow('shop', 'public.staff')});
is(sq("SELECT string_agg(kind || ' ' || target || ' ' || coalesce(expression, '-'), ', ' ORDER BY kind, target)"
	  . " FROM pgsandbox.source_rules"),
	'follow public.staff -, subset public.orders id % 10 = 0, subset public.stores 50%',
	'the rules are listed in source_rules');

# ---------------------------------------------------------------------------
# what each table must keep, computed on the source, table by table
# ---------------------------------------------------------------------------
src(q{
CREATE SCHEMA expect;
CREATE TABLE expect.orders AS SELECT id FROM orders WHERE id % 10 = 0;
CREATE TABLE expect.customers AS SELECT DISTINCT customer_id AS id FROM orders JOIN expect.orders USING (id);
DO $$ BEGIN
  LOOP  -- up the self-reference: whoever referred a kept customer
    INSERT INTO expect.customers SELECT DISTINCT c.referred_by FROM customers c
      JOIN expect.customers k USING (id) WHERE c.referred_by IS NOT NULL
      AND c.referred_by NOT IN (SELECT id FROM expect.customers);
    EXIT WHEN NOT FOUND;
  END LOOP;
END $$;
CREATE TABLE expect.regions AS SELECT DISTINCT region_id AS id FROM customers JOIN expect.customers USING (id);
CREATE TABLE expect.order_lines AS SELECT order_id, line_no FROM order_lines WHERE order_id IN (SELECT id FROM expect.orders);
CREATE TABLE expect.shipments AS SELECT id FROM shipments WHERE (order_id, line_no) IN (SELECT * FROM expect.order_lines);
CREATE TABLE expect.invoices AS SELECT id FROM invoices WHERE order_id IN (SELECT id FROM expect.orders);
CREATE TABLE expect.invoice_notes AS SELECT id FROM invoice_notes WHERE invoice_id IN (SELECT id FROM expect.invoices);
-- comments: of kept customers, whose parent (if any) is kept, from the roots down
CREATE TABLE expect.comments AS SELECT id FROM comments
  WHERE customer_id IN (SELECT id FROM expect.customers) AND parent_id IS NULL;
DO $$ BEGIN
  LOOP
    INSERT INTO expect.comments SELECT c.id FROM comments c
      WHERE c.customer_id IN (SELECT id FROM expect.customers)
        AND c.parent_id IN (SELECT id FROM expect.comments)
        AND c.id NOT IN (SELECT id FROM expect.comments);
    EXIT WHEN NOT FOUND;
  END LOOP;
END $$;
-- half the stores by the documented hash of the primary key (an int: the
-- server's hashint4); every staff member of a kept store (follow); the stores
-- of kept staff (up)
CREATE TABLE expect.stores AS SELECT id FROM stores
  WHERE ((hashint4(id)::int8 & 4294967295) % 1000000) < 500000;
CREATE TABLE expect.staff (id int);
DO $$ BEGIN
  LOOP
    INSERT INTO expect.staff SELECT s.id FROM staff s WHERE s.store_id IN (SELECT id FROM expect.stores)
      AND s.id NOT IN (SELECT id FROM expect.staff)
    UNION SELECT st.manager_id FROM stores st WHERE st.id IN (SELECT id FROM expect.stores)
      AND st.manager_id NOT IN (SELECT id FROM expect.staff);
    INSERT INTO expect.stores SELECT DISTINCT s.store_id FROM staff s
      WHERE s.id IN (SELECT id FROM expect.staff) AND s.store_id NOT IN (SELECT id FROM expect.stores);
    EXIT WHEN NOT FOUND AND (SELECT count(*) FROM staff s WHERE s.store_id IN (SELECT id FROM expect.stores)
      AND s.id NOT IN (SELECT id FROM expect.staff)) = 0;
  END LOOP;
END $$;
});

my %key = (
	regions => 'id', customers => 'id', products => 'id', orders => 'id',
	order_lines => 'order_id, line_no', shipments => 'id', comments => 'id',
	invoices => 'id', invoice_notes => 'id', stores => 'id', staff => 'id',
	settings => 'key');
my %expected;
foreach my $t (sort keys %key)
{
	my $from = $node->safe_psql('shop', "SELECT to_regclass('expect.$t') IS NOT NULL") eq 't' ? "expect.$t" : $t;
	$expected{$t} = src("SELECT count(*) || ':' || coalesce(md5(string_agg(($key{$t})::text, ',' ORDER BY $key{$t})), '')"
		  . " FROM (SELECT $key{$t} FROM $from) s");
}
ok((split /:/, $expected{orders})[0] == 100 && (split /:/, $expected{stores})[0] > 3
	  && (split /:/, $expected{stores})[0] < 18,
	"the expected sets are a part of the source: $expected{orders}, stores $expected{stores}");

sub rows_of
{
	my ($conn, $t) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conn,
		"SELECT count(*) || ':' || coalesce(md5(string_agg(($key{$t})::text, ',' ORDER BY $key{$t})), '') FROM (SELECT $key{$t} FROM $t) s");
	die "in sandbox: $err" if $ret;
	return $out;
}

my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
ok($sbx, 'the reduced clone succeeds');
foreach my $t (sort keys %key)
{
	is(rows_of($conn, $t), $expected{$t}, "table $t keeps exactly the rows the rules and the keys define");
}
is(rows_of($conn, 'settings'), src("SELECT count(*) || ':' || md5(string_agg(key::text, ',' ORDER BY key)) FROM settings"),
	'a table no key ties to a reduced one is copied whole');
is(rows_of($conn, 'products'), src("SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM products"),
	'a table only a down table refers to is copied whole');
my $fk_q = q{SELECT count(*) || ' ' || string_agg(conname, ',' ORDER BY conname) FROM pg_constraint
	WHERE contype = 'f' AND conparentid = 0 AND connamespace = 'public'::regnamespace};
my ($ret, $out, $err) = sandbox_psql($node, $conn, $fk_q);
is($out, src($fk_q), 'every foreign key of the source exists in the sandbox, created after the rows');
($ret, $out, $err) = sandbox_psql($node, $conn, q{SELECT count(*) FROM stores WHERE manager_id IS NOT NULL
	AND manager_id NOT IN (SELECT id FROM staff)});
is($out, '0', 'the deferrable key of the cycle holds');
is(sq("SELECT method || ' ' || reduced FROM pgsandbox.sandboxes WHERE name = '$sbx'"), 'dump true',
	'the sandboxes view says the sandbox is reduced');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$sbx' AND action = 'ready'"),
	qr/reduced \d+ tables \(rows kept of the source's estimate\):.* public\.orders 100 of ~1000/,
	'the ready event gives the rows kept against the estimate');
my ($sbx2, $conn2) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
is(rows_of($conn2, 'stores') . ' ' . rows_of($conn2, 'staff'), rows_of($conn, 'stores') . ' ' . rows_of($conn, 'staff'),
	'a second clone keeps the same share of rows');
# a bound on a followed table: its managers come up with their stores, and
# at most 2 more staff members are followed
sq(q{SELECT pgsandbox.follow('shop', 'public.staff', 2)});
my (undef, $bconn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
my $kept_stores = (split /:/, rows_of($bconn, 'stores'))[0];
is($kept_stores, (split /:/, $expected{stores})[0], 'with a bound, the same stores are kept');
is((split /:/, rows_of($bconn, 'staff'))[0], $kept_stores + 2,
	'and their managers, and 2 staff members followed');
sq(q{SELECT pgsandbox.follow('shop', 'public.staff')});

# a reset dumps the slice again; a save keeps it, and its copies say so
src('UPDATE orders SET placed = placed + 1 WHERE id = 10');
my ($ret0, $out0, $err0) = sandbox_psql($node, $conn, 'DELETE FROM shipments; DELETE FROM order_lines');
sq("SELECT pgsandbox.reset('$sbx')");
is(rows_of($conn, 'order_lines') . ' ' . rows_of($conn, 'customers'), "$expected{order_lines} $expected{customers}",
	'a reset of a reduced sandbox brings back the same slice');
is(sq("SELECT reduced FROM pgsandbox.sandboxes WHERE name = '$sbx'"), 't', 'and it is still reduced');
my $save = sq("SELECT pgsandbox.save('$sbx', 'slice')");
my ($from_save, $from_save_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone(from_save => '$save')");
is(sq("SELECT method || ' ' || reduced FROM pgsandbox.sandboxes WHERE name = '$from_save'") . ' '
	  . rows_of($from_save_conn, 'orders'), "save true $expected{orders}", 'a clone of its save is reduced too');
my $so = sq("SELECT name FROM pgsandbox.clone('shop')");
is(sq("SELECT reduced FROM pgsandbox.sandboxes WHERE name = '$so'"), 'f', 'a schema-only clone is not reduced');

# ---------------------------------------------------------------------------
# with masking
# ---------------------------------------------------------------------------
sq(q{SELECT pgsandbox.mask('shop', 'public.customers.email', $$'user' || id || '@example.invalid'$$)});
my ($m, $mconn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
($ret, $out, $err) = sandbox_psql($node, $mconn,
	q{SELECT count(*) || ' ' || count(*) FILTER (WHERE email LIKE '%@shop.test') FROM customers});
is($out, (split /:/, $expected{customers})[0] . ' 0', 'a masked and reduced clone: no real value of the masked column');
is(rows_of($mconn, 'customers'), $expected{customers}, 'and the same rows');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.subset('shop', 'public.customers', $$email LIKE 'c1%'$$)});
like($err, qr/subset condition for "public\.customers" names masked column "email"/,
	'a condition may not name a masked column');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.subset('shop', 'public.customers', $$customers::text LIKE '%c1%'$$)});
like($err, qr/subset condition for "public\.customers" names masked column "email"/,
	'nor a condition that reads the whole row');
sq(q{SELECT pgsandbox.unmask('shop', 'public.customers.email')});
sq(q{SELECT pgsandbox.subset('shop', 'public.customers', $$email LIKE 'c1%' OR id > 0$$)});
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT pgsandbox.mask('shop', 'public.customers.email', $$'x'$$)});
like($err, qr/cannot mask column "email": the subset condition of table public\.customers names it/,
	'nor may a column a condition names be masked');
sq(q{SELECT pgsandbox.unsubset('shop', 'public.customers')});

# ---------------------------------------------------------------------------
# bad rules are refused, and change nothing
# ---------------------------------------------------------------------------
sq("CREATE ROLE lesser LOGIN PASSWORD 'lesser-pw' IN ROLE pgsandbox_admin");
my $before = sq("SELECT count(*) FROM pgsandbox.source_rule");
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=lesser password=lesser-pw',
	q{SELECT pgsandbox.subset('shop', 'public.orders', $$id IN (SELECT 1 FROM pg_authid)$$)});
like($err, qr/subset condition uses .*, which only a superuser's rule may use/,
	'a non-superuser admin\'s condition that reads pg_authid is refused');
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=lesser password=lesser-pw',
	q{SELECT pgsandbox.subset('shop', 'public.orders', $$pg_catalog.pg_read_file('x') IS NOT NULL$$)});
like($err, qr/which only a superuser's rule may use/, 'and one that calls a function it may not');
foreach my $bad (
	[ q{'public.nosuch', 'true'}, qr/table "public\.nosuch" does not exist in source "shop"/ ],
	[ q{'public.invoices_low', 'true'}, qr/table "public\.invoices_low" is a partition/ ],
	[ q{'orders', 'true'}, qr/invalid table "orders"/ ],
	[ q{'public.orders', '0%'}, qr/invalid share of rows "0%"/ ],
	[ q{'public.orders', '101%'}, qr/invalid share of rows "101%"/ ],
	[ q{'public.orders', 'id + 1'}, qr/subset condition for "public\.orders" fails in source "shop"/ ],
	[ q{'public.orders', 'true; DROP TABLE orders'}, qr/subset condition (must be a single SQL expression|is not valid SQL)/ ],)
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.subset('shop', $bad->[0])");
	like($err, $bad->[1], "subset('shop', $bad->[0]) is refused");
}
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.unsubset('shop', 'public.regions')");
like($err, qr/source "shop" has no subset rule for "public\.regions"/, 'unsubset() of no rule is refused');
is(sq("SELECT count(*) FROM pgsandbox.source_rule"), $before, 'the refused rules changed nothing');

# a condition that fails on a row: the error gives the SQLSTATE, not the
# source's message, which would quote the row's value
sq(q{SELECT pgsandbox.subset('shop', 'public.orders', $$(CASE WHEN id = 500 THEN 'secret-500' ELSE '1' END)::int > 0$$)});
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
like($err, qr/the subset condition of table public\.orders fails on a row of source "shop".*SQLSTATE 22P02/s,
	'a condition that fails on a row fails the clone, with the SQLSTATE');
unlike($err . sq("SELECT coalesce(error, '') FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1"), qr/secret-500/,
	'and no value of the row reaches the error');
sq(q{SELECT pgsandbox.subset('shop', 'public.orders', 'id % 10 = 0')});

# rules that contradict each other fail the clone, naming both
sq(q{SELECT pgsandbox.exclude_data('shop', 'public.invoices_high')});
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
like($err, qr/exclude_data leaves out the rows of partition public\.invoices_high of table public\.invoices of source "shop", which subset rules reduce/,
	'a partition of a reduced table that exclude_data empties fails the clone');
is(untracked_sandboxes($node), '0', 'and leaves no database or role');
sq(q{SELECT pgsandbox.include_data('shop', 'public.invoices_high')});

# ---------------------------------------------------------------------------
# the archive check: the rows of a reduced table in pg_dump's archive fail
# the clone before anything is restored (a pg_dump that ignores exclusions)
# ---------------------------------------------------------------------------
my $wrap = pg_dump_keeping_all_rows($node);
set_bin_dir($node, $wrap);
my $rows = sq("SELECT count(*) FROM pgsandbox.sandbox");
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('shop', schema_only => false)");
like($err, qr/the source's archive holds the rows of a table that subset rules cover/,
	'a dump that holds the rows of a reduced table fails the clone before restoring');
is(sq("SELECT count(*) - $rows || ' ' || (SELECT status FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1)"
	  . " FROM pgsandbox.sandbox"), '1 failed', 'and leaves only its failed row');
is(untracked_sandboxes($node), '0', 'and no database or role');
set_bin_dir($node, '');

# ---------------------------------------------------------------------------
# snapshots and pools hold the subset; a change of rules retires them
# ---------------------------------------------------------------------------
sq("SELECT pgsandbox.snapshot('shop')");
my ($copy, $copy_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
is(sq("SELECT method || ' ' || reduced FROM pgsandbox.sandboxes WHERE name = '$copy'"), 'snapshot true',
	'a copy of the snapshot of a subset source is reduced');
is(rows_of($copy_conn, 'orders') . ' ' . rows_of($copy_conn, 'shipments'), "$expected{orders} $expected{shipments}",
	'and holds the subset');
sq("SELECT pgsandbox.set_pool('shop', 1, schema_only => false)");
ok(wait_until(sub { sq("SELECT ready FROM pgsandbox.pools WHERE source = 'shop'") eq '1' }, 90),
	'the pool is filled');
my ($member, $member_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
is(sq("SELECT method || ' ' || reduced FROM pgsandbox.sandboxes WHERE name = '$member'") . ' '
	  . rows_of($member_conn, 'invoice_notes'), "pool true $expected{invoice_notes}",
	'a pool member handed out holds the subset');
sq("SELECT pgsandbox.set_pool('shop', 0, schema_only => false)");
my $snap = sq("SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'");
sq(q{SELECT pgsandbox.subset('shop', 'public.orders', 'id % 20 = 0')});
my ($after, $after_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
is((split /:/, rows_of($after_conn, 'orders'))[0], '50', 'a clone after the change of rules follows the new rules');
ok(wait_until(sub { sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$snap'") eq 'dropped' }, 90),
	'the snapshot made under the old rules is retired and dropped');
is(untracked_sandboxes($node), '0', 'nothing is left untracked');

# ---------------------------------------------------------------------------
# a share of pages: the rows on the pages TABLESAMPLE SYSTEM chooses; a
# share of rows of a bigint key (hashint8), with the rows kept rows need
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE visits');
sub vq { return $node->safe_psql('visits', $_[0]); }
# a key between columns of two collations (compared in the referenced one's)
vq(q{
CREATE TABLE urls (id bigint PRIMARY KEY, url text NOT NULL);
CREATE TABLE tags (name text COLLATE "C" PRIMARY KEY);
CREATE TABLE visits (id bigint PRIMARY KEY, url_id bigint NOT NULL REFERENCES urls, at timestamptz,
	tag text COLLATE "POSIX" REFERENCES tags);
INSERT INTO urls SELECT g, 'https://example.invalid/' || g || repeat('x', 40) FROM generate_series(1, 20000) g;
INSERT INTO tags SELECT 'tag ' || g FROM generate_series(1, 300) g;
INSERT INTO visits SELECT g, 1 + (g * 7919) % 20000, now(), 'tag ' || (1 + g % 300) FROM generate_series(1, 20000) g;
VACUUM ANALYZE;
});
sq("SELECT pgsandbox.add_source('visits', 'dbname=visits', allow_data => true)");
sq(q{SELECT pgsandbox.subset('visits', 'public.visits', ' 10 % OF  pages ')});
sq(q{SELECT pgsandbox.subset('visits', 'public.urls', '5%')});
my $sampled = q{SELECT id, url_id, tag FROM visits TABLESAMPLE SYSTEM (10) REPEATABLE (0)};
my %vexpect = (
	tags => vq("SELECT count(*) || ':' || md5(string_agg(id, ',' ORDER BY id)) FROM (SELECT DISTINCT tag AS id FROM ($sampled) s) t"),
	visits => vq("SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM ($sampled) s"),
	urls => vq("SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM ("
		  . "SELECT url_id AS id FROM ($sampled) s UNION"
		  . " SELECT id FROM urls WHERE ((hashint8(id)::int8 & 4294967295) % 1000000) < 50000) u"));
my $vpages = vq("SELECT count(DISTINCT (v.ctid::text::point)[0]) || ' of ' || pg_relation_size('visits') / 8192"
	  . " FROM ($sampled) s JOIN visits v USING (id)");
my ($vcount) = split /:/, $vexpect{visits};
ok($vcount > 500 && $vcount < 5000, "a tenth of the pages holds a part of the rows ($vcount, on $vpages pages)");
my ($vs, $vconn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('visits', schema_only => false)");
foreach my $t (sort keys %vexpect)
{
	my $id = $t eq 'tags' ? 'name' : 'id';
	($ret, $out, $err) = sandbox_psql($node, $vconn,
		"SELECT count(*) || ':' || md5(string_agg(${id}::text, ',' ORDER BY $id)) FROM $t");
	is($out, $vexpect{$t}, "table $t keeps exactly the rows of the pages and of the share, and those they need")
	  or diag $err;
}
($ret, $out, $err) = sandbox_psql($node, $vconn, 'SELECT count(*) FROM visits WHERE url_id NOT IN (SELECT id FROM urls)');
is($out, '0', 'every visit\'s url is there');
my (undef, $vconn2) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('visits', schema_only => false)");
($ret, $out, $err) = sandbox_psql($node, $vconn2,
	"SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM visits");
is($out, $vexpect{visits}, 'a second clone of the same source state keeps the same pages');
foreach my $bad (q{'0% of pages'}, q{'100.5% of pages'}, q{'of pages'})
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.subset('visits', 'public.visits', $bad)");
	like($err, qr/invalid share of rows|subset condition (must be|is not valid SQL)/, "subset(..., $bad) is refused");
}

# a rule that is not ASCII, for a source in another encoding than the admin
# database's: refused when it is set, and at clone time
$node->safe_psql('postgres',
	q{CREATE DATABASE shop_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('shop_latin1', q{CREATE TABLE people (id int PRIMARY KEY, name text);
INSERT INTO people SELECT g, 'name ' || g FROM generate_series(1, 10) g;});
sq("SELECT pgsandbox.add_source('shop_latin1', 'dbname=shop_latin1', allow_data => true)");
my $e_acute = "\xc3\xa9";    # in UTF-8, as psql sends it
($ret, $out, $err) = $node->psql('postgres',
	"SELECT pgsandbox.subset('shop_latin1', 'public.people', \$\$name <> 'Ren${e_acute}e'\$\$)");
like($err,
	qr/subset rule for "public\.people" is not ASCII, and the encoding of source "shop_latin1" is not the admin database's/,
	'subset() refuses a condition that is not ASCII for a source in another encoding');
sq(q{SELECT pgsandbox.subset('shop_latin1', 'public.people', $$name <> 'Renee'$$)});
sq("UPDATE pgsandbox.source_rule SET expression = \$\$name <> 'Ren${e_acute}e'\$\$ WHERE source = 'shop_latin1'");
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('shop_latin1', schema_only => false)");
like($err, qr/subset rule "public\.people" of source "shop_latin1" is not ASCII/,
	'a clone with a condition that is not ASCII fails, naming the rule');
is(untracked_sandboxes($node), '0', 'and leaves no database or role');

done_testing();
