// The msgpack codec of the ABI's messages: the few shapes the runner and
// the guest exchange (docs/FUNCTIONS.md, The ABI), written out by hand.

// Writer appends msgpack to a buffer that grows as needed; reset() makes
// it empty again, keeping the buffer.
export class Writer {
  buf: Uint8Array = new Uint8Array(256);
  len: i32 = 0;

  reset(): void {
    this.len = 0;
  }

  // bytes returns what was written, a view valid until the next write.
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  private room(n: i32): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const b = new Uint8Array(size);
    memory.copy(b.dataStart, this.buf.dataStart, <usize>this.len);
    this.buf = b;
  }

  u8(v: u32): void {
    this.room(1);
    store<u8>(this.buf.dataStart + <usize>this.len, <u8>v);
    this.len += 1;
  }

  u16(v: u32): void {
    this.room(2);
    store<u16>(this.buf.dataStart + <usize>this.len, bswap<u16>(<u16>v));
    this.len += 2;
  }

  u32(v: u32): void {
    this.room(4);
    store<u32>(this.buf.dataStart + <usize>this.len, bswap<u32>(v));
    this.len += 4;
  }

  u64(v: u64): void {
    this.room(8);
    store<u64>(this.buf.dataStart + <usize>this.len, bswap<u64>(v));
    this.len += 8;
  }

  raw(ptr: usize, n: i32): void {
    this.room(n);
    memory.copy(this.buf.dataStart + <usize>this.len, ptr, <usize>n);
    this.len += n;
  }

  nil(): void {
    this.u8(0xc0);
  }

  bool(b: bool): void {
    this.u8(b ? 0xc3 : 0xc2);
  }

  mapLen(n: i32): void {
    if (n < 16) this.u8(0x80 | n);
    else if (n <= 0xffff) {
      this.u8(0xde);
      this.u16(n);
    } else {
      this.u8(0xdf);
      this.u32(n);
    }
  }

  arrayLen(n: i32): void {
    if (n < 16) this.u8(0x90 | n);
    else if (n <= 0xffff) {
      this.u8(0xdc);
      this.u16(n);
    } else {
      this.u8(0xdd);
      this.u32(n);
    }
  }

  // str writes s in UTF-8 (a lone surrogate becomes U+FFFD).
  str(s: string): void {
    const n = String.UTF8.byteLength(s);
    if (n < 32) this.u8(0xa0 | n);
    else if (n <= 0xff) {
      this.u8(0xd9);
      this.u8(n);
    } else if (n <= 0xffff) {
      this.u8(0xda);
      this.u16(n);
    } else {
      this.u8(0xdb);
      this.u32(n);
    }
    this.room(n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.buf.dataStart + <usize>this.len, false, String.UTF8.ErrorMode.REPLACE);
    this.len += n;
  }

  bin(b: Uint8Array): void {
    const n = b.length;
    if (n <= 0xff) {
      this.u8(0xc4);
      this.u8(n);
    } else if (n <= 0xffff) {
      this.u8(0xc5);
      this.u16(n);
    } else {
      this.u8(0xc6);
      this.u32(n);
    }
    this.raw(b.dataStart, n);
  }

  // int writes i in its shortest form.
  int(i: i64): void {
    if (i >= 0) {
      this.uint(<u64>i);
    } else if (i >= -32) {
      this.u8(<u32>(<i32>i) & 0xff);
    } else if (i >= -128) {
      this.u8(0xd0);
      this.u8(<u32>(<i32>i) & 0xff);
    } else if (i >= -32768) {
      this.u8(0xd1);
      this.u16(<u32>(<i32>i) & 0xffff);
    } else if (i >= i32.MIN_VALUE) {
      this.u8(0xd2);
      this.u32(<u32>(<i32>i));
    } else {
      this.u8(0xd3);
      this.u64(<u64>i);
    }
  }

  uint(u: u64): void {
    if (u <= 0x7f) this.u8(<u32>u);
    else if (u <= 0xff) {
      this.u8(0xcc);
      this.u8(<u32>u);
    } else if (u <= 0xffff) {
      this.u8(0xcd);
      this.u16(<u32>u);
    } else if (u <= 0xffffffff) {
      this.u8(0xce);
      this.u32(<u32>u);
    } else {
      this.u8(0xcf);
      this.u64(u);
    }
  }

  f64(f: f64): void {
    this.u8(0xcb);
    this.u64(reinterpret<u64>(f));
  }
}

