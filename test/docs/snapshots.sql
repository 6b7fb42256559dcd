-- docs/snapshots.md: the source its pool and snapshot copy
CREATE DATABASE shop;
\connect shop
CREATE TABLE orders (id int PRIMARY KEY, total numeric);
INSERT INTO orders SELECT g, g FROM generate_series(1, 100) g;
\connect postgres
SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
