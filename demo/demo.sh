#!/usr/bin/env bash
#
# demo.sh: a guided tour of pgsandbox on a throwaway PostgreSQL 15 cluster.
#
# Run as root from the repository root on Debian 12:
#
#     sudo bash demo/demo.sh
#
# It installs what it needs (test/install-deps.sh), builds and installs the
# extension, starts a private cluster as the "postgres" OS user in a fresh
# temporary directory, makes a small source database "shop", clones it into
# a sandbox, works in the sandbox with the sandbox's own login, resets it in
# place, waits for the background worker to drop the sandbox when its time
# is up, and then sets a pool of ready sandboxes and has one handed out,
# makes a masked clone, and a reduced one through relationships the schema
# does not declare, with a masked key.  The cluster is stopped and the
# directory removed at the end, also on failure.
#
# Environment:
#   PORT             port of the throwaway cluster (default 5520); it listens
#                    only on a Unix socket in its own directory
#   DEMO_SKIP_BUILD  set to 1 to use the pgsandbox already installed instead
#                    of running make and make install
#
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${PORT:-5520}
pgbin=/usr/lib/postgresql/15/bin
ttl='15 seconds'
ttl_secs=15
gc_interval_secs=2

# Nothing from the caller's environment may steer a connection.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^PG' || true)

if [ -t 1 ]; then
	bold=$'\033[1m' dim=$'\033[2m' red=$'\033[31m' green=$'\033[32m' off=$'\033[0m'
else
	bold='' dim='' red='' green='' off=''
fi

section()
{
	printf '\n%s==== %s ====%s\n' "$bold" "$*" "$off"
}

say()
{
	printf '%s\n' "$*"
}

ok()
{
	printf '  %sok%s  %s\n' "$green" "$off" "$*"
}

die()
{
	printf '\n%sdemo failed: %s%s\n' "$red" "$*" "$off" >&2
	exit 1
}

indent()
{
	sed 's/^/    /'
}

trap 'printf "\n%sdemo failed: the command at line %s exited with status %s%s\n" "$red" "$LINENO" "$?" "$off" >&2' ERR

if [ "$(id -u)" != 0 ]; then
	echo "demo.sh must run as root (it installs packages): sudo bash demo/demo.sh" >&2
	exit 1
fi
case $port in
	'' | *[!0-9]*) die "PORT must be a number, not \"$port\"" ;;
esac

###########################################################################
section "1. Install dependencies, build and install pgsandbox"
###########################################################################

say "Debian packages (PostgreSQL 15 server, client and headers, libpq, make, gcc):"
bash "$repo/test/install-deps.sh"
ok "packages present"

if [ "${DEMO_SKIP_BUILD:-0}" = 1 ]; then
	say "DEMO_SKIP_BUILD=1: using the pgsandbox already installed."
else
	say "make && make install in $repo"
	make -C "$repo" -s PG_CONFIG="$pgbin/pg_config"
	make -C "$repo" -s PG_CONFIG="$pgbin/pg_config" install
fi
pkglibdir=$("$pgbin/pg_config" --pkglibdir)
[ -f "$pkglibdir/pgsandbox.so" ] || die "pgsandbox.so is not installed in $pkglibdir"
[ -f "$("$pgbin/pg_config" --sharedir)/extension/pgsandbox.control" ] ||
	die "pgsandbox.control is not installed"
ok "pgsandbox installed in $pkglibdir"
id postgres >/dev/null 2>&1 || die "there is no \"postgres\" OS user"

###########################################################################
section "2. Start a throwaway PostgreSQL 15 cluster"
###########################################################################

tmp=$(mktemp -d /tmp/pgsandbox-demo.XXXXXX)
data=$tmp/data
sock=$tmp/sock
log=$tmp/server.log
started=0

