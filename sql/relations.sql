--
-- relations: the SQL surface of declared relationships (relate, unrelate)
-- and key masks (mask_key), every error of bad input (which changes
-- nothing), masks and conditions, and who may set them
--
CREATE DATABASE regress_sbx_rel;
\c regress_sbx_rel
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, code varchar(8) UNIQUE,
	region text, "Odd (name)" int UNIQUE);
CREATE TABLE posts (id bigint PRIMARY KEY, title text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, customer_code text, placed date);
CREATE TABLE comments (id int PRIMARY KEY, commentable_type text, commentable_id bigint,
	body text);
CREATE TABLE log (line text, n int);
CREATE TABLE tagged (id int, tag int);
CREATE UNIQUE INDEX tagged_partial ON tagged (id) WHERE tag > 0;
CREATE UNIQUE INDEX tagged_expr ON tagged ((tag + 1));
CREATE TABLE invoices (id int PRIMARY KEY, customer_id int) PARTITION BY RANGE (id);
CREATE TABLE invoices_low PARTITION OF invoices FOR VALUES FROM (0) TO (100);
\c contrib_regression

SELECT pgsandbox.add_source('rel', 'dbname=regress_sbx_rel', allow_data => true);

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM pgsandbox.source_rule) AS rules,
       (SELECT rules_version FROM pgsandbox.source WHERE name = 'rel') AS version;

