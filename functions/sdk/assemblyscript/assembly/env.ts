// What AssemblyScript's standard library would otherwise import from the
// module "env", which the sandbox does not give: abort, trace and the seed
// of Math.random. The build points the library at these with
// --use abort=cairn_abort, trace=cairn_trace and seed=cairn_seed
// (asconfig.json).

import { OP_FAIL, OP_LOG, callText } from "./runner";

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
declare function fdWrite(fd: u32, iovs: usize, iovsLen: u32, written: usize): u32;

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "random_get")
declare function randomGet(buf: usize, len: usize): u32;

// stderr writes s and a newline to the standard error, which the runner
// keeps for a crash's report.
function stderr(s: string): void {
  const b = String.UTF8.encode(s + "\n");
  const iov = memory.data(8);
  store<u32>(iov, <u32>changetype<usize>(b));
  store<u32>(iov, <u32>b.byteLength, 4);
  fdWrite(2, iov, 1, memory.data(4));
}

// cairn_abort ends an invocation that cannot go on (a failed assertion,
// a throw, an index out of range): it tells the runner why and traps, so
// the runner counts a crash and starts a fresh instance. The line
// "panic: …" on stderr is what the runner gives as the crash's reason.
// @ts-ignore: decorator
@global
export function cairn_abort(message: string | null = null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  let msg = message != null ? message : "abort";
  if (fileName != null) msg += " (" + fileName + ":" + line.toString() + ":" + column.toString() + ")";
  callText(OP_FAIL, msg);
  stderr("panic: " + msg);
  unreachable();
}

// cairn_trace writes trace()'s message and numbers to the node's log.
// @ts-ignore: decorator
@global
export function cairn_trace(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let line = "trace: " + message;
  const a = [a0, a1, a2, a3, a4];
  for (let i = 0; i < n && i < 5; i++) line += " " + a[i].toString();
  callText(OP_LOG, line);
}

// cairn_seed seeds Math.random from WASI's random_get, which the runner
// seeds from the trigger's id.
// @ts-ignore: decorator
@global
export function cairn_seed(): f64 {
  const buf = memory.data(8);
  randomGet(buf, 8);
  return reinterpret<f64>((load<u64>(buf) >> 12) | 0x3ff0000000000000);
}
