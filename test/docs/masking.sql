-- docs/masking.md: the source its rules mask
CREATE DATABASE crm;
\connect crm
CREATE SCHEMA app;
CREATE TABLE app.customers (id int PRIMARY KEY, email text NOT NULL, phone text);
INSERT INTO app.customers SELECT g, 'p' || g || '@corp.example', '+49 30 ' || g FROM generate_series(1, 20) g;
CREATE TABLE app.audit_log (id int PRIMARY KEY, what text);
INSERT INTO app.audit_log SELECT g, 'did ' || g FROM generate_series(1, 20) g;
\connect postgres
SELECT pgsandbox.add_source('crm', 'dbname=crm', allow_data => true);
