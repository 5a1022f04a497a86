// An HTTP function in AssemblyScript, docs/FUNCTIONS.md's example with a
// header and the query kept and the caller named in the reply: POST
// /orders/{id} stores the order, 201 with its Location, or 409 when it
// exists; POST /bad asks for a status the runner refuses.

import { Context, Entity, Value, handle } from "../../../../../functions/sdk/assemblyscript/assembly/index";
export { cairn_handle } from "../../../../../functions/sdk/assemblyscript/assembly/index";

handle(run);

function run(ctx: Context): string | null {
  const req = ctx.http();
  if (req == null) return "not an HTTP request";
  if (req.route == "/bad") {
    const err = ctx.respond(600);
    return err != null ? err.toString() : null;
  }
  const id = req.param("id");
  const e = new Entity("orders", id)
    .set("Body", Value.string(ctx.trigger().bodyText()))
    .set("Note", Value.string(req.headerValue("x-note")))
    .set("Query", Value.string(req.query));
  let err = ctx.insert("Orders", e);
  if (err != null && err.code == "EntityAlreadyExists") {
    err = ctx.respond(409); // the reply's body stays empty
    return err != null ? err.toString() : null;
  }
  if (err != null) return err.toString(); // 500 FunctionFailed
  const header = new Map<string, string[]>();
  header.set("Location", ["/fn/asshop/orders/" + id]);
  header.set("Content-Type", ["text/plain"]);
  err = ctx.respond(201, header);
  if (err == null) err = ctx.replyText("created " + id + " by " + req.caller);
  return err != null ? err.toString() : null;
}
