-- docs/sql-reference.md: the source its examples clone
CREATE DATABASE app;
\connect app
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, phone text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, placed date);
CREATE TABLE order_lines (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders, qty int);
CREATE TABLE audit_log (id int PRIMARY KEY, what text);
INSERT INTO customers SELECT g, 'c' || g || '@corp.example', '+49 30 ' || g FROM generate_series(1, 10) g;
INSERT INTO orders SELECT g, 1 + g % 10, date '2026-01-01' + g FROM generate_series(1, 40) g;
INSERT INTO order_lines SELECT g, 1 + g % 40, g % 5 FROM generate_series(1, 120) g;
INSERT INTO audit_log SELECT g, 'did ' || g FROM generate_series(1, 50) g;
\connect postgres
