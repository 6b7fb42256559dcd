// e2e.mjs: drive a real Postgres MCP server (mcp-postgres-server) over stdio
// with the official MCP client SDK, as an agent would, through a whole
// pgsandbox task: clone, look at the shape, migrate, see the diff, save,
// reset in place and back to the save, try to leave the sandbox, drop.
//
// The server logs into the admin database as an ordinary pgsandbox_user
// role. Connection settings come from the environment (set by
// test/t/030_mcp.pl): PGSANDBOX_HOST, PGSANDBOX_PORT, PGSANDBOX_DB,
// PGSANDBOX_USER, PGSANDBOX_PASSWORD, PGSANDBOX_SOURCE.
//
// Prints TAP; exits non-zero if any check failed.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const env = process.env;
let n = 0;
let failed = 0;

function ok(cond, name, extra) {
  n += 1;
  if (!cond) failed += 1;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && extra !== undefined) console.log(`# ${JSON.stringify(extra)}`);
  return cond;
}

// The server's own entry point, as its package declares it.
const serverPkg = require.resolve('mcp-postgres-server/package.json');
const serverMain = path.join(path.dirname(serverPkg), require(serverPkg).bin['mcp-postgres']);

const transport = new StdioClientTransport({
  command: process.execPath,
  args: [serverMain],
  // the SDK passes on only what is given here
  env: {
    PATH: env.PATH ?? '/usr/bin:/bin',
    PG_HOST: env.PGSANDBOX_HOST,
    PG_PORT: env.PGSANDBOX_PORT,
    PG_DATABASE: env.PGSANDBOX_DB,
    PG_USER: env.PGSANDBOX_USER,
    PG_PASSWORD: env.PGSANDBOX_PASSWORD,
    PG_ALLOW_WRITE: 'true',
    PG_STATEMENT_TIMEOUT: '300000',
    PG_MAX_RESULT_BYTES: '1000000',
  },
  stderr: 'inherit',
});

const client = new Client({ name: 'pgsandbox-e2e', version: '1.0.0' });

// Call the server's query tool; returns {isError, payload}.
async function query(sql, params = []) {
  const res = await client.callTool({ name: 'query', arguments: { sql, params } });
  const text = res.content?.find((c) => c.type === 'text')?.text ?? '';
  let payload;
  try {
    payload = JSON.parse(text);
  } catch {
    payload = text;
  }
  return { isError: res.isError === true, payload };
}

