// {{name}} is a Cairn function. It keeps a running total per customer:
// each message {"customer": "alice", "amount": 12.5} on the queue
// {{name}} (or a direct request with that body) adds the amount to the
// entity (PartitionKey "alice", RowKey "total") of the table Totals and
// replies with the new total. See README.md.

import { Context, handle } from "./cairn";
import { Totals, fixed2, parseOrder } from "./order";

// The runner calls cairn_handle once per invocation.
export { cairn_handle } from "./cairn";

// TABLE holds the totals; create it before the first message.
const TABLE = "Totals";

// The top-level statements run once per instance, before its first
// invocation.
handle(run);

// run is one invocation. Its writes take effect only if it returns null;
// an error's text fails the invocation, and a queue message is then
// delivered again (after a back-off) and, after its last attempt, moved
// to the queue {{name}}-poison.
function run(ctx: Context): string | null {
  const t = ctx.trigger();
  const parsed = parseOrder(t.bodyText());
  const o = parsed.order;
  if (o == null) return parsed.error;
  // get sees the committed entity plus this invocation's own writes;
  // read.entity is null when the entity does not exist.
  const read = ctx.get(TABLE, o.customer, "total");
  if (read.error != null) return read.error!.toString();
  const e = read.entity;
  const tot = Totals.of(e).add(o.amount);
  // insert fails with EntityAlreadyExists if the entity exists by then;
  // replace with UpdateConditionNotSatisfied if it changed since get (the
  // runner then runs the function again).
  const err = e == null ? ctx.insert(TABLE, tot.entity(o.customer)) : ctx.replace(TABLE, tot.entity(o.customer), e.etag);
  if (err != null) return "write the total of " + o.customer + ": " + err.toString();
  const text = o.customer + ": " + tot.orders.toString() + " orders, " + fixed2(tot.sum) + " in all";
  ctx.log(text + " (dequeue count " + t.dequeueCount.toString() + ")");
  const rerr = ctx.replyText(text);
  return rerr != null ? rerr.toString() : null;
}
