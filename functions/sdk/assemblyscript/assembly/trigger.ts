// The trigger of an invocation, as op 1 (trigger) answers it.

import { Entity } from "./entity";
import { HTTPRequest } from "./http";
import { Reader } from "./msgpack";

// The trigger kinds.
export const KIND_QUEUE = "queue"; // a message on a queue
export const KIND_CHANGE = "change"; // a committed change of a table
export const KIND_TIMER = "timer"; // a tick of a timer (delivered through a queue)
export const KIND_INVOKE = "invoke"; // a direct request over NATS
export const KIND_HTTP = "http"; // a request on one of the function's HTTP routes

// Trigger is what started an invocation.
export class Trigger {
  // id identifies the trigger (a queue message's stream sequence, a
  // change's journal position, a request's id): the same on every retry.
  id: string = "";
  kind: string = "";
  function: string = "";
  version: i64 = 0;
  // queue is the queue of a queue or timer trigger.
  queue: string = "";
  // body is the message (queue, timer) or the request (invoke, http).
  body: Uint8Array = new Uint8Array(0);
  // dequeueCount counts the deliveries of this trigger, this one
  // included (1 on the first), crashes and timeouts too.
  dequeueCount: i64 = 0;
  // time is when the message was enqueued or the change committed, in
  // ticks (100 ns since the Unix epoch).
  time: i64 = 0;
  // change is the committed change of a change trigger.
  change: Change | null = null;
  // http is the request of an HTTP trigger (its body is body).
  http: HTTPRequest | null = null;

  // bodyText is the body as UTF-8 text.
  bodyText(): string {
    return String.UTF8.decode(this.body.buffer.slice(this.body.byteOffset, this.body.byteOffset + this.body.byteLength));
  }

  static decode(r: Reader): Trigger {
    const t = new Trigger();
    const n = r.mapLen();
    for (let i = 0; i < n && r.err == null; i++) {
      const k = r.str();
      if (k == "id") t.id = r.str();
      else if (k == "kind") t.kind = r.str();
      else if (k == "fn") t.function = r.str();
      else if (k == "ver") t.version = r.int();
      else if (k == "q") t.queue = r.str();
      else if (k == "b") t.body = r.bin();
      else if (k == "dq") t.dequeueCount = r.int();
      else if (k == "ts") t.time = r.int();
      else if (k == "ch") t.change = r.nil() ? null : Change.decode(r);
      else if (k == "http") t.http = r.nil() ? null : HTTPRequest.decode(r);
      else r.skip();
    }
    return t;
  }
}

// Change is one committed change of a table.
export class Change {
  table: string = "";
  // seq is the journal position of the change's record; index its place
  // in the record.
  seq: u64 = 0;
  index: i64 = 0;
  // deleted is set when the entity was deleted; entity then has only its
  // keys.
  deleted: bool = false;
  entity: Entity = new Entity("", "");
  // etag is the entity's ETag after the change.
  etag: string = "";
  // prevETag is the entity's ETag before the change: "" when it did not
  // exist, or when prevUnknown.
  prevETag: string = "";
  // prevUnknown is set when the change's record was written before Cairn
  // recorded previous versions: prevETag and prev say nothing.
  prevUnknown: bool = false;
  // prev is the entity before the change, with its ETag (null when it
  // did not exist, or prevUnknown).
  prev: Entity | null = null;

  static decode(r: Reader): Change {
    const c = new Change();
    const n = r.mapLen();
    for (let i = 0; i < n && r.err == null; i++) {
      const k = r.str();
      if (k == "t") c.table = r.str();
      else if (k == "seq") c.seq = r.uint();
      else if (k == "i") c.index = r.int();
      else if (k == "del") c.deleted = r.bool();
      else if (k == "e") {
        const e = Entity.decodeWithETag(r);
        if (e != null) c.entity = e;
      } else if (k == "etag") c.etag = r.str();
      else if (k == "petag") c.prevETag = r.str();
      else if (k == "punk") c.prevUnknown = r.bool();
      else if (k == "prev") c.prev = Entity.decodeWithETag(r);
      else r.skip();
    }
    return c;
  }
}