async function main() {
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  ok(tools.includes('query'), 'the MCP server offers a query tool', tools);

  // 1. clone the approved source
  const source = env.PGSANDBOX_SOURCE;
  let r = await query(
    "SELECT name, conninfo, expires_at FROM pgsandbox.clone($1, schema_only => false, ttl => '30 minutes', labels => '{\"agent\": \"mcp-e2e\"}')",
    [source],
  );
  const row = r.payload.rows?.[0];
  if (!ok(!r.isError && row && /^sbx_[a-z0-9]{8}$/.test(row.name), 'clone() through MCP returns a sandbox name', r.payload)) {
    throw new Error('cannot go on without a sandbox');
  }
  const sbx = row.name;
  ok(/ user=sbx_[a-z0-9]{8} password=[A-Za-z0-9]{32}$/.test(row.conninfo), 'clone() returns a conninfo with the sandbox role and its password');

  r = await query('SELECT name, status, owner, labels FROM pgsandbox.sandboxes');
  ok(!r.isError && r.payload.rows.length === 1 && r.payload.rows[0].name === sbx
     && r.payload.rows[0].status === 'ready' && r.payload.rows[0].owner === env.PGSANDBOX_USER
     && r.payload.rows[0].labels.agent === 'mcp-e2e',
     'the agent sees its one ready sandbox, owned by its role, with its labels', r.payload);

  // 2. describe_schema
  r = await query('SELECT pgsandbox.describe_schema($1) AS d', [sbx]);
  const d = r.payload.rows?.[0]?.d;
  const tables = (d?.tables ?? []).map((t) => t.name);
  ok(!r.isError && tables.includes('public.customer') && tables.includes('public.orders'),
     'describe_schema lists the source tables', d);
  const orders = d?.tables?.find((t) => t.name === 'public.orders');
  ok(orders && orders.columns.some((c) => c.name === 'customer_id' && c.type === 'integer' && c.not_null === true)
     && orders.constraints.some((c) => c.startsWith('orders_customer_id_fkey FOREIGN KEY')),
     'describe_schema gives columns and constraints', orders);
  ok((d?.views ?? []).some((v) => v.name === 'public.big_orders'), 'describe_schema lists views');

  // 3. data came along, and task SQL runs as the sandbox role
  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT current_user AS who, count(*) AS n FROM orders') AS res", [sbx]);
  let res = r.payload.rows?.[0]?.res;
  ok(!r.isError && res?.error === null && res.results[0].rows[0][0] === sbx && res.results[0].rows[0][1] === env.PGSANDBOX_ORDERS * 1,
     'run_sql runs as the sandbox role and sees the copied rows', res);

  // 4. a migration with run_sql
  const migration = `
    ALTER TABLE orders ADD COLUMN status text NOT NULL DEFAULT 'new';
    CREATE INDEX orders_status ON orders (status);
    UPDATE orders SET status = 'paid' WHERE amount > 100;
    DROP VIEW big_orders;
    CREATE TABLE refunds (order_id int REFERENCES orders, amount numeric NOT NULL);`;
  r = await query('SELECT pgsandbox.run_sql($1, $2) AS res', [sbx, migration]);
  res = r.payload.rows?.[0]?.res;
  ok(!r.isError && res?.error === null && res.results.length === 5
     && res.results[2].command.startsWith('UPDATE') && res.results[2].row_count > 0,
     'run_sql applies a migration and reports each statement', res);

  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT status, count(*) FROM orders GROUP BY 1 ORDER BY 1', read_only => true) AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error === null && res.results[0].rows.length === 2, 'the migration is visible in the sandbox', res);

  r = await query("SELECT pgsandbox.run_sql($1, 'DELETE FROM orders', read_only => true) AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error?.sqlstate === '25006', 'read_only refuses a write', res);

  // 5. schema_diff
  r = await query('SELECT pgsandbox.schema_diff($1) AS diff', [sbx]);
  const diff = r.payload.rows?.[0]?.diff;
  ok(!r.isError && diff?.added?.some((o) => o.kind === 'table' && o.name === 'public.refunds'),
     'schema_diff shows the added table', diff);
  ok(diff?.dropped?.some((o) => o.kind === 'view' && o.name === 'public.big_orders'),
     'schema_diff shows the dropped view', diff);
  const changed = diff?.changed?.find((o) => o.name === 'public.orders');
  ok(changed?.columns_added?.some((c) => c.name === 'status')
     && changed?.indexes_added?.some((i) => i.includes('orders_status')),
     'schema_diff shows the new column and index of orders', changed);

  // 6. the migration needs another try: keep it as a save, put the
  //    sandbox back in place (same name, same credentials), and come back
  //    to the save
  r = await query("SELECT pgsandbox.save($1, 'first try') AS save", [sbx]);
  const save = r.payload.rows?.[0]?.save;
  ok(!r.isError && /^sbx_[a-z0-9]{8}$/.test(save ?? ''), 'save() through MCP keeps the migrated state', r.payload);
  r = await query('SELECT pgsandbox.reset($1) AS data_as_of', [sbx]);
  ok(!r.isError && r.payload.rows?.[0]?.data_as_of, 'reset() through MCP puts the sandbox back', r.payload);
  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT current_user, count(*) FROM orders; SELECT to_regclass(''refunds'') IS NULL, to_regclass(''big_orders'') IS NOT NULL') AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error === null && res.results[0].rows[0][0] === sbx && res.results[0].rows[0][1] === env.PGSANDBOX_ORDERS * 1
     && res.results[1].rows[0][0] === true && res.results[1].rows[0][1] === true,
     'after the reset the sandbox has the source\'s rows and shape, under the same role', res);
  r = await query("SELECT pgsandbox.reset($1, target => 'first try') AS data_as_of", [sbx]);
  ok(!r.isError, 'reset() to the save through MCP', r.payload);
  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT to_regclass(''refunds'') IS NOT NULL') AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error === null && res.results[0].rows[0][0] === true, 'the saved migration is back', res);
  r = await query('SELECT sandbox, label FROM pgsandbox.saves');
  ok(!r.isError && r.payload.rows.length === 1 && r.payload.rows[0].sandbox === sbx
     && r.payload.rows[0].label === 'first try', 'the agent sees its save', r.payload);

  // 7. the sandbox role cannot reach the admin catalog, the admin
  //    database or the source; the agent's own role cannot read secrets
  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT conninfo FROM pgsandbox.source') AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error?.sqlstate === '42P01', 'from the sandbox, the admin catalog does not exist', res);
  r = await query("SELECT pgsandbox.run_sql($1, 'CREATE EXTENSION dblink') AS res", [sbx]);
  res = r.payload.rows?.[0]?.res;
  ok(res?.error?.sqlstate === '42501', 'the sandbox role cannot install dblink to reach out', res);
  r = await query('SELECT conninfo FROM pgsandbox.source');
  ok(r.isError && /permission denied/.test(JSON.stringify(r.payload)), 'the agent role cannot read source connection strings', r.payload);
  r = await query('SELECT password FROM pgsandbox.sandbox_secret');
  ok(r.isError && /permission denied/.test(JSON.stringify(r.payload)), 'the agent role cannot read sandbox secrets', r.payload);
  r = await query("SELECT pgsandbox.add_source('mine', 'dbname=postgres user=x password=y')");
  ok(r.isError && /permission denied/.test(JSON.stringify(r.payload)), 'the agent role cannot approve sources', r.payload);

  // 8. drop
  r = await query('SELECT pgsandbox.drop($1)', [sbx]);
  ok(!r.isError, 'drop() through MCP', r.payload);
  r = await query('SELECT status FROM pgsandbox.sandboxes WHERE name = $1', [sbx]);
  ok(r.payload.rows?.[0]?.status === 'dropped', 'the sandbox is dropped', r.payload);
  r = await query("SELECT pgsandbox.run_sql($1, 'SELECT 1') AS res", [sbx]);
  ok(r.isError && /does not exist/.test(JSON.stringify(r.payload)), 'a dropped sandbox cannot be used', r.payload);

  // for the TAP test around us
  console.log(`# sandbox ${sbx}`);
}

try {
  await main();
} catch (err) {
  ok(false, `no exception: ${err.message}`);
} finally {
  await client.close().catch(() => undefined);
}
console.log(`1..${n}`);
process.exit(failed === 0 ? 0 : 1);
