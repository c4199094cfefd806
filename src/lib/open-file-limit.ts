import { readFileSync } from "node:fs";

// The soft limit on open files of this process (`ulimit -n`), where the
// system tells it (Linux); undefined elsewhere or when unlimited.
export function openFileLimit(): number | undefined {
  let limits: string;
  try {
    limits = readFileSync("/proc/self/limits", "utf8");
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+)/m.exec(limits)?.[1];
  return soft === undefined ? undefined : Number(soft);
}
