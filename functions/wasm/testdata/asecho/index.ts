// The AssemblyScript test guest of functions/wasm: echo's twin (testdata/
// echo), built with the AssemblyScript SDK. It echoes its trigger's body,
// and on some bodies exercises one part of the ABI.

import { CairnError, Context, Entity, Value, handle } from "../../../sdk/assemblyscript/assembly/index";
export { cairn_handle } from "../../../sdk/assemblyscript/assembly/index";

// inside counts the invocations running in this instance: more than one
// means two entered it at once.
let inside = 0;

// hoard keeps what "bomb" allocates.
const hoard: Uint8Array[] = [];

handle(run);

function run(c: Context): string | null {
  inside++;
  const err = dispatch(c);
  inside--;
  return err;
}

function errText(e: CairnError | null): string | null {
  return e == null ? null : e.toString();
}

function dispatch(c: Context): string | null {
  const body = c.trigger().bodyText();
  if (body == "get") {
    const r = c.get("T", "p", "r");
    if (r.error != null) return r.error!.toString();
    const e = r.entity;
    if (e == null) return errText(c.replyText("absent"));
    const v = e.get("V");
    return errText(c.replyText((v != null ? v.str() : "") + " " + e.etag));
  }
  if (body == "big") {
    const r = c.get("T", "p", "big");
    const e = r.entity;
    if (r.error != null || e == null) return "no big entity";
    return errText(c.replyText(e.get("V")!.str()));
  }
  if (body == "write") {
    const err = c.insertOrReplace("T", new Entity("p", "r").set("V", Value.string("x")));
    if (err != null) return err.toString();
    return errText(c.enqueueText("q", "m"));
  }
  if (body == "ops") return ops(c);
  if (body == "types") return types(c);
  if (body == "http") {
    const req = c.http();
    if (req == null) return "no HTTP request in the trigger";
    const header = new Map<string, string[]>();
    header.set("X-Order", [req.param("id")]);
    const err = c.respond(201, header);
    if (err != null) return err.toString();
    return errText(c.replyText(req.method + " " + req.route + " " + req.query));
  }
  if (body == "http-echo") return httpEcho(c);
  if (body == "http-bad") return errText(c.respond(600, null));
  if (body == "trigger") return trigger(c);
  if (body == "copy") return copy(c);
  if (body == "fail") return "no good";
  if (body == "panic") throw new Error("boom");
  if (body == "loop") {
    while (true) {}
  }
  if (body == "bomb") {
    while (true) {
      const b = new Uint8Array(1 << 20);
      for (let i = 0; i < b.length; i++) b[i] = <u8>i;
      hoard.push(b);
    }
  }
  if (body == "grow") {
    // 32 MiB, touched and dropped: the memory stays grown.
    const b = new Uint8Array(32 << 20);
    for (let i = 0; i < b.length; i += 4096) b[i] = 1;
    return errText(c.replyText(b.length.toString()));
  }
  if (body == "rand") {
    return errText(c.replyText(Math.random().toString()));
  }
  if (body == "conc") {
    // A second call to the runner gives another caller time to enter.
    c.log("inside " + inside.toString());
    if (inside != 1) return "two invocations in one instance";
    return errText(c.replyText("alone"));
  }
  c.log("echo " + c.trigger().body.length.toString() + " bytes");
  return errText(c.reply(c.trigger().body));
}

// ops runs every write operation and a query, and replies with what it saw.
function ops(c: Context): string | null {
  const out: string[] = [];
  const e = new Entity("p", "a").set("V", Value.string("1"));
  let err = c.insert("T", e);
  if (err != null) return err.toString();
  err = c.insert("T", e);
  if (err == null || err.code != "EntityAlreadyExists") return "second insert: want EntityAlreadyExists, got " + (err == null ? "null" : err.toString());
  out.push("conflict:" + err.code);
  const steps: (CairnError | null)[] = [
    c.replace("T", new Entity("p", "a").set("V", Value.string("2")), "*"),
    c.merge("T", new Entity("p", "a").set("W", Value.int32(3)), "*"),
    c.insertOrMerge("T", new Entity("p", "b").set("V", Value.string("b"))),
    c.insertOrReplace("T", new Entity("p", "c")),
    c.delete("T", "p", "c", "*"),
  ];
  for (let i = 0; i < steps.length; i++) {
    if (steps[i] != null) return steps[i]!.toString();
  }
  const q = c.query("T", "p", "V ne ''", 10);
  if (q.error != null) return q.error!.toString();
  for (let i = 0; i < q.entities.length; i++) {
    const v = q.entities[i].get("V");
    out.push(q.entities[i].rowKey + "=" + (v != null ? v.str() : ""));
  }
  return errText(c.replyText(out.join(" ")));
}

