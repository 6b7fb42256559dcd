#!/usr/bin/env bash
#
# valgrind.sh: run a throwaway PostgreSQL 15 cluster under valgrind's
# memcheck, drive the worker through clones, a snapshot, idle expiry, a
# sandbox made read-only (and a write it refuses at commit), resets, a save
# and a clone of it, drops held by other roles (a janitor in another
# database, a blocked role dropped by a later pass), a masked and reduced
# clone (a followed table, a down table that refers to itself, a
# partitioned one, a share of pages), a parallel dump and restore, a
# table copied by the clone worker, a pool fill,
# the metrics view and a flush of the noted logins, then print every error
# whose stack reaches pgsandbox.so and count those of any kind.  Debian's
# PostgreSQL is built without valgrind's memory-context support, so palloc'd
# memory is not checked chunk by chunk; PostgreSQL's own known reports (WAL
# and relcache init file padding written by write/pwrite) appear too.
#
# As root, with pgsandbox built and installed; takes a few minutes.
set -e
B=/usr/lib/postgresql/15/bin
D=/tmp/vg
rm -rf $D; mkdir -p $D/logs; chown -R postgres: $D
runuser -u postgres -- $B/initdb -D $D/data -A trust >/dev/null
cat >> $D/data/postgresql.conf <<EOC
port = 5577
unix_socket_directories = '$D'
listen_addresses = ''
shared_preload_libraries = 'pgsandbox'
max_prepared_transactions = 5
pgsandbox.lock_timeout = 500
pgsandbox.gc_interval = 1
pgsandbox.size_check_interval = 1
pgsandbox.max_sandbox_size = '12MB'
pgsandbox.max_total_size = '10GB'
pgsandbox.max_size_per_owner = '10GB'
max_worker_processes = 20
autovacuum = off
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
EOC
# the live source's login must be asked for its password (set_live())
sed -i '1i local all repl scram-sha-256\nlocal replication repl scram-sha-256' $D/data/pg_hba.conf
# the server is stopped however the script ends
trap 'runuser -u postgres -- $B/pg_ctl -D $D/data -m immediate stop >/dev/null 2>&1 || true' EXIT
runuser -u postgres -- bash -c "cd $D && nohup valgrind --quiet --error-limit=no --num-callers=30 --log-file=$D/logs/vg.%p.log --trace-children=no $B/postgres -D $D/data > $D/server.log 2>&1 &"
for i in $(seq 1 120); do runuser -u postgres -- $B/pg_isready -h $D -p 5577 -q && break; sleep 1; done
P() { runuser -u postgres -- psql -h $D -p 5577 -X -qAt "$@"; }
P -d postgres -c "CREATE EXTENSION pgsandbox" -c "CREATE DATABASE src" -c "SELECT pgsandbox.add_source('src','dbname=src', allow_data=>true)"
P -d src -c "CREATE TABLE t AS SELECT g FROM generate_series(1,1000) g"
A=$(P -d postgres -c "SELECT conninfo FROM pgsandbox.clone('src', schema_only=>false, idle_timeout=>'5s')")
runuser -u postgres -- psql "$A" -qAtc "SELECT count(*) FROM t"
P -d postgres -c "SELECT pgsandbox.snapshot('src')" >/dev/null
B2=$(P -d postgres -c "SELECT conninfo FROM pgsandbox.clone('src', schema_only=>false)")
runuser -u postgres -- psql "$B2" -qAtc "CREATE TABLE grow AS SELECT g, repeat(md5(g::text), 8) x FROM generate_series(1, 30000) g" || true
for i in $(seq 1 120); do [ "$(P -d postgres -c "SELECT count(*) FROM pgsandbox.events WHERE action='read_only'")" = 1 ] && break; sleep 1; done
runuser -u postgres -- psql "$B2" -qAtc "INSERT INTO grow VALUES (1,'x')" || true
runuser -u postgres -- psql "$B2" -qAtc "SELECT lo_from_bytea(0,'x')" || true
# resets (a copy of the snapshot, a dump restored into <name>_reset through
# the login check, a save), a save, a clone of the save
P -d postgres -c "SELECT pgsandbox.add_source('src2','dbname=src', allow_data=>true)" >/dev/null
C=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('src', schema_only=>false)")
D2=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('src2', schema_only=>false)")
P -d postgres -c "SET client_min_messages = warning" -c "SELECT pgsandbox.reset('$C', 'latest')" \
	-c "SELECT pgsandbox.reset('$D2')" -c "SELECT pgsandbox.save('$C', 'v1')" \
	-c "SELECT pgsandbox.reset('$C', 'v1')" >/dev/null