cleanup()
{
	local status=$?

	set +e
	trap - EXIT INT TERM ERR
	if [ "$started" = 1 ]; then
		if [ $status -ne 0 ] && [ -f "$log" ]; then
			printf '\nLast lines of the server log:\n' >&2
			tail -n 30 "$log" | indent >&2
		fi
		printf '\n%sStopping the throwaway cluster%s\n' "$dim" "$off"
		if ! runuser -u postgres -- "$pgbin/pg_ctl" -D "$data" -m fast -w -t 300 stop >/dev/null; then
			# the postmaster we started did not stop in time
			pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
			[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
		fi
	fi
	printf '%sRemoving %s%s\n' "$dim" "$tmp" "$off"
	rm -rf "$tmp"
	exit $status
}
trap cleanup EXIT
trap 'printf "\ninterrupted\n" >&2; exit 130' INT
trap 'printf "\nterminated\n" >&2; exit 143' TERM

mkdir "$sock"
chown -R postgres: "$tmp"
# the postgres user may not be able to enter the directory we were run from
cd "$tmp"

as_postgres()
{
	runuser -u postgres -- "$@"
}

say "initdb in $data, as the postgres OS user (the server refuses to run as root)"
as_postgres "$pgbin/initdb" -D "$data" -U postgres -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; die "initdb failed"; }

cat >>"$data/postgresql.conf" <<EOF

# pgsandbox demo
shared_preload_libraries = 'pgsandbox'
pgsandbox.gc_interval = ${gc_interval_secs}s
listen_addresses = ''
unix_socket_directories = '$sock'
port = $port
EOF

# Trust only the superuser, locally; everyone else, sandbox roles included,
# must give a real password.
cat >"$data/pg_hba.conf" <<EOF
# TYPE  DATABASE  USER      METHOD
local   all       postgres  trust
local   all       all       scram-sha-256
EOF
chown postgres: "$data/postgresql.conf" "$data/pg_hba.conf"

say "settings added to postgresql.conf:"
sed -n '/^# pgsandbox demo/,$p' "$data/postgresql.conf" | indent
say "pg_hba.conf:"
indent <"$data/pg_hba.conf"

started=1
as_postgres "$pgbin/pg_ctl" -D "$data" -l "$log" -w -t 300 start >/dev/null ||
	die "the server did not start"
ok "server running: socket directory $sock, port $port"

# psql as the superuser; -e echoes each statement before its result
admin()
{
	local db=$1

	shift
	as_postgres "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off \
		-h "$sock" -p "$port" -U postgres -d "$db" "$@"
}

# one value from the superuser's session
admin_value()
{
	admin "$1" -At -c "$2"
}

###########################################################################
section "3. A sample source database \"shop\", approved as a clone source"
###########################################################################

say "Creating database shop: customers, orders (with a foreign key), a view, a function."
admin postgres -c 'CREATE DATABASE shop'
admin shop <<'SQL'
CREATE TABLE customers (
	id		integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name	text NOT NULL,
	email	text NOT NULL UNIQUE,
	city	text NOT NULL
);
COMMENT ON TABLE customers IS 'People who buy from the shop';
COMMENT ON COLUMN customers.email IS 'Where receipts are sent';

CREATE TABLE orders (
	id			integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	customer_id	integer NOT NULL REFERENCES customers (id),
	ordered_at	date NOT NULL,
	amount		numeric(10, 2) NOT NULL CHECK (amount > 0)
);
CREATE INDEX orders_customer_id ON orders (customer_id);
COMMENT ON TABLE orders IS 'One row per order; amount in euros';

INSERT INTO customers (name, email, city)
SELECT 'Customer ' || i, 'customer' || i || '@example.com',
	   (ARRAY['Lisbon', 'Oslo', 'Lyon', 'Graz'])[1 + i % 4]
  FROM generate_series(1, 12) AS i;

INSERT INTO orders (customer_id, ordered_at, amount)
SELECT 1 + (i * 7) % 12, date '2024-01-01' + i * 3, 5 + (i * 37) % 200 + 0.99
  FROM generate_series(1, 40) AS i;

CREATE VIEW customer_totals AS
	SELECT c.id, c.name, count(o.id) AS orders, coalesce(sum(o.amount), 0) AS total
	  FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
	 GROUP BY c.id, c.name;
COMMENT ON VIEW customer_totals IS 'Number and sum of the orders of each customer';

CREATE FUNCTION orders_in_city(city text) RETURNS bigint
LANGUAGE sql STABLE
AS $$
	SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id
	 WHERE c.city = orders_in_city.city
$$;
COMMENT ON FUNCTION orders_in_city(text) IS 'How many orders came from a city';
SQL
admin shop -e -c 'SELECT (SELECT count(*) FROM customers) AS customers, (SELECT count(*) FROM orders) AS orders' | indent

