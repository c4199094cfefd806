// A plain-text results table: a header row, a rule of dashes, then one line
// per row, columns two spaces apart. Columns listed in `leftAligned` are padded
// on the right, the others (numbers) on the left; trailing spaces are trimmed.
export function printTable(header: string[], rows: string[][], leftAligned: readonly number[] = [0]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    c.map((v, i) => (leftAligned.includes(i) ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join("  ").trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const c of rows) console.log(line(c));
}
