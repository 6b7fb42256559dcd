-- Fixture for pgsandbox.suggest_masks(): tables in schema pii of the
-- current database, some of whose columns hold personal data, found by
-- the column's name, its type or its values, and some that do not.
-- Idempotent: drops and recreates the schema.  All data is derived from
-- generate_series, so that the sampled counts are the same on every run.

SET client_min_messages = warning;
DROP SCHEMA IF EXISTS pii CASCADE;
CREATE SCHEMA pii;

-- personal columns found by name; not email_verified (a flag about one),
-- address_id (a reference to one) nor created_at
CREATE TABLE pii.users (
	id serial PRIMARY KEY,
	email text UNIQUE NOT NULL,
	full_name text,
	username varchar(24) UNIQUE,
	phone varchar(20),
	birth_date date,
	last_ip inet,
	password_hash text NOT NULL,
	email_verified boolean NOT NULL DEFAULT false,
	address_id integer,
	created_at timestamptz NOT NULL DEFAULT '2024-01-01 00:00:00+00'
);
INSERT INTO pii.users (email, full_name, username, phone, birth_date, last_ip,
					   password_hash, address_id)
SELECT 'person' || i || '@mail.example.com',
	   CASE WHEN i % 10 <> 0 THEN 'Person Number ' || i END,
	   'person' || i,
	   CASE WHEN i % 7 <> 0 THEN '+1 555 ' || lpad(i::text, 7, '0') END,
	   CASE WHEN i % 5 <> 0 THEN date '1950-01-01' + i * 7 END,
	   CASE WHEN i % 3 <> 0 THEN '198.51.100.0'::inet + (i % 250) END,
	   '$2b$12$' || md5(i::text) || md5((-i)::text),
	   i
  FROM generate_series(1, 3000) AS i;

-- a varchar column too short for the usual email mask, and people names
-- in a table that is not named after people
CREATE TABLE pii.orders (
	id serial PRIMARY KEY,
	customer_email varchar(30),
	customer_name varchar(10) NOT NULL,
	product_name text NOT NULL,
	note text,
	amount numeric(10,2) NOT NULL,
	created_at timestamptz NOT NULL DEFAULT '2024-01-01 00:00:00+00'
);
INSERT INTO pii.orders (customer_email, customer_name, product_name, note, amount)
SELECT 'buyer' || i || '@example.org', 'Buyer ' || i, 'Product ' || (i % 17),
	   CASE WHEN i % 2 = 0 THEN 'deliver to the back door' END, i * 1.5
  FROM generate_series(1, 500) AS i;

-- innocent names, personal values: emails, card numbers, IBANs, phone
-- numbers and IPv4 addresses
CREATE TABLE pii.contact_info (
	id serial PRIMARY KEY,
	handle text
);
INSERT INTO pii.contact_info (handle)
SELECT CASE WHEN i % 20 = 0 THEN 'no address ' || i ELSE 'h' || i || '@example.net' END
  FROM generate_series(1, 40) AS i;
INSERT INTO pii.contact_info (handle) VALUES (NULL), (NULL);

CREATE TABLE pii.payments (
	id serial PRIMARY KEY,
	ref text NOT NULL,
	memo varchar(40)
);
INSERT INTO pii.payments (ref, memo)
SELECT (ARRAY['4111 1111 1111 1111', '5500-0000-0000-0004', '4012888888881881',
			  '378282246310005', '6011 1111 1111 1117'])[1 + i % 5],
	   'invoice ' || i
  FROM generate_series(1, 25) AS i;

CREATE TABLE pii.transfers (
	id serial PRIMARY KEY,
	counterparty text,
	callee varchar(25),
	origin text,
	peer inet
);
INSERT INTO pii.transfers (counterparty, callee, origin, peer)
SELECT (ARRAY['DE89 3704 0044 0532 0130 00', 'GB82WEST12345698765432',
			  'FR1420041010050500013M02606', 'NL91ABNA0417164300'])[1 + i % 4],
	   (ARRAY['+44 20 7946 0958', '(555) 010-4477', '030 1234567', '+1-202-555-0143'])[1 + i % 4],
	   '203.0.113.' || (i % 200), '2001:db8::1'::inet + i
  FROM generate_series(1, 12) AS i;

-- people table: a bare name column, identity numbers, bank and card
-- columns of several types
CREATE TABLE pii.employees (
	id integer PRIMARY KEY,
	name text NOT NULL,
	ssn char(11) UNIQUE,
	tax_id integer,
	bank_account varchar(34),
	card_number bigint,
	dob timestamp(0),
	home_address text,
	salary numeric(12,2),
	api_key uuid NOT NULL
);
INSERT INTO pii.employees
SELECT i, 'Employee ' || i, lpad(i::text, 3, '0') || '-45-' || lpad(i::text, 4, '0'),
	   100000000 + i, 'DE' || lpad(i::text, 20, '0'), 4000000000000000 + i,
	   timestamp '1960-03-01 08:30' + i * interval '100 days',
	   i || ' Main Street', 50000 + i, md5(i::text)::uuid
  FROM generate_series(1, 200) AS i;

-- partitioned: reported once, on the partitioned table
CREATE TABLE pii.events (
	id bigint NOT NULL,
	happened_at timestamptz NOT NULL,
	client_ip inet,
	payload jsonb
) PARTITION BY RANGE (happened_at);
CREATE TABLE pii.events_2024 PARTITION OF pii.events
	FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE pii.events_2025 PARTITION OF pii.events
	FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
INSERT INTO pii.events
SELECT i, timestamptz '2024-06-01 00:00+00' + i * interval '1 day',
	   ('192.0.2.' || (i % 250))::inet,
	   jsonb_build_object('kind', 'signup', 'contact', 'e' || i || '@example.com')
  FROM generate_series(1, 300) AS i;

-- personal names, but columns mask() refuses: both ends of a foreign key,
-- and a generated column
CREATE TABLE pii.newsletter (
	email text PRIMARY KEY
);
CREATE TABLE pii.newsletter_log (
	email text NOT NULL REFERENCES pii.newsletter,
	email_lower text GENERATED ALWAYS AS (lower(email)) STORED
);
INSERT INTO pii.newsletter SELECT 'Reader' || i || '@example.com' FROM generate_series(1, 20) AS i;
INSERT INTO pii.newsletter_log SELECT 'Reader' || (i % 20 + 1) || '@example.com' FROM generate_series(1, 40) AS i;

-- nothing personal here, whatever the names and values look like
CREATE TABLE pii.products (
	id serial PRIMARY KEY,
	name text NOT NULL,
	product_name text,
	sku text,
	amount numeric,
	created_at timestamptz
);
INSERT INTO pii.products (name, product_name, sku, amount, created_at)
SELECT 'Widget ' || i, 'Widget ' || i, 'SKU-' || lpad(i::text, 6, '0'), i,
	   timestamptz '2024-01-01 00:00+00' + i * interval '1 hour'
  FROM generate_series(1, 50) AS i;

CREATE TABLE pii.report_columns (
	table_name text NOT NULL,
	day text,
	total text,
	order_ref text
);
INSERT INTO pii.report_columns
SELECT 'table_' || i, to_char(date '2024-01-01' + i, 'YYYY-MM-DD'),
	   (1000000 + i * 37) || '.25', lpad((123456789012 + i)::text, 16, '0')
  FROM generate_series(1, 60) AS i;

RESET client_min_messages;