-- relate(): bad input, each refused
\set VERBOSITY default
SELECT pgsandbox.relate(NULL, 'public.orders(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', NULL, 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', NULL);
SELECT pgsandbox.relate('nosuchsource', 'public.orders(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'orders(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders()', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id) x', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id, customer_id)', 'public.customers(id, id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id, placed)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.nosuchtable(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(nosuchcolumn)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(nosuchcolumn)');
SELECT pgsandbox.relate('rel', 'public.orders(placed)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(region)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.tagged(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.log(n)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.invoices_low(id)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'pg_catalog.pg_authid(oid)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', '5%');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', 'true) FROM x; SELECT (1');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', 'nosuchcolumn = 1');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', 'customer_id + 1');
SELECT pgsandbox.unrelate('rel', 'public.orders(customer_id)', 'public.customers(id)');

-- the SQLSTATE of each kind of error
CREATE FUNCTION pg_temp.sqlstate_of(call text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'SELECT ' || call;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;
SELECT c AS call, pg_temp.sqlstate_of(c) AS sqlstate
  FROM (VALUES ($$pgsandbox.relate(NULL, 'public.orders(customer_id)', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.orders', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.orders(customer_id, placed)', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.nosuchtable(customer_id)', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.orders(nosuchcolumn)', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.orders(placed)', 'public.customers(id)')$$),
               ($$pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(region)')$$),
               ($$pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', 'nosuchcolumn = 1')$$),
               ($$pgsandbox.unrelate('rel', 'public.orders(customer_id)', 'public.customers(id)')$$)) v(c);

SELECT (SELECT count(*) FROM pgsandbox.source_rule) = rules AS no_rule_added,
       (SELECT rules_version FROM pgsandbox.source WHERE name = 'rel') = version AS no_version_changed
  FROM counts_before;

-- good relationships: set (text to varchar, a quoted name, a partitioned
-- referrer, a polymorphic pair), replaced, listed, removed
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', ' "public" . orders ( "customer_code" ) ', 'public.customers(code)');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers("Odd (name)")');
SELECT pgsandbox.relate('rel', 'public.invoices(customer_id)', 'public.customers(id)');
SELECT pgsandbox.relate('rel', 'public.comments(commentable_id)', 'public.posts(id)',
                        $$commentable_type = 'Post'$$);
SELECT pgsandbox.relate('rel', 'public.comments(commentable_id)', 'public.posts(id)',
                        $$commentable_type = 'Article'$$);
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)');
SELECT kind, target, expression FROM pgsandbox.source_rules WHERE source = 'rel' ORDER BY kind, target;
SELECT (SELECT rules_version FROM pgsandbox.source WHERE name = 'rel') - version AS changes
  FROM counts_before;
SELECT pgsandbox.unrelate('rel', 'public.log(n)', 'public.customers(id)');
SELECT pgsandbox.unrelate('rel', 'public.orders(customer_id)', 'public.customers("Odd (name)")');

-- masks: a column a relationship uses, on either side or in its condition,
-- may not be masked, nor a relationship use a masked column
SELECT pgsandbox.mask('rel', 'public.customers.id', 'id + 1');
SELECT pgsandbox.mask('rel', 'public.orders.customer_id', 'NULL');
SELECT pgsandbox.mask('rel', 'public.comments.commentable_type', 'NULL');
SELECT pgsandbox.mask('rel', 'public.customers.email', $$'c' || id || '@example.invalid'$$);
SELECT pgsandbox.mask('rel', 'public.customers.region', 'NULL');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(region)');
SELECT pgsandbox.mask('rel', 'public.comments.body', 'NULL');
SELECT pgsandbox.relate('rel', 'public.comments(id)', 'public.posts(id)', $$body = 'x'$$);
SELECT pgsandbox.relate('rel', 'public.comments(id)', 'public.posts(id)', $$comments::text = 'x'$$);

-- key masks: a key column is masked, and every column tied to it the same
SELECT pgsandbox.unmask('rel', 'public.customers.email');
SELECT pgsandbox.mask('rel', 'public.customers.id', 'id + 1');
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + length(email)$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + length(customers::text)$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + (random() * 10)::int$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + extract(day from CURRENT_DATE)::int$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + (SELECT count(*)::int FROM pg_catalog.pg_class)$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', 'NULL');
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$U&"id" + 1$$);
SELECT pgsandbox.mask_key('rel', 'public.invoices_low.id');
SELECT pgsandbox.mask_key('rel', 'public.orders.placed');
SELECT pgsandbox.mask_key('rel', 'public.customers.id');
SELECT pgsandbox.mask_key('rel', 'public.customers.email');
SELECT pgsandbox.mask_key('rel', 'public.customers.code');
SELECT pgsandbox.mask_key('rel', 'public.posts.id', $$id OPERATOR(pg_catalog.#) 12345$$);
SELECT target, key_mask, expression LIKE '%hashint8extended%' AS feistel,
       expression LIKE '%.invalid%' AS email_shape
  FROM pgsandbox.source_rules WHERE source = 'rel' AND kind = 'mask' ORDER BY target;
-- a key mask's column may be related; a condition may still not read it
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)');
SELECT pgsandbox.mask_key('rel', 'public.orders.id');
SELECT pgsandbox.relate('rel', 'public.orders(customer_id)', 'public.customers(id)', $$id > 0$$);
SELECT pgsandbox.mask('rel', 'public.customers.code', 'NULL');

-- who may set them: a pgsandbox_user may not; an admin who is not a
-- superuser may, within the limits of a masking expression
CREATE ROLE regress_rel_user IN ROLE pgsandbox_user;
CREATE ROLE regress_rel_admin IN ROLE pgsandbox_admin;
SET ROLE regress_rel_user;
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)');
SELECT pgsandbox.unrelate('rel', 'public.orders(customer_id)', 'public.customers(id)');
SET ROLE regress_rel_admin;
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)',
                        $$n IN (SELECT 1 FROM pg_catalog.pg_authid)$$);
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)',
                        $$pg_catalog.pg_read_file('x') IS NOT NULL$$);
SELECT pgsandbox.relate('rel', 'public.log(n)', 'public.customers(id)', $$line <> ''$$);
SELECT pgsandbox.mask_key('rel', 'public.customers.id', $$id + (SELECT 1 FROM pg_catalog.pg_authid)$$);
SELECT pgsandbox.mask_key('rel', 'public.orders.id');
RESET ROLE;
SELECT kind, target, expression FROM pgsandbox.source_rules WHERE source = 'rel' AND kind = 'relate'
 ORDER BY target;
DROP ROLE regress_rel_user;
DROP ROLE regress_rel_admin;

-- rules follow their source
SELECT pgsandbox.remove_source('rel');
SELECT count(*) AS rules_left FROM pgsandbox.source_rule;
DROP DATABASE regress_sbx_rel;
