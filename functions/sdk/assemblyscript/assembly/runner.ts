// The runner calls: the imports of the module "cairn" and the answer
// buffer (see functions/abi for their contract).

import { Entity } from "./entity";
import { Reader, Writer } from "./msgpack";
import { Trigger } from "./trigger";

// @ts-ignore: decorator
@external("cairn", "call")
declare function runnerCall(op: i32, reqPtr: usize, reqLen: usize, outPtr: usize, outCap: usize): i32;

// @ts-ignore: decorator
@external("cairn", "take")
declare function runnerTake(outPtr: usize, outCap: usize): i32;

// The operations.
export const OP_TRIGGER: i32 = 1;
export const OP_GET: i32 = 2;
export const OP_QUERY: i32 = 3;
export const OP_WRITE: i32 = 4;
export const OP_ENQUEUE: i32 = 5;
export const OP_OUTPUT: i32 = 6;
export const OP_LOG: i32 = 7;
export const OP_FAIL: i32 = 8;
export const OP_SETTING: i32 = 9;
export const OP_RESPOND: i32 = 10;

function opName(op: i32): string {
  switch (op) {
    case OP_TRIGGER:
      return "trigger";
    case OP_GET:
      return "get";
    case OP_QUERY:
      return "query";
    case OP_WRITE:
      return "write";
    case OP_ENQUEUE:
      return "enqueue";
    case OP_OUTPUT:
      return "output";
    case OP_LOG:
      return "log";
    case OP_FAIL:
      return "fail";
    case OP_SETTING:
      return "setting";
    case OP_RESPOND:
      return "respond";
  }
  return "op(" + op.toString() + ")";
}

// CairnError is an error of the store (an Azure code such as
// "EntityAlreadyExists" and a message), or of the runner call itself
// (code "": the runner refused the call, or its answer did not decode).
export class CairnError {
  constructor(public code: string, public message: string) {}

  toString(): string {
    return this.code == "" ? this.message : this.code + ": " + this.message;
  }
}

// Response is a decoded answer.
export class Response {
  error: CairnError | null = null;
  trigger: Trigger | null = null;
  entity: Entity | null = null;
  entities: Entity[] = [];
  // value is a setting's value; hasValue tells whether it was given.
  value: string = "";
  hasValue: bool = false;
}

// The globals below are made on first use, not by initialisers: the
// library's abort (cairn_abort) may run before this file's initialisers.

// writer is the one encoder of requests: a guest runs one call at a time.
let writer: Writer | null = null;

// request returns the encoder of requests, reset.
export function request(): Writer {
  let w = writer;
  if (w == null) {
    w = new Writer();
    writer = w;
  }
  w.reset();
  return w;
}

// answer is the buffer the runner writes its answers into; it grows to the
// largest answer seen.
let answer: ArrayBuffer | null = null;

// roundTrip makes one runner call with the bytes at [ptr, ptr+len) and
// returns its raw answer, valid until the next call, or null when the
// runner refused the call (a bad pointer, an unknown operation).
export function roundTrip(op: i32, ptr: usize, len: i32): Uint8Array | null {
  let buf = answer;
  if (buf == null) {
    buf = new ArrayBuffer(64 << 10);
    answer = buf;
  }
  const n = runnerCall(op, ptr, <usize>len, changetype<usize>(buf), <usize>buf.byteLength);
  if (n < 0) return null;
  if (n > buf.byteLength) {
    buf = new ArrayBuffer(n);
    answer = buf;
    if (runnerTake(changetype<usize>(buf), <usize>n) != n) return null;
  }
  return Uint8Array.wrap(buf, 0, n);
}

// call performs op with a request of raw bytes and decodes the answer.
export function call(op: i32, ptr: usize, len: i32): Response {
  const ans = roundTrip(op, ptr, len);
  const resp = new Response();
  if (ans == null) {
    resp.error = new CairnError("", "cairn: the runner refused the " + opName(op) + " call (ABI misuse: a bad pointer or an unknown operation)");
    return resp;
  }
  const r = new Reader(ans);
  const n = r.mapLen();
  for (let i = 0; i < n && r.err == null; i++) {
    const k = r.str();
    if (k == "err") {
      let code = "";
      let msg = "";
      const m = r.mapLen();
      for (let j = 0; j < m && r.err == null; j++) {
        const f = r.str();
        if (f == "c") code = r.str();
        else if (f == "m") msg = r.str();
        else r.skip();
      }
      if (r.err == null) resp.error = new CairnError(code, msg);
    } else if (k == "trig") {
      resp.trigger = r.nil() ? null : Trigger.decode(r);
    } else if (k == "e") {
      resp.entity = Entity.decodeWithETag(r);
    } else if (k == "es") {
      const m = r.arrayLen();
      for (let j = 0; j < m && r.err == null; j++) {
        const e = Entity.decodeWithETag(r);
        if (e != null) resp.entities.push(e);
      }
    } else if (k == "v") {
      if (!r.nil()) {
        resp.value = r.str();
        resp.hasValue = true;
      }
    } else r.skip();
  }
  const err = r.err;
  if (err != null) {
    const out = new Response();
    out.error = new CairnError("", "cairn: " + opName(op) + ": decode the answer: " + err);
    return out;
  }
  return resp;
}

// callRequest performs op with what request holds.
export function callRequest(op: i32): Response {
  const b = writer!.bytes();
  return call(op, b.dataStart, b.length);
}

// callText performs op with the UTF-8 of s as its raw request (a lone
// surrogate becomes U+FFFD, as in every string the SDK sends).
export function callText(op: i32, s: string): Response {
  const b = String.UTF8.encode(s, false, String.UTF8.ErrorMode.REPLACE);
  return call(op, changetype<usize>(b), b.byteLength);
}

// callBytes performs op with raw bytes.
export function callBytes(op: i32, b: Uint8Array): Response {
  return call(op, b.dataStart, b.length);
}
