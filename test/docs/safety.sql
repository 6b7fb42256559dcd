-- docs/safety.md: the source its example grants
CREATE DATABASE staging;
SELECT pgsandbox.add_source('staging', 'dbname=staging');
