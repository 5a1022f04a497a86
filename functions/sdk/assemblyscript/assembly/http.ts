// The request of an HTTP trigger, as op 1 (trigger) answers it in
// "http", and the reply's status and headers, as op 10 (respond) takes
// them.

import { Reader, Writer } from "./msgpack";

// HTTPRequest is the request that an HTTP trigger is about; its body is
// the trigger's body.
export class HTTPRequest {
  method: string = "";
  // path is what follows /fn/<function>, as sent (escaped); route is the
  // pattern of the route it matched, and params its parameters,
  // unescaped.
  path: string = "";
  route: string = "";
  params: Map<string, string> = new Map<string, string>();
  // query is the raw query string, without "?".
  query: string = "";
  // header holds the request's headers, names canonical
  // ("Content-Type"), without those that carried its authorisation
  // (Authorization, x-functions-key) and cookies.
  header: Map<string, string[]> = new Map<string, string[]>();
  // caller names who called: "key:<name>" for a function key,
  // "account:<account>" for a request signed with an account's key,
  // "sas:<account>" for an account's shared access signature,
  // "anonymous" on an anonymous route.
  caller: string = "";

  // param is the route's parameter name, or "" when the route has none
  // of that name. (A Map's get aborts on a missing key; this does not.)
  param(name: string): string {
    return this.params.has(name) ? this.params.get(name) : "";
  }

  // headerValue is the first value of the header name, matched without
  // regard to case, or "" when the request has none.
  headerValue(name: string): string {
    const vs = this.headerValues(name);
    return vs.length > 0 ? vs[0] : "";
  }

  // headerValues are the values of the header name, matched without
  // regard to case (empty when the request has none).
  headerValues(name: string): string[] {
    if (this.header.has(name)) return this.header.get(name);
    const lower = name.toLowerCase();
    const keys = this.header.keys();
    for (let i = 0; i < keys.length; i++) {
      if (keys[i].toLowerCase() == lower) return this.header.get(keys[i]);
    }
    return [];
  }

  static decode(r: Reader): HTTPRequest {
    const h = new HTTPRequest();
    const n = r.mapLen();
    for (let i = 0; i < n && r.err == null; i++) {
      const k = r.str();
      if (k == "m") h.method = r.str();
      else if (k == "p") h.path = r.str();
      else if (k == "r") h.route = r.str();
      else if (k == "qs") h.query = r.str();
      else if (k == "c") h.caller = r.str();
      else if (k == "pa") {
        const m = r.mapLen();
        for (let j = 0; j < m && r.err == null; j++) {
          const name = r.str();
          h.params.set(name, r.str());
        }
      } else if (k == "h") {
        const m = r.mapLen();
        for (let j = 0; j < m && r.err == null; j++) {
          const name = r.str();
          const vs: string[] = [];
          const a = r.arrayLen();
          for (let v = 0; v < a && r.err == null; v++) vs.push(r.str());
          h.header.set(name, vs);
        }
      } else r.skip();
    }
    return h;
  }
}

// encodeRespond writes op 10's request: {"s": status, "h": {name:
// [values]}} (no headers: an empty map).
export function encodeRespond(w: Writer, status: i32, header: Map<string, string[]> | null): void {
  w.mapLen(2);
  w.str("s");
  w.int(<i64>status);
  w.str("h");
  if (header == null) {
    w.mapLen(0);
    return;
  }
  const names = header.keys();
  w.mapLen(names.length);
  for (let i = 0; i < names.length; i++) {
    const vs = header.get(names[i]);
    w.str(names[i]);
    w.arrayLen(vs.length);
    for (let j = 0; j < vs.length; j++) w.str(vs[j]);
  }
}
