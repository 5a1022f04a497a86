// The invocation as the function sees it: its trigger, and the store,
// queues and reply.

import { Entity } from "./entity";
import { HTTPRequest, encodeRespond } from "./http";
import {
  CairnError,
  OP_ENQUEUE,
  OP_GET,
  OP_LOG,
  OP_OUTPUT,
  OP_QUERY,
  OP_RESPOND,
  OP_SETTING,
  OP_TRIGGER,
  OP_WRITE,
  callBytes,
  callRequest,
  callText,
  request,
} from "./runner";
import { Trigger } from "./trigger";

// Read is the result of get: the entity (null when it does not exist) or
// an error.
export class Read {
  constructor(public entity: Entity | null, public error: CairnError | null) {}
}

// Query is the result of query: the entities, or an error.
export class Query {
  constructor(public entities: Entity[], public error: CairnError | null) {}
}

// Context is one invocation. It is valid only during the handler's call.
//
// Reads see the committed state of the store plus this invocation's own
// writes. Writes and messages take effect together, once, when the
// handler returns null.
export class Context {
  private trig: Trigger | null = null;

  // trigger is what started the invocation, fetched from the runner on
  // the first call. A runner that does not give it (a broken runner)
  // aborts the invocation.
  trigger(): Trigger {
    let t = this.trig;
    if (t == null) {
      const resp = callText(OP_TRIGGER, "");
      const err = resp.error;
      if (err != null) abort(err.toString());
      t = resp.trigger;
      if (t == null) abort("cairn: the runner gave no trigger");
      this.trig = t;
    }
    return t!;
  }

  // get reads one entity and its ETag (entity.etag); the entity is null
  // when it does not exist.
  get(table: string, pk: string, rk: string): Read {
    const w = request();
    w.mapLen(3);
    w.str("t");
    w.str(table);
    w.str("pk");
    w.str(pk);
    w.str("rk");
    w.str(rk);
    const resp = callRequest(OP_GET);
    return new Read(resp.error == null ? resp.entity : null, resp.error);
  }

  // query reads the entities of one partition, in RowKey order, that
  // match filter (an OData filter as over HTTP; "" matches all), at most
  // top of them (0: no limit but the runner's, 1,000).
  query(table: string, pk: string, filter: string = "", top: i32 = 0): Query {
    const w = request();
    w.mapLen(4);
    w.str("t");
    w.str(table);
    w.str("pk");
    w.str(pk);
    w.str("f");
    w.str(filter);
    w.str("top");
    w.int(<i64>top);
    const resp = callRequest(OP_QUERY);
    return new Query(resp.error == null ? resp.entities : [], resp.error);
  }

  // insert adds an entity that must not exist (EntityAlreadyExists).
  insert(table: string, e: Entity): CairnError | null {
    return this.write(table, "Insert", e, "");
  }

  // replace replaces an existing entity; ifMatch is its ETag, or "*" for
  // any version.
  replace(table: string, e: Entity, ifMatch: string): CairnError | null {
    return this.write(table, "Replace", e, ifMatch);
  }

  // merge sets e's properties on an existing entity, keeping its others;
  // ifMatch is its ETag, or "*" for any version.
  merge(table: string, e: Entity, ifMatch: string): CairnError | null {
    return this.write(table, "Merge", e, ifMatch);
  }

  // insertOrReplace writes e whether or not it exists.
  insertOrReplace(table: string, e: Entity): CairnError | null {
    return this.write(table, "InsertOrReplace", e, "");
  }

  // insertOrMerge inserts e, or merges its properties into the existing
  // entity.
  insertOrMerge(table: string, e: Entity): CairnError | null {
    return this.write(table, "InsertOrMerge", e, "");
  }

  // delete deletes an existing entity; ifMatch is its ETag, or "*" for
  // any version.
  delete(table: string, pk: string, rk: string, ifMatch: string): CairnError | null {
    return this.write(table, "Delete", new Entity(pk, rk), ifMatch);
  }

  private write(table: string, op: string, e: Entity, ifMatch: string): CairnError | null {
    const w = request();
    w.mapLen(4);
    w.str("t");
    w.str(table);
    w.str("op");
    w.str(op);
    w.str("e");
    w.arrayLen(2);
    e.encode(w);
    w.str("");
    w.str("if");
    w.str(ifMatch);
    return callRequest(OP_WRITE).error;
  }

  // enqueue sends body to queue once the invocation succeeds.
  enqueue(queue: string, body: Uint8Array): CairnError | null {
    const w = request();
    w.mapLen(2);
    w.str("q");
    w.str(queue);
    w.str("b");
    w.bin(body);
    return callRequest(OP_ENQUEUE).error;
  }

  // enqueueText sends the UTF-8 of body to queue once the invocation
  // succeeds.
  enqueueText(queue: string, body: string): CairnError | null {
    return this.enqueue(queue, Uint8Array.wrap(String.UTF8.encode(body, false, String.UTF8.ErrorMode.REPLACE)));
  }

  // reply sets the reply of a direct invocation, or the body of an HTTP
  // trigger's reply (the last call wins); other triggers have no one to
  // reply to and ignore it.
  reply(body: Uint8Array): CairnError | null {
    return callBytes(OP_OUTPUT, body).error;
  }

  // replyText replies with the UTF-8 of body.
  replyText(body: string): CairnError | null {
    return callText(OP_OUTPUT, body).error;
  }

  // http is the request of an HTTP trigger (its body is the trigger's
  // body), or null for another trigger.
  http(): HTTPRequest | null {
    return this.trigger().http;
  }

  // respond sets an HTTP trigger's reply status (0: 200, or 204 without
  // a body) and headers (null: none); reply sets its body. The last call
  // wins. The runner refuses (InvalidInput) a status outside 200..599, a
  // header name that is not a token, a value with a control character,
  // more than 16 KiB of headers, and the headers the host sets itself:
  // Content-Length, the connection's (Transfer-Encoding, Connection, …)
  // and CORS's (Access-Control-…).
  respond(status: i32, header: Map<string, string[]> | null = null): CairnError | null {
    encodeRespond(request(), status, header);
    return callRequest(OP_RESPOND).error;
  }

  // log writes a line to the node's log, with the function's name and the
  // trigger's id. The runner keeps a bounded number of lines per
  // invocation.
  log(line: string): void {
    callText(OP_LOG, line);
  }

  // setting returns the value of the function's setting name, or null
  // when it is not set. A runner without settings refuses the call, and
  // the invocation aborts saying so.
  setting(name: string): string | null {
    const w = request();
    w.mapLen(1);
    w.str("k");
    w.str(name);
    const resp = callRequest(OP_SETTING);
    const err = resp.error;
    if (err != null) abort("cairn: setting " + name + ": " + err.toString());
    return resp.hasValue ? resp.value : null;
  }
}