// Reader reads msgpack from a byte array. Its first error sticks: later
// reads return zero values, and err says what went wrong.
export class Reader {
  pos: i32 = 0;
  err: string | null = null;

  constructor(public b: Uint8Array) {}

  fail(msg: string): void {
    if (this.err == null) this.err = msg;
    this.pos = this.b.length;
  }

  private need(n: i64): bool {
    if (n < 0 || <i64>this.pos + n > <i64>this.b.length) {
      this.fail("the message ends early");
      return false;
    }
    return true;
  }

  // peek returns the next byte without reading it (-1 at the end).
  peek(): i32 {
    return this.pos < this.b.length ? <i32>unchecked(this.b[this.pos]) : -1;
  }

  byte(): u32 {
    if (!this.need(1)) return 0;
    return <u32>unchecked(this.b[this.pos++]);
  }

  be16(): u32 {
    if (!this.need(2)) return 0;
    const v = bswap<u16>(load<u16>(this.b.dataStart + <usize>this.pos));
    this.pos += 2;
    return <u32>v;
  }

  be32(): u32 {
    if (!this.need(4)) return 0;
    const v = bswap<u32>(load<u32>(this.b.dataStart + <usize>this.pos));
    this.pos += 4;
    return v;
  }

  be64(): u64 {
    if (!this.need(8)) return 0;
    const v = bswap<u64>(load<u64>(this.b.dataStart + <usize>this.pos));
    this.pos += 8;
    return v;
  }

  // nil reads a nil if one is next.
  nil(): bool {
    if (this.peek() == 0xc0) {
      this.pos++;
      return true;
    }
    return false;
  }

  // mapLen reads a map's length (0 for nil).
  mapLen(): i32 {
    const c = this.byte();
    if ((c & 0xf0) == 0x80) return <i32>(c & 0x0f);
    if (c == 0xde) return this.length(this.be16());
    if (c == 0xdf) return this.length(this.be32());
    if (c == 0xc0) return 0;
    this.fail("want a map");
    return 0;
  }

  // arrayLen reads an array's length (0 for nil).
  arrayLen(): i32 {
    const c = this.byte();
    if ((c & 0xf0) == 0x90) return <i32>(c & 0x0f);
    if (c == 0xdc) return this.length(this.be16());
    if (c == 0xdd) return this.length(this.be32());
    if (c == 0xc0) return 0;
    this.fail("want an array");
    return 0;
  }

  // length bounds a count of items by the bytes left (each item is at
  // least one), so that a bad message cannot make a huge allocation.
  private length(n: u32): i32 {
    if (<i64>n > <i64>(this.b.length - this.pos)) {
      this.fail("the message ends early");
      return 0;
    }
    return <i32>n;
  }

  // rawLen reads the length of a string or binary (-1 for nil).
  private rawLen(): i64 {
    const c = this.byte();
    if ((c & 0xe0) == 0xa0) return <i64>(c & 0x1f);
    if (c == 0xd9 || c == 0xc4) return <i64>this.byte();
    if (c == 0xda || c == 0xc5) return <i64>this.be16();
    if (c == 0xdb || c == 0xc6) return <i64>this.be32();
    if (c == 0xc0) return -1;
    this.fail("want a string or binary");
    return 0;
  }

  // str reads a string ("" for nil).
  str(): string {
    const n = this.rawLen();
    if (n <= 0 || !this.need(n)) return "";
    const s = String.UTF8.decodeUnsafe(this.b.dataStart + <usize>this.pos, <usize>n);
    this.pos += <i32>n;
    return s;
  }

  // bin reads a binary or string as a copy of its bytes (empty for nil).
  bin(): Uint8Array {
    const n = this.rawLen();
    if (n <= 0 || !this.need(n)) return new Uint8Array(0);
    const out = this.b.slice(this.pos, this.pos + <i32>n);
    this.pos += <i32>n;
    return out;
  }