// types writes an entity with a property of every type, reads it back and
// replies with what it read.
function types(c: Context): string | null {
  const guid = new Uint8Array(16);
  for (let i = 0; i < 16; i++) guid[i] = <u8>i;
  const bin = new Uint8Array(3);
  bin[0] = 0;
  bin[1] = 0xff;
  bin[2] = 7;
  const e = new Entity("p", "types")
    .set("S", Value.string("héllo"))
    .set("I", Value.int32(-7))
    .set("L", Value.int64(-5000000000))
    .set("D", Value.double(2.5))
    .set("B", Value.boolean(true))
    .set("T", Value.dateTime(638000000000000000))
    .set("G", Value.guid(guid))
    .set("X", Value.binary(bin))
    .set("U", Value.string("a\uD800b"));
  const err = c.insertOrReplace("T", e);
  if (err != null) return err.toString();
  const r = c.get("T", "p", "types");
  const got = r.entity;
  if (r.error != null || got == null) return "read back: " + errText(r.error)!;
  const out: string[] = [];
  for (let i = 0; i < got.properties.length; i++) {
    const p = got.properties[i];
    const v = p.value;
    let s = "";
    switch (v.type) {
      case 1: s = v.str(); break;
      case 2: case 3: s = v.int().toString(); break;
      case 4: s = v.double().toString(); break;
      case 5: s = v.boolean() ? "true" : "false"; break;
      case 6: s = v.ticks().toString(); break;
      default: {
        const b = v.bytes();
        for (let j = 0; j < b.length; j++) s += (b[j] < 16 ? "0" : "") + b[j].toString(16);
      }
    }
    out.push(p.name + ":" + v.type.toString() + ":" + s);
  }
  return errText(c.replyText(out.join(" ")));
}

// trigger replies with the trigger's fields.
function trigger(c: Context): string | null {
  const t = c.trigger();
  let s = t.id + " " + t.kind + " " + t.function + " " + t.version.toString() + " " + t.queue + " " + t.dequeueCount.toString() + " " + t.time.toString();
  const ch = t.change;
  if (ch != null) {
    s += " change " + ch.table + " " + ch.seq.toString() + " " + ch.index.toString() + " " + (ch.deleted ? "deleted" : "put") + " " + ch.entity.partitionKey + "/" + ch.entity.rowKey + " " + ch.etag;
    s += " prev " + ch.prevETag + " " + (ch.prevUnknown ? "unknown" : "known");
    const p = ch.prev;
    if (p != null) s += " " + p.rowKey + "@" + p.etag + "=" + p.get("V")!.str();
  }
  return errText(c.replyText(s));
}

// copy writes back the entities of a change trigger (the entity, then the
// one before it) as they were decoded, and replies with their ETags.
function copy(c: Context): string | null {
  const ch = c.trigger().change;
  if (ch == null) return "no change";
  let err = c.insertOrReplace("T", ch.entity);
  if (err != null) return err.toString();
  let etags = ch.entity.etag;
  const prev = ch.prev;
  if (prev != null) {
    err = c.insertOrReplace("T", prev);
    if (err != null) return err.toString();
    etags += " " + prev.etag;
  }
  return errText(c.replyText(etags));
}

// httpEcho answers an HTTP trigger with 202, the request's headers and a
// header X-Param-<name> for each route parameter, and replies with the
// request's other fields and the first value of its Content-Type.
function httpEcho(c: Context): string | null {
  const req = c.http();
  if (req == null) return "no HTTP request in the trigger";
  const header = new Map<string, string[]>();
  const names = req.header.keys();
  for (let i = 0; i < names.length; i++) header.set(names[i], req.header.get(names[i]));
  const params = req.params.keys();
  for (let i = 0; i < params.length; i++) header.set("X-Param-" + params[i], [req.param(params[i])]);
  const err = c.respond(202, header);
  if (err != null) return err.toString();
  const s = req.method + " " + req.path + " " + req.route + " " + req.query + " " + req.caller + " " + req.headerValue("content-type") + " [" + req.param("absent") + "]";
  return errText(c.replyText(s));
}