S=$(P -d postgres -c "SELECT name FROM pgsandbox.saves WHERE label = 'v1'")
P -d postgres -c "SELECT name FROM pgsandbox.clone(from_save => '$S')" -c "SELECT pgsandbox.drop('$C')" >/dev/null
# what holds a sandbox's role: a prepared transaction of another role in
# another database (a janitor rolls it back), then an open one (the drop of
# the role is blocked, recorded, and finished by a later pass)
E=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('src')")
P -d postgres -c "CREATE ROLE holder LOGIN" -c "GRANT CREATE ON SCHEMA public TO holder"
P -d src -c "SET ROLE holder" -c "BEGIN" -c "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $E" -c "PREPARE TRANSACTION 'held'"
P -d postgres -c "SELECT pgsandbox.drop('$E')" >/dev/null
F=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('src')")
runuser -u postgres -- psql -h $D -p 5577 -X -qAt -d src -c "SET ROLE holder" -c "BEGIN" \
	-c "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $F" -c "SELECT pg_sleep(5)" -c "COMMIT" &
sleep 1
P -d postgres -c "SELECT pgsandbox.drop('$F')" >/dev/null
wait
for i in $(seq 1 120); do [ "$(P -d postgres -c "SELECT count(*) FROM pg_roles WHERE rolname = '$F'")" = 0 ] && break; sleep 1; done
# a masked and reduced clone: a seed, a table it refers to, a followed
# table, a down table that refers to itself, a partitioned down table
P -d postgres -c "CREATE DATABASE shop"
P -d shop -c "CREATE TABLE r (id int PRIMARY KEY)" \
	-c "CREATE TABLE c (id int PRIMARY KEY, r_id int REFERENCES r, email text)" \
	-c "CREATE TABLE o (id int PRIMARY KEY, c_id int NOT NULL REFERENCES c, parent int REFERENCES o)" \
	-c "CREATE TABLE l (o_id int REFERENCES o, n int, PRIMARY KEY (o_id, n))" \
	-c "CREATE TABLE e (id int, c_id int REFERENCES c) PARTITION BY RANGE (id)" \
	-c "CREATE TABLE e1 PARTITION OF e FOR VALUES FROM (0) TO (500)" \
	-c "CREATE TABLE e2 PARTITION OF e FOR VALUES FROM (500) TO (100000)" \
	-c "INSERT INTO r SELECT generate_series(1, 10)" \
	-c "INSERT INTO c SELECT g, 1 + g % 10, 'c' || g FROM generate_series(1, 2000) g" \
	-c "INSERT INTO o SELECT g, 1 + g % 2000, CASE WHEN g > 10 THEN g - 10 END FROM generate_series(1, 3000) g" \
	-c "INSERT INTO l SELECT o, n FROM generate_series(1, 3000) o, generate_series(1, 2) n" \
	-c "INSERT INTO e SELECT g, 1 + g % 2000 FROM generate_series(1, 1000) g"
P -d postgres -c "SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true)" \
	-c "SELECT pgsandbox.subset('shop', 'public.c', '5%')" -c "SELECT pgsandbox.follow('shop', 'public.o', 500)" \
	-c "SELECT pgsandbox.mask('shop', 'public.c.email', \$\$'x' || id\$\$)" >/dev/null
G=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
P -d postgres -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$G' AND action = 'ready'"
# and a share of the pages of a partitioned table
P -d postgres -c "SELECT pgsandbox.subset('shop', 'public.e', '50% of pages')" >/dev/null
G=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
P -d postgres -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$G' AND action = 'ready'"
# a parallel dump and restore (three tables alike, two jobs): its slots
P -d postgres -c "CREATE DATABASE par" -c "ALTER SYSTEM SET pgsandbox.parallel_min_size = 0" \
	-c "SELECT pg_reload_conf()" >/dev/null
