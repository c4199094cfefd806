import { readFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "./lib/project-root.js";

export const VERSION = (JSON.parse(readFileSync(join(projectRoot(), "package.json"), "utf8")) as { version: string }).version;
