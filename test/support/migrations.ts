import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// A copy in `dir` of an engine's committed migrations that stops before the
// one tagged `tag` (e.g. "0012"): a database migrated with it is one an
// earlier version left, for testing the upgrade.
export function migrationsBefore(engine: "sqlite" | "postgres", dir: string, tag: string): string {
  const folder = join(dir, "migrations");
  cpSync(join(process.cwd(), "src/store", engine, "migrations"), folder, { recursive: true });
  const journalPath = join(folder, "meta/_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(0, journal.entries.findIndex((e) => e.tag.startsWith(tag)));
  writeFileSync(journalPath, JSON.stringify(journal));
  return folder;
}
