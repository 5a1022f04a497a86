// The message the function takes, and the totals it keeps.

import { Entity, Value } from "./cairn";

// Order is a message {"customer": "alice", "amount": 12.5}.
export class Order {
  constructor(public customer: string, public amount: f64) {}
}

// Parsed is an order, or why the body is not one.
export class Parsed {
  constructor(public order: Order | null, public error: string) {}
}

const WANT = 'want {"customer": "…", "amount": 12.5}';

// parseOrder reads an order from a JSON object; other fields are ignored.
export function parseOrder(body: string): Parsed {
  const s = new Scanner(body);
  let customer = "";
  let amount: f64 = 0;
  s.space();
  if (!s.eat(0x7b)) return new Parsed(null, WANT + ": the body is not a JSON object");
  s.space();
  if (!s.eat(0x7d)) {
    while (true) {
      s.space();
      const key = s.str();
      s.space();
      if (!s.eat(0x3a)) s.fail("want a colon after " + key);
      s.space();
      if (key == "customer") {
        if (s.peek() != 0x22) s.fail("customer is not a string");
        customer = s.str();
      } else if (key == "amount") {
        amount = s.num();
      } else s.value();
      s.space();
      if (s.err != null || s.eat(0x7d)) break;
      if (!s.eat(0x2c)) s.fail("want a comma or }");
    }
  }
  s.space();
  if (s.err == null && s.i < body.length) s.fail("text after the object");
  if (s.err != null) return new Parsed(null, WANT + ": " + s.err!);
  if (customer == "") return new Parsed(null, "the order names no customer");
  if (!isFinite(amount)) return new Parsed(null, "the amount is not a number");
  return new Parsed(new Order(customer, amount), "");
}

// Totals is what the entity holds: an Int64 and a Double property.
export class Totals {
  constructor(public orders: i64, public sum: f64) {}

  // of reads the properties of e (null: no orders yet). A property that
  // is missing, or of another type, reads as 0.
  static of(e: Entity | null): Totals {
    if (e == null) return new Totals(0, 0);
    const orders = e.get("Orders");
    const sum = e.get("Sum");
    return new Totals(orders != null ? orders.int() : 0, sum != null ? sum.double() : 0);
  }

  add(amount: f64): Totals {
    return new Totals(this.orders + 1, this.sum + amount);
  }

  entity(customer: string): Entity {
    return new Entity(customer, "total").set("Orders", Value.int64(this.orders)).set("Sum", Value.double(this.sum));
  }
}

// fixed2 writes x with two decimals, as "17.50".
export function fixed2(x: f64): string {
  const cents = Math.round(Math.abs(x) * 100);
  const whole = Math.floor(cents / 100);
  const frac = <i64>(cents - whole * 100);
  return (x < 0 && cents > 0 ? "-" : "") + (<i64>whole).toString() + "." + (frac < 10 ? "0" : "") + frac.toString();
}

// Scanner reads JSON text; its first error sticks.
class Scanner {
  i: i32 = 0;
  err: string | null = null;

  constructor(public s: string) {}

  fail(msg: string): void {
    if (this.err == null) this.err = msg;
    this.i = this.s.length;
  }

  peek(): i32 {
    return this.i < this.s.length ? this.s.charCodeAt(this.i) : -1;
  }

  eat(c: i32): bool {
    if (this.peek() != c) return false;
    this.i++;
    return true;
  }

  space(): void {
    while (true) {
      const c = this.peek();
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
      this.i++;
    }
  }

  str(): string {
    if (!this.eat(0x22)) {
      this.fail("want a string");
      return "";
    }
    let out = "";
    while (this.err == null) {
      const c = this.peek();
      if (c < 0) this.fail("the string does not end");
      else if (c == 0x22) {
        this.i++;
        break;
      } else if (c == 0x5c) {
        const e = this.s.charCodeAt(this.i + 1);
        this.i += 2;
        if (e == 0x6e) out += "\n";
        else if (e == 0x74) out += "\t";
        else if (e == 0x72) out += "\r";
        else if (e == 0x62) out += "\b";
        else if (e == 0x66) out += "\f";
        else if (e == 0x75) {
          const code = I32.parseInt(this.s.substring(this.i, this.i + 4), 16);
          this.i += 4;
          out += String.fromCharCode(code);
        } else out += String.fromCharCode(e);
      } else {
        out += String.fromCharCode(c);
        this.i++;
      }
    }
    return out;
  }

  num(): f64 {
    const start = this.i;
    while (true) {
      const c = this.peek();
      if (!((c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2b || c == 0x2e || c == 0x65 || c == 0x45)) break;
      this.i++;
    }
    if (this.i == start) {
      this.fail("want a number");
      return 0;
    }
    const f = parseFloat(this.s.substring(start, this.i));
    if (isNaN(f)) this.fail("a bad number");
    return f;
  }

  // value skips a value of any type.
  value(): void {
    const c = this.peek();
    if (c == 0x22) {
      this.str();
    } else if (c == 0x7b || c == 0x5b) {
      const close = c == 0x7b ? 0x7d : 0x5d;
      this.i++;
      this.space();
      if (this.eat(close)) return;
      while (this.err == null) {
        this.space();
        if (c == 0x7b) {
          this.str();
          this.space();
          if (!this.eat(0x3a)) this.fail("want a colon");
          this.space();
        }
        this.value();
        this.space();
        if (this.eat(close)) return;
        if (!this.eat(0x2c)) this.fail("want a comma");
      }
    } else if (this.s.startsWith("true", this.i)) this.i += 4;
    else if (this.s.startsWith("false", this.i)) this.i += 5;
    else if (this.s.startsWith("null", this.i)) this.i += 4;
    else this.num();
  }
}