  // int reads an integer of any msgpack form.
  int(): i64 {
    const c = this.byte();
    if (c <= 0x7f) return <i64>c;
    if (c >= 0xe0) return <i64>(<i8>c);
    switch (c) {
      case 0xcc:
        return <i64>this.byte();
      case 0xcd:
        return <i64>this.be16();
      case 0xce:
        return <i64>this.be32();
      case 0xcf:
        return <i64>this.be64();
      case 0xd0:
        return <i64>(<i8>this.byte());
      case 0xd1:
        return <i64>(<i16>this.be16());
      case 0xd2:
        return <i64>(<i32>this.be32());
      case 0xd3:
        return <i64>this.be64();
      case 0xc0:
        return 0;
    }
    this.fail("want an integer");
    return 0;
  }

  uint(): u64 {
    return <u64>this.int();
  }

  float(): f64 {
    const c = this.byte();
    if (c == 0xcb) return reinterpret<f64>(this.be64());
    if (c == 0xca) return <f64>reinterpret<f32>(this.be32());
    if (c == 0xc0) return 0;
    this.pos--;
    return <f64>this.int();
  }

  bool(): bool {
    const c = this.byte();
    if (c == 0xc3) return true;
    if (c == 0xc2 || c == 0xc0) return false;
    this.fail("want a boolean");
    return false;
  }

  // skip reads one value of any type and drops it: a field this SDK does
  // not know, which a newer runner may send.
  skip(): void {
    const c = this.byte();
    if (this.err != null) return;
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) return;
    if ((c & 0xe0) == 0xa0) {
      this.advance(<i64>(c & 0x1f));
      return;
    }
    if ((c & 0xf0) == 0x80) {
      this.skipItems(<i64>(c & 0x0f) * 2);
      return;
    }
    if ((c & 0xf0) == 0x90) {
      this.skipItems(<i64>(c & 0x0f));
      return;
    }
    switch (c) {
      case 0xc4:
      case 0xd9:
        this.advance(<i64>this.byte());
        return;
      case 0xc5:
      case 0xda:
        this.advance(<i64>this.be16());
        return;
      case 0xc6:
      case 0xdb:
        this.advance(<i64>this.be32());
        return;
      case 0xc7: // ext 8, 16, 32: a length, a type, the data
        this.advance(<i64>this.byte() + 1);
        return;
      case 0xc8:
        this.advance(<i64>this.be16() + 1);
        return;
      case 0xc9:
        this.advance(<i64>this.be32() + 1);
        return;
      case 0xca:
      case 0xce:
      case 0xd2:
        this.advance(4);
        return;
      case 0xcb:
      case 0xcf:
      case 0xd3:
        this.advance(8);
        return;
      case 0xcc:
      case 0xd0:
        this.advance(1);
        return;
      case 0xcd:
      case 0xd1:
        this.advance(2);
        return;
      case 0xd4: // fixext 1, 2, 4, 8, 16: a type, the data
        this.advance(2);
        return;
      case 0xd5:
        this.advance(3);
        return;
      case 0xd6:
        this.advance(5);
        return;
      case 0xd7:
        this.advance(9);
        return;
      case 0xd8:
        this.advance(17);
        return;
      case 0xdc:
        this.skipItems(<i64>this.be16());
        return;
      case 0xdd:
        this.skipItems(<i64>this.be32());
        return;
      case 0xde:
        this.skipItems(<i64>this.be16() * 2);
        return;
      case 0xdf:
        this.skipItems(<i64>this.be32() * 2);
        return;
    }
    this.fail("invalid msgpack code 0x" + c.toString(16));
  }

  private advance(n: i64): void {
    if (this.need(n)) this.pos += <i32>n;
  }

  private skipItems(n: i64): void {
    if (n > <i64>(this.b.length - this.pos)) {
      this.fail("the message ends early");
      return;
    }
    for (let i: i64 = 0; i < n && this.err == null; i++) this.skip();
  }
}
