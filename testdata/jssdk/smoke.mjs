// Drives a Cairn host with the JavaScript Azure Tables SDK: the same steps a
// new user takes. Usage: node smoke.mjs <connection string>
// Exits non-zero, with the failing step, if anything does not behave as it
// does against Azure.
import { TableClient, TableServiceClient, odata } from "@azure/data-tables";

const conn = process.argv[2];
if (!conn) {
  console.error("usage: node smoke.mjs <connection string>");
  process.exit(2);
}
const opts = { allowInsecureConnection: true, retryOptions: { maxRetries: 0 } };
const service = TableServiceClient.fromConnectionString(conn, opts);
const name = "JsSmoke" + Date.now();
const table = TableClient.fromConnectionString(conn, name, opts);

function check(cond, what) {
  if (!cond) {
    throw new Error("check failed: " + what);
  }
}

await service.createTable(name);
let found = false;
for await (const t of service.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } })) {
  found = found || t.name === name;
}
check(found, "listTables finds the new table");

await table.createEntity({ partitionKey: "Sales", rowKey: "1", name: "Ann", age: 30, big: { value: "9007199254740993", type: "Int64" }, when: new Date("2014-08-22T00:50:32.123Z") });
const e = await table.getEntity("Sales", "1");
const show = (x) => JSON.stringify(x, (k, v) => (typeof v === "bigint" ? v.toString() + "n" : v));
const big = typeof e.big === "bigint" ? e.big.toString() : e.big.value;
check(e.name === "Ann" && e.age === 30 && big === "9007199254740993" && e.when.toISOString() === "2014-08-22T00:50:32.123Z", "getEntity returns what was written: " + show(e));
await table.updateEntity({ partitionKey: "Sales", rowKey: "1", email: "ann@x" }, "Merge", { etag: e.etag });
let stale = false;
try {
  await table.updateEntity({ partitionKey: "Sales", rowKey: "1" }, "Replace", { etag: e.etag });
} catch (err) {
  stale = err.statusCode === 412;
}
check(stale, "a stale ETag is refused with 412");

// A transaction of 100 and a failing one.
const actions = [];
for (let i = 0; i < 100; i++) {
  actions.push(["create", { partitionKey: "Batch", rowKey: String(i).padStart(4, "0"), n: i }]);
}
const tx = await table.submitTransaction(actions);
check(tx.status === 202 && tx.subResponses.length === 100, "a batch of 100 commits");
let failedIndex = -1;
try {
  await table.submitTransaction([["create", { partitionKey: "Batch", rowKey: "new" }], ["create", { partitionKey: "Batch", rowKey: "0001" }]]);
} catch (err) {
  failedIndex = err.message.startsWith("1:") ? 1 : -2;
}
check(failedIndex === 1, "a failing batch reports operation 1");
let missing = false;
try {
  await table.getEntity("Batch", "new");
} catch (err) {
  missing = err.statusCode === 404;
}
check(missing, "a failed batch applies nothing");

// Filters and paging.
let n = 0;
let pages = 0;
for await (const page of table.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${"Batch"} and n ge ${10}` } }).byPage({ maxPageSize: 30 })) {
  pages++;
  n += page.length;
}
check(n === 90 && pages === 3, `paging: ${n} entities in ${pages} pages`);

await table.deleteEntity("Sales", "1");
await service.deleteTable(name);
console.log("ok: JavaScript SDK against " + conn.split(";").find((p) => p.startsWith("TableEndpoint")));
