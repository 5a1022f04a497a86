// Entities and their typed values, in the command protocol's msgpack form
// (docs/PROTOCOL.md, msgpack): {"pk", "rk", "ts", "p": [[name, type,
// value], …]}.

import { Reader, Writer } from "./msgpack";

// Edm is a property's type; the numbers are the protocol's.
export enum Edm {
  String = 1,
  Int32 = 2,
  Int64 = 3,
  Double = 4,
  Boolean = 5,
  DateTime = 6, // 100 ns ticks since 1970-01-01 UTC
  Guid = 7, // 16 bytes
  Binary = 8,
}

// Value is a property's value: one of the eight Azure types. An accessor
// of another type returns that type's zero, so check type when a
// property may hold another.
export class Value {
  constructor(
    public readonly type: Edm,
    private s: string,
    private n: i64,
    private f: f64,
    private b: Uint8Array | null,
  ) {}

  static string(s: string): Value {
    return new Value(Edm.String, s, 0, 0, null);
  }
  static int32(i: i32): Value {
    return new Value(Edm.Int32, "", <i64>i, 0, null);
  }
  static int64(i: i64): Value {
    return new Value(Edm.Int64, "", i, 0, null);
  }
  static double(f: f64): Value {
    return new Value(Edm.Double, "", 0, f, null);
  }
  static boolean(b: bool): Value {
    return new Value(Edm.Boolean, "", b ? 1 : 0, 0, null);
  }
  // dateTime is a DateTime of ticks (100 ns since the Unix epoch, UTC).
  static dateTime(ticks: i64): Value {
    return new Value(Edm.DateTime, "", ticks, 0, null);
  }
  // guid is a Guid of 16 bytes (copied); another length is refused by
  // the store with InvalidInput.
  static guid(bytes: Uint8Array): Value {
    return new Value(Edm.Guid, "", 0, 0, bytes.slice());
  }
  // binary is a Binary (copied).
  static binary(bytes: Uint8Array): Value {
    return new Value(Edm.Binary, "", 0, 0, bytes.slice());
  }

  // str is a String's text.
  str(): string {
    return this.type == Edm.String ? this.s : "";
  }
  // int is an Int32's or Int64's value.
  int(): i64 {
    return this.type == Edm.Int32 || this.type == Edm.Int64 ? this.n : 0;
  }
  double(): f64 {
    return this.type == Edm.Double ? this.f : 0;
  }
  boolean(): bool {
    return this.type == Edm.Boolean && this.n != 0;
  }
  ticks(): i64 {
    return this.type == Edm.DateTime ? this.n : 0;
  }
  // bytes is a copy of a Guid's or Binary's bytes.
  bytes(): Uint8Array {
    const b = this.b;
    if ((this.type == Edm.Guid || this.type == Edm.Binary) && b != null) return b.slice();
    return new Uint8Array(0);
  }

  encode(w: Writer): void {
    switch (this.type) {
      case Edm.String:
        w.str(this.s);
        break;
      case Edm.Int32:
      case Edm.Int64:
      case Edm.DateTime:
        w.int(this.n);
        break;
      case Edm.Double:
        w.f64(this.f);
        break;
      case Edm.Boolean:
        w.bool(this.n != 0);
        break;
      default: {
        const b = this.b;
        w.bin(b != null ? b : new Uint8Array(0));
      }
    }
  }

  static decode(r: Reader, type: u64): Value {
    switch (<i32>type) {
      case Edm.String:
        return Value.string(r.str());
      case Edm.Int32:
        return new Value(Edm.Int32, "", r.int(), 0, null);
      case Edm.Int64:
        return Value.int64(r.int());
      case Edm.Double:
        return Value.double(r.float());
      case Edm.Boolean:
        return Value.boolean(r.bool());
      case Edm.DateTime:
        return Value.dateTime(r.int());
      case Edm.Guid:
        return new Value(Edm.Guid, "", 0, 0, r.bin());
      case Edm.Binary:
        return new Value(Edm.Binary, "", 0, 0, r.bin());
    }
    r.fail("a property of unknown type " + type.toString());
    return Value.string("");
  }
}

// Property is a named value.
export class Property {
  constructor(public name: string, public value: Value) {}
}

// Entity is a row: its keys, its timestamp (ticks, set by the store on
// every write; ignored in a write), its properties, and its ETag when it
// was read ("" for one this invocation wrote, which has none until
// committed).
export class Entity {
  timestamp: i64 = 0;
  etag: string = "";
  properties: Property[] = [];

  constructor(public partitionKey: string, public rowKey: string) {}

  // get returns the property's value, or null.
  get(name: string): Value | null {
    const ps = this.properties;
    for (let i = 0; i < ps.length; i++) {
      if (ps[i].name == name) return ps[i].value;
    }
    return null;
  }

  // set sets a property, replacing one of the same name; it returns the
  // entity, so that calls chain.
  set(name: string, value: Value): Entity {
    const ps = this.properties;
    for (let i = 0; i < ps.length; i++) {
      if (ps[i].name == name) {
        ps[i].value = value;
        return this;
      }
    }
    ps.push(new Property(name, value));
    return this;
  }

  // remove drops a property; it tells whether there was one.
  remove(name: string): bool {
    const ps = this.properties;
    for (let i = 0; i < ps.length; i++) {
      if (ps[i].name == name) {
        ps.splice(i, 1);
        return true;
      }
    }
    return false;
  }

  // encode writes the protocol's form {"pk", "rk", ["ts",] "p"}.
  encode(w: Writer): void {
    w.mapLen(this.timestamp != 0 ? 4 : 3);
    w.str("pk");
    w.str(this.partitionKey);
    w.str("rk");
    w.str(this.rowKey);
    if (this.timestamp != 0) {
      w.str("ts");
      w.int(this.timestamp);
    }
    w.str("p");
    const ps = this.properties;
    w.arrayLen(ps.length);
    for (let i = 0; i < ps.length; i++) {
      w.arrayLen(3);
      w.str(ps[i].name);
      w.uint(<u64>ps[i].value.type);
      ps[i].value.encode(w);
    }
  }

  // decode reads the protocol's form; unknown fields are skipped.
  static decode(r: Reader): Entity {
    const e = new Entity("", "");
    const n = r.mapLen();
    for (let i = 0; i < n && r.err == null; i++) {
      const k = r.str();
      if (k == "pk") e.partitionKey = r.str();
      else if (k == "rk") e.rowKey = r.str();
      else if (k == "ts") e.timestamp = r.int();
      else if (k == "p") {
        const m = r.arrayLen();
        for (let j = 0; j < m && r.err == null; j++) {
          if (r.arrayLen() != 3) {
            r.fail("want a property [name, type, value]");
            break;
          }
          const name = r.str();
          const v = Value.decode(r, r.uint());
          e.properties.push(new Property(name, v));
        }
      } else r.skip();
    }
    return e;
  }

  // decodeWithETag reads the ABI's [entity, etag]; null for nil.
  static decodeWithETag(r: Reader): Entity | null {
    if (r.nil()) return null;
    if (r.arrayLen() != 2) {
      r.fail("want [entity, etag]");
      return null;
    }
    const e = Entity.decode(r);
    e.etag = r.str();
    return e;
  }
}