src_customers=$(admin_value shop 'SELECT count(*) FROM customers')
src_orders=$(admin_value shop 'SELECT count(*) FROM orders')
# a fingerprint of every row, to compare the clone with
fingerprint_sql="SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM (SELECT 'c', c::text FROM customers c UNION ALL SELECT 'o', o::text FROM orders o) t"
src_fingerprint=$(admin_value shop "$fingerprint_sql")

say
say "Installing the extension in the admin database (postgres) and approving shop."
say "allow_data => true permits copying rows, not only the schema."
admin postgres -e <<'SQL' | indent
CREATE EXTENSION pgsandbox;
SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
SELECT name, allow_data, host, port, dbname, "user" FROM pgsandbox.sources;
SQL

###########################################################################
section "4. Clone shop into a sandbox, with its data"
###########################################################################

clone_sql="SELECT name, conninfo, expires_at
  FROM pgsandbox.clone('shop', schema_only => false, ttl => '$ttl',
                       labels => '{\"task\": \"demo\", \"ticket\": \"DEMO-1\"}');"
say "$clone_sql" | indent
# The result holds the sandbox's password: it is kept in a variable, never
# printed.
row=$(admin postgres -At -F $'\t' -c "SET statement_timeout = '10min'" -c "$clone_sql") ||
	die "clone() failed"
IFS=$'\t' read -r name conninfo expires_at <<<"$row"
unset row
[[ $name =~ ^sbx_[a-z0-9]{8}$ ]] || die "unexpected sandbox name \"$name\""
[[ $conninfo == *"password="* ]] || die "the conninfo has no password"

mask_password()
{
	sed -E "s/password=('([^'\\\\]|\\\\.)*'|[^ ]*)/password=********/"
}
masked=$(mask_password <<<"$conninfo")
password=$(sed -nE "s/.*password=([^ ]*).*/\1/p" <<<"$conninfo")
[ -n "$password" ] && [[ $masked != *"$password"* ]] || die "could not mask the password"
# psql gets the password through its environment, never its command line,
# where anyone on the machine could read it with ps
login=$(sed -E "s/ ?password=('([^'\\\\]|\\\\.)*'|[^ ]*)//" <<<"$conninfo")

say
say "clone() returned when the sandbox was ready:"
say "    name       $name"
say "    conninfo   $masked"
say "    expires_at $expires_at"
say "The conninfo is the only place the password is ever shown; this script"
say "keeps it in a variable and prints it masked."

###########################################################################
section "5. Work in the sandbox, logged in as the sandbox role"
###########################################################################

sandbox()
{
	PGPASSWORD=$password "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off -d "$login" "$@"
}

say "PGPASSWORD=******** psql -d \"$login\"   (the password goes through the environment, not argv)"
sandbox -e <<'SQL' | indent
SELECT current_user, session_user, current_database();
SELECT (SELECT count(*) FROM customers) AS customers,
       (SELECT count(*) FROM orders) AS orders;
-- who owns what was restored
SELECT c.relname AS object,
       CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'S' THEN 'sequence' WHEN 'i' THEN 'index' END AS kind,
       pg_get_userbyid(c.relowner) AS owner
  FROM pg_class c
 WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT p.proname, 'function', pg_get_userbyid(p.proowner)
  FROM pg_proc p
 WHERE p.pronamespace = 'public'::regnamespace
 ORDER BY kind, object;
-- comments, the view and the function came along
SELECT obj_description('orders'::regclass, 'pg_class') AS comment_on_orders,
       orders_in_city('Oslo') AS orders_from_oslo,
       (SELECT max(total) FROM customer_totals) AS best_customer_total;
SQL

[ "$(sandbox -At -c 'SELECT current_user')" = "$name" ] ||
	die "the sandbox session does not run as $name"
[ "$(sandbox -At -c 'SELECT count(*) FROM customers')" = "$src_customers" ] ||
	die "the sandbox does not have the source's $src_customers customers"
[ "$(sandbox -At -c 'SELECT count(*) FROM orders')" = "$src_orders" ] ||
	die "the sandbox does not have the source's $src_orders orders"
[ "$(sandbox -At -c "$fingerprint_sql")" = "$src_fingerprint" ] ||
	die "the sandbox's rows differ from the source's"
