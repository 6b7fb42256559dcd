-- docs/agents.md: the source its agent clones
CREATE DATABASE staging;
\connect staging
CREATE TABLE orders (id int PRIMARY KEY, total numeric);
\connect postgres
SELECT pgsandbox.add_source('staging', 'dbname=staging');
