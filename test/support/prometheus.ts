// Reads the Prometheus text format as a scraper would: samples by name and
// exact label set, and the metric families declared by `# TYPE`.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? "").matchAll(LABEL)) labels[k!] = v!.replace(/\\(.)/g, "$1");
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

// The sample with exactly these labels; undefined when absent.
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels);
  const hit = parseSamples(text).find(
    (s) => s.name === name && Object.keys(s.labels).length === want.length && want.every(([k, v]) => s.labels[k] === v),
  );
  return hit?.value;
}

// Families declared in the exposition (`# TYPE name type`).
export function families(text: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) found.set(m[1]!, m[2]!);
  return found;
}

// Every family name appears once: two registries printing the same family
// would make the exposition invalid.
export function duplicateFamilies(text: string): string[] {
  const seen = new Set<string>();
  const twice: string[] = [];
  for (const m of text.matchAll(/^# TYPE (\S+) /gm)) {
    if (seen.has(m[1]!)) twice.push(m[1]!);
    seen.add(m[1]!);
  }
  return twice;
}