not_owned=$(sandbox -At <<'SQL'
WITH me AS (SELECT oid FROM pg_roles WHERE rolname = current_user)
SELECT (SELECT count(*) FROM pg_class
         WHERE relnamespace = 'public'::regnamespace AND relowner <> (TABLE me))
     + (SELECT count(*) FROM pg_proc
         WHERE pronamespace = 'public'::regnamespace AND proowner <> (TABLE me))
SQL
)
[ "$not_owned" = 0 ] || die "$not_owned restored objects are not owned by $name"
ok "logged in as $name with its password"
ok "row counts equal the source's: $src_customers customers, $src_orders orders"
ok "row contents equal the source's (md5 $src_fingerprint)"
ok "every restored table, view, sequence, index and function belongs to $name"

say
say "The password is really checked: the same conninfo with a wrong password fails."
if err=$(PGPASSWORD=not-the-password "$pgbin/psql" -X -At -d "$login" -c 'SELECT 1' 2>&1); then
	die "a wrong password was accepted"
fi
say "$err" | indent
ok "wrong password refused"

say
say "Anything goes in the sandbox, since its role owns it:"
PGOPTIONS='-c client_min_messages=warning' sandbox -e <<'SQL' | indent
DELETE FROM orders;
DROP TABLE customers CASCADE;
SELECT (SELECT count(*) FROM orders) AS orders_left,
       to_regclass('customers') AS customers_table;
SQL
[ "$(sandbox -At -c 'SELECT count(*) FROM orders')" = 0 ] ||
	die "DELETE FROM orders did not empty the sandbox's orders"

say
say "reset() puts it back as it was made, in place: same name, same role, same password"
say "(its sessions are ended; ttl starts its lifetime again):"
admin postgres -e -v name="$name" -v ttl="$ttl_secs seconds" <<'SQL' 2>&1 | indent
SELECT pgsandbox.reset(:'name', ttl => :'ttl') AS data_as_of;
SQL
[ "$(sandbox -At -c "$fingerprint_sql")" = "$src_fingerprint" ] ||
	die "the reset sandbox does not hold the source's rows"
ok "the same conninfo logs in, and the rows equal the source's again (md5 $src_fingerprint)"

say
say "...but the same role cannot change the source (the last dbname wins):"
say "PGPASSWORD=******** psql -d \"$login dbname=shop\" -c 'DELETE FROM orders'"
if err=$(PGPASSWORD=$password "$pgbin/psql" -X -At -v ON_ERROR_STOP=1 -d "$login dbname=shop" -c 'DELETE FROM orders' 2>&1); then
	die "the sandbox role could delete rows of the source"
fi
say "$err" | indent

say
say "The source is untouched:"
admin shop -e -c 'SELECT (SELECT count(*) FROM customers) AS customers, (SELECT count(*) FROM orders) AS orders' | indent
[ "$(admin_value shop 'SELECT count(*) FROM orders')" = "$src_orders" ] &&
	[ "$(admin_value shop 'SELECT count(*) FROM customers')" = "$src_customers" ] &&
	[ "$(admin_value shop "$fingerprint_sql")" = "$src_fingerprint" ] ||
	die "the source changed"
ok "source still has $src_customers customers and $src_orders orders, row for row"

###########################################################################
section "6. What pgsandbox recorded"
###########################################################################

admin postgres -e <<'SQL' | indent
SELECT name, source, schema_only, status, labels,
       expires_at - ready_at AS ttl, pg_size_pretty(size_bytes) AS size
  FROM pgsandbox.sandboxes;
SELECT to_char(at, 'HH24:MI:SS.MS') AS at, sandbox, action, actor, detail
  FROM pgsandbox.events ORDER BY at;
SQL

###########################################################################
section "7. The reaper drops the sandbox when its ttl runs out"
###########################################################################

