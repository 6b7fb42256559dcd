-- docs/reduced-clones.md: the source its rules reduce
CREATE DATABASE shop;
\connect shop
CREATE TABLE stores (id int PRIMARY KEY, city text);
CREATE TABLE orders (id int PRIMARY KEY, store_id int REFERENCES stores, placed timestamptz NOT NULL);
CREATE TABLE order_lines (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders, qty int);
CREATE TABLE events (id int, what text);
INSERT INTO stores SELECT g, 'city ' || g FROM generate_series(1, 40) g;
INSERT INTO orders SELECT g, 1 + g % 40, now() - g * interval '1 day' FROM generate_series(1, 100) g;
INSERT INTO order_lines SELECT g, 1 + g % 100, g FROM generate_series(1, 300) g;
INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 5000) g;
\connect postgres
SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
