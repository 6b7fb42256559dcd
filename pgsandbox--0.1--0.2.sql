/* pgsandbox--0.1--0.2.sql: upgrade pgsandbox from 0.1 to 0.2 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.2'" to load this file. \quit

-- a dump of the admin database keeps who may clone which source
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_grant', '');