say "The background worker looks for expired sandboxes every ${gc_interval_secs}s (pgsandbox.gc_interval)."
# On its way the sandbox is "dropping" while the worker drops its database
# and role, which waits for a checkpoint: on a busy machine that can take a
# while, so the deadline is generous.
timeout=$((ttl_secs + 10 * gc_interval_secs + 300))
start=$SECONDS
status=
while :; do
	status='' left=''
	IFS='|' read -r status left < <(admin postgres -At -v name="$name" <<'SQL'
SELECT status, greatest(0, ceil(extract(epoch FROM expires_at - now())))::int
  FROM pgsandbox.sandboxes WHERE name = :'name';
SQL
) || true
	elapsed=$((SECONDS - start))
	if [ "$status" = dropped ]; then
		printf '  [%3ds] status %s\n' "$elapsed" "$status"
		break
	fi
	case $status in
		ready | dropping) ;;
		*) die "sandbox $name is \"$status\", expected ready, dropping or dropped" ;;
	esac
	if [ "$status" = dropping ]; then
		printf '  [%3ds] status %s: the worker is dropping its database and role\n' "$elapsed" "$status"
	elif [ "$left" -gt 0 ]; then
		printf '  [%3ds] status %s, expires in %ss\n' "$elapsed" "$status" "$left"
	else
		printf '  [%3ds] status %s, expired, waiting for the reaper\n' "$elapsed" "$status"
	fi
	[ "$elapsed" -lt "$timeout" ] || die "the sandbox was not dropped within ${timeout}s"
	sleep 1
done
ok "sandbox $name dropped by the worker"

say
say "Its database and its role are gone:"
admin postgres -e -v name="$name" <<'SQL' | indent
SELECT (SELECT count(*) FROM pg_database WHERE datname = :'name') AS databases,
       (SELECT count(*) FROM pg_roles WHERE rolname = :'name') AS roles;
SQL
[ "$(admin postgres -At -v name="$name" <<'SQL'
SELECT (SELECT count(*) FROM pg_database WHERE datname = :'name')
     + (SELECT count(*) FROM pg_roles WHERE rolname = :'name');
SQL
)" = 0 ] || die "the database or the role of $name still exists"
ok "no database and no role named $name"

say
say "and its credentials no longer open anything:"
if err=$(PGPASSWORD=$password "$pgbin/psql" -X -At -d "$login" -c 'SELECT 1' 2>&1); then
	die "the dropped sandbox still accepts logins"
fi
unset conninfo password
say "$err" | indent
ok "login refused"

say
admin postgres -e <<'SQL' | indent
SELECT name, status, ready_at, dropped_at FROM pgsandbox.sandboxes;
SELECT to_char(at, 'HH24:MI:SS.MS') AS at, sandbox, action, actor, detail
  FROM pgsandbox.events ORDER BY at;
SQL
expire_events=$(admin postgres -At -v name="$name" <<'SQL'
SELECT count(*) FROM pgsandbox.events
 WHERE sandbox = :'name' AND action = 'expire' AND actor = 'pgsandbox worker';
SQL
)
[ "$expire_events" = 1 ] || die "expected one 'expire' event by 'pgsandbox worker', found $expire_events"
ok "the events log the expiry, by 'pgsandbox worker'"

say
say "The server log says the same:"
grep -E 'LOG: +pgsandbox' "$log" | indent || true

###########################################################################
section "8. Fast clones: a pool of ready sandboxes, handed out at once"
###########################################################################

say "set_pool() has the worker take a schema-only snapshot of shop and keep two"
say "copies of it ready; clone() then hands one out with a new password."
admin postgres -e -c "SELECT pgsandbox.set_pool('shop', 2)" | indent
start=$SECONDS
until [ "$(admin postgres -At -c "SELECT ready FROM pgsandbox.pools WHERE source = 'shop'")" = 2 ]; do
	[ $((SECONDS - start)) -lt 300 ] || die "the pool did not fill within 300s"
	sleep 0.5
done
admin postgres -e <<'SQL' | indent
SELECT source, schema_only, status, taken_at, pg_size_pretty(size_bytes) AS size FROM pgsandbox.snapshots;
SELECT * FROM pgsandbox.pools;
SQL
t0=$(date +%s%N)
pooled=$(admin postgres -At -c "SELECT name FROM pgsandbox.clone('shop')") || die "clone() from the pool failed"
t1=$(date +%s%N)
method=$(admin postgres -At -v name="$pooled" <<'SQL'
SELECT method FROM pgsandbox.sandboxes WHERE name = :'name';
SQL
)
[ "$method" = pool ] || die "sandbox $pooled came by \"$method\", not from the pool"
ok "sandbox $pooled handed out from the pool in $(( (t1 - t0) / 1000000 )) ms (psql included)"
admin postgres -e -v name="$pooled" <<'SQL' | indent
SELECT name, method, data_as_of, expires_at FROM pgsandbox.sandboxes WHERE name = :'name';
SQL
admin postgres -c "SELECT pgsandbox.drop('$pooled')" -c "SELECT pgsandbox.set_pool('shop', 0)" \
	-c "SELECT pgsandbox.drop_snapshot('shop')" >/dev/null
