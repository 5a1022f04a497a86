// The AssemblyScript side of a Cairn function: a module compiled to
// WebAssembly that the function runner runs on each trigger (a queue
// message, a committed change, a timer tick, a direct request, an HTTP
// request on one of its routes).
//
// A function's entry file registers its handler and re-exports
// cairn_handle, the export the runner calls:
//
//   import { Context, handle } from "./cairn";
//   export { cairn_handle } from "./cairn";
//
//   handle((ctx: Context): string | null => {
//     ctx.reply(ctx.trigger().body);
//     return null; // success; a string fails the invocation with that text
//   });
//
// See README.md and docs/FUNCTIONS.md.

import "./env";
import { Context } from "./context";
import { OP_FAIL, callText } from "./runner";

export { Context, Query, Read } from "./context";
export { Edm, Entity, Property, Value } from "./entity";
export { HTTPRequest } from "./http";
export { CairnError } from "./runner";
export { Change, KIND_CHANGE, KIND_HTTP, KIND_INVOKE, KIND_QUEUE, KIND_TIMER, Trigger } from "./trigger";

// Handler is a function: it returns null on success, or the text of the
// error that fails the invocation.
export type Handler = (ctx: Context) => string | null;

let handler: Handler | null = null;

// handle registers fn as the function (a second call replaces the
// first). Call it at the top level of the entry file, which runs once
// when an instance starts.
export function handle(fn: Handler): void {
  handler = fn;
}

// The results of cairn_handle.
const STATUS_OK = 0;
const STATUS_FAILED = 1;

// cairn_handle runs one invocation; the runner calls it, one invocation
// at a time per instance, and reuses the instance afterwards. Writes and
// messages are committed only if the handler returns null; an error
// discards them and fails the invocation with its text (retried, then
// poisoned). An abort (a throw, a failed assertion) crashes the instance:
// the invocation fails the same way and the runner starts a fresh one.
export function cairn_handle(): i32 {
  const fn = handler;
  if (fn == null) {
    callText(OP_FAIL, "no function is registered: call handle(fn) at the top level of the entry file");
    return STATUS_FAILED;
  }
  let err = fn(new Context());
  if (err != null) {
    if (err.length == 0) err = "the function returned an error without text";
    callText(OP_FAIL, err);
    return STATUS_FAILED;
  }
  return STATUS_OK;
}