P -d par -c "CREATE TABLE p1 AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 20000) g" \
	-c "CREATE TABLE p2 AS TABLE p1" -c "CREATE TABLE p3 AS TABLE p1" -c "VACUUM ANALYZE"
P -d postgres -c "SELECT pgsandbox.add_source('par', 'dbname=par', allow_data => true)" >/dev/null
sleep 1
G=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('par', schema_only => false)")
P -d postgres -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$G' AND action = 'ready'"
# the largest table copied by the clone worker, in binary (bulk_copy.c,
# copy_relay.c)
P -d src -c "VACUUM ANALYZE"
P -d postgres -c "ALTER SYSTEM SET pgsandbox.bulk_copy_min_size = 0" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
G=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('src', schema_only => false, fresh => true)")
P -d postgres -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$G' AND action = 'ready'"
# a live source with an exclude_data rule (live_copy.c): its build reads in
# the slot's snapshot and its subscription leaves the excluded table out; a
# copy waits for the apply, pauses and resumes it; doctor()'s live rows
P -d postgres -c "CREATE ROLE repl LOGIN REPLICATION PASSWORD 'vgpw' IN ROLE pg_read_all_data" \
	-c "CREATE DATABASE live" >/dev/null
P -d live -c "CREATE TABLE a (id int PRIMARY KEY, v text)" -c "CREATE TABLE x (id int PRIMARY KEY, v text)" \
	-c "INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 500) g" \
	-c "INSERT INTO x SELECT g, 'x' FROM generate_series(1, 50) g" -c "CREATE PUBLICATION vgpub FOR TABLE a, x"
P -d postgres -c "SELECT pgsandbox.add_source('live', 'dbname=live user=repl password=vgpw', allow_data => true)" \
	-c "SELECT pgsandbox.exclude_data('live', 'public.x')" -c "SELECT pgsandbox.set_live('live', 'vgpub')" >/dev/null
for i in $(seq 1 300); do
	[ "$(P -d postgres -c "SELECT count(*) FROM pgsandbox.snapshots WHERE source = 'live' AND live AND status = 'ready'")" = 1 ] && break
	sleep 1
done
P -d live -c "INSERT INTO a VALUES (501, 'new')" -c "INSERT INTO x VALUES (51, 'new')"
G=$(P -d postgres -c "SELECT name FROM pgsandbox.clone('live', schema_only => false)")
P -d postgres -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$G' AND action = 'ready'"
P -d postgres -c "SELECT \"check\" || ': ' || ok FROM pgsandbox.doctor() WHERE \"check\" LIKE '%live%'"
P -d postgres -c "SELECT pgsandbox.set_pool('src', 1)" >/dev/null
P -d postgres -c "SELECT count(*) FROM pgsandbox.metrics" -c "SELECT * FROM pgsandbox.pools"
P -d postgres -c "SELECT conninfo FROM pgsandbox.clone('nosuchsource_x')" 2>/dev/null || true
sleep 70   # a flush of the noted logins, idle expiry
P -d postgres -c "SELECT action, count(*) FROM pgsandbox.events GROUP BY 1 ORDER BY 1"
runuser -u postgres -- $B/pg_ctl -D $D/data -m fast stop >/dev/null || true
sleep 5
echo "valgrind logs: $(ls $D/logs | wc -l) processes"
echo "errors of kinds that would be ours:"
cat $D/logs/*.log | grep -E "Invalid (read|write|free)|Conditional jump|Use of uninitialised|Mismatched|Source and destination overlap" | sort | uniq -c
echo "errors whose stack reaches pgsandbox.so:"
for f in $D/logs/*.log; do
	awk '/^==[0-9]+== [A-Z]/ { blk = $0; inblk = 1; next }
		 inblk && /^==[0-9]+== *$/ { if (blk ~ /sbx_|pgsandbox/) print blk "\n----"; inblk = 0; next }
		 inblk { blk = blk "\n" $0 }' "$f"
done | grep -E "^==[0-9]+== [A-Z]" | sed 's/^==[0-9]*== //' | sort | uniq -c
