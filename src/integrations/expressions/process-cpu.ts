// CPU time a child process has used, from Linux's /proc (user + system
// time in clock ticks, 100 a second on every Linux the service runs on):
// an expression's budget counts what its process computed, not the time the
// machine's other work kept it waiting. Undefined where /proc is not there
// (another OS, the process gone): the caller falls back to wall time.
import { readFileSync } from "node:fs";

const TICK_MS = 10;

export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is the first, utime the 12th, stime the 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * TICK_MS : undefined;
  } catch {
    return undefined;
  }
}
