// Expressions and inputs that amplify (issue 19 item 2), shared by the suites
// and the isolation bench.

// A constant expression of about 5.4 KB, no input needed: joins of joins,
// 599³ × 2 = 430 M characters (a valid string), whose `$length` copies each
// character into an array past V8's largest and ends the process.
export function joinsOfJoins(width: number, separator: string): string {
  const list = `[${Array.from({ length: width }, () => '""').join(",")}]`;
  return `$length($join(${list}, $join(${list}, $join(${list}, "${separator}"))))`;
}
export const CONSTANT = joinsOfJoins(600, "yy");

// 55 KB whose join is 228 M characters (11,999 × 19,000), past V8's
// largest array once `$length` copies it (the process ended with "invalid
// size").
export const AMPLIFIED = { w: Array.from({ length: 12_000 }, () => ""), s: "x".repeat(19_000) };
export const AMPLIFYING_FILTER = "$length($join(payload.w, payload.s)) > 0";