start=$SECONDS
until [ "$(admin postgres -At -c "SELECT count(*) FROM pgsandbox.sandbox WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready')")" = 0 ]; do
	[ $((SECONDS - start)) -lt 300 ] || die "the pool and its snapshot were not dropped within 300s"
	sleep 0.5
done
ok "set_pool('shop', 0) and drop_snapshot('shop') leave nothing behind"

###########################################################################
section "9. Masked data clones: the real emails never leave the source"
###########################################################################

say "suggest_masks() reads the source and lists the columns that look personal,"
say "each with an expression that keeps the type, NULLs and distinct values:"
admin postgres -e -c "SELECT target, reason FROM pgsandbox.suggest_masks('shop')" | indent
[ "$(admin_value postgres "SELECT count(*) FROM pgsandbox.suggest_masks('shop') WHERE target = 'public.customers.email'")" = 1 ] ||
	die "suggest_masks() did not find customers.email"
ok "suggest_masks() found customers.email"
say
say "Accepting its mask for the email, and one of our own for the name:"
admin postgres -e <<'SQL' | indent
SELECT pgsandbox.mask('shop', s.target, s.expression)
  FROM pgsandbox.suggest_masks('shop') s WHERE s.target = 'public.customers.email';
SELECT pgsandbox.mask('shop', 'public.customers.name', $$left(name, 1) || '. ' || id$$);
SELECT source, kind, target, expression FROM pgsandbox.source_rules;
SQL
row=$(admin postgres -At -F $'\t' -c "SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)") ||
	die "the masked clone failed"
IFS=$'\t' read -r mname mconninfo <<<"$row"
unset row
mpassword=$(sed -nE "s/.*password=([^ ]*).*/\1/p" <<<"$mconninfo")
mlogin=$(sed -E "s/ ?password=('([^'\\\\]|\\\\.)*'|[^ ]*)//" <<<"$mconninfo")
unset mconninfo
say
say "A data clone now reads those columns through the expressions, on the source."
say "In sandbox $mname, logged in as its role:"
PGPASSWORD=$mpassword "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off -d "$mlogin" -e <<'SQL' | indent
SELECT id, name, email, city FROM customers ORDER BY id LIMIT 3;
SELECT count(*) AS real_emails FROM customers WHERE email LIKE '%@example.com';
SQL
[ "$(PGPASSWORD=$mpassword "$pgbin/psql" -X -At -d "$mlogin" -c "SELECT count(*) FROM customers WHERE email LIKE '%@example.com'")" = 0 ] ||
	die "the masked sandbox holds real emails"
[ "$(PGPASSWORD=$mpassword "$pgbin/psql" -X -At -d "$mlogin" -c "SELECT count(*) FROM orders")" = "$src_orders" ] ||
	die "the masked sandbox does not have the source's orders"
unset mpassword
ok "no real email in the sandbox; the orders, unmasked, are all there"
admin postgres -e -v name="$mname" <<'SQL' | indent
SELECT name, method, masked FROM pgsandbox.sandboxes WHERE name = :'name';
SELECT detail FROM pgsandbox.events WHERE sandbox = :'name' AND action = 'ready';
SQL
admin postgres -c "SELECT pgsandbox.drop('$mname')" \
	-c "SELECT pgsandbox.unmask('shop', target) FROM pgsandbox.source_rules WHERE source = 'shop'" >/dev/null
ok "the sandbox dropped and the rules removed"

###########################################################################
section "10. A reduced clone: a slice through a relationship the schema does not declare"
###########################################################################

say "The shop's application adds receipts, and, as many applications do, declares"
say "no foreign key for them: a receipt names its order and the email it went to."
admin shop <<'SQL'
CREATE TABLE receipts (id integer PRIMARY KEY, order_id integer NOT NULL, sent_to text NOT NULL);
INSERT INTO receipts SELECT o.id, o.id, c.email FROM orders o JOIN customers c ON c.id = o.customer_id;
SQL
say "Declaring the two relationships, masking the email as a key (every column tied"
say "to it the same), and keeping only the customers of Oslo:"
admin postgres -e <<'SQL' | indent
SELECT pgsandbox.relate('shop', 'public.receipts(order_id)', 'public.orders(id)');
SELECT pgsandbox.relate('shop', 'public.receipts(sent_to)', 'public.customers(email)');
SELECT pgsandbox.mask_key('shop', 'public.customers.email');
SELECT pgsandbox.subset('shop', 'public.customers', $$city = 'Oslo'$$);
SELECT kind, target, key_mask FROM pgsandbox.source_rules WHERE source = 'shop' ORDER BY kind, target;
SQL
row=$(admin postgres -At -F $'\t' -c "SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)") ||
	die "the reduced clone failed"
IFS=$'\t' read -r rname rconninfo <<<"$row"
unset row
rpassword=$(sed -nE "s/.*password=([^ ]*).*/\1/p" <<<"$rconninfo")
rlogin=$(sed -E "s/ ?password=('([^'\\\\]|\\\\.)*'|[^ ]*)//" <<<"$rconninfo")
unset rconninfo
rvalue() { PGPASSWORD=$rpassword "$pgbin/psql" -X -At -v ON_ERROR_STOP=1 -d "$rlogin" -c "$1"; }
say
say "In sandbox $rname, logged in as its role:"
PGPASSWORD=$rpassword "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off -d "$rlogin" -e <<'SQL' | indent
SELECT c.name, c.email, count(r.id) AS receipts
  FROM customers c LEFT JOIN receipts r ON r.sent_to = c.email GROUP BY 1, 2 ORDER BY 1;
SQL
# the slice, computed on the source
want=$(admin_value shop "SELECT (SELECT count(*) FROM customers WHERE city = 'Oslo') || ' '
	|| (SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city = 'Oslo') || ' '
	|| (SELECT count(*) FROM receipts r JOIN orders o ON o.id = r.order_id JOIN customers c ON c.id = o.customer_id
	     WHERE c.city = 'Oslo')")
got=$(rvalue "SELECT (SELECT count(*) FROM customers) || ' ' || (SELECT count(*) FROM orders) || ' '
	|| (SELECT count(*) FROM receipts)")
[ "$got" = "$want" ] || die "the slice holds $got customers, orders and receipts; the source's Oslo has $want"
[ "$(rvalue "SELECT count(*) FROM customers WHERE city <> 'Oslo'")" = 0 ] || die "the slice holds customers of other cities"
[ "$(rvalue "SELECT count(*) FROM receipts r JOIN customers c ON c.email = r.sent_to JOIN orders o ON o.id = r.order_id
	AND o.customer_id = c.id")" = "$(rvalue 'SELECT count(*) FROM receipts')" ] ||
	die "a receipt of the slice no longer matches its customer's masked email"
[ "$(rvalue "SELECT count(*) FROM customers WHERE email LIKE '%@example.com'")$(rvalue "SELECT count(*) FROM receipts WHERE sent_to LIKE '%@example.com'")" = 00 ] ||
	die "the reduced sandbox holds real emails"
unset rpassword
ok "Oslo's $(cut -d' ' -f1 <<<"$want") customers, their orders and receipts; every receipt matches its customer's masked email"
admin postgres -e -v name="$rname" <<'SQL' | indent
SELECT name, method, masked, reduced FROM pgsandbox.sandboxes WHERE name = :'name';
SQL
admin postgres -c "SELECT pgsandbox.drop('$rname')" \
	-c "SELECT pgsandbox.unsubset('shop', 'public.customers')" \
	-c "SELECT pgsandbox.unmask('shop', 'public.customers.email')" \
	-c "SELECT pgsandbox.unrelate('shop', 'public.receipts(order_id)', 'public.orders(id)')" \
	-c "SELECT pgsandbox.unrelate('shop', 'public.receipts(sent_to)', 'public.customers(email)')" >/dev/null
ok "the sandbox dropped and the rules removed"

section "Done: the demo succeeded"
