// The lines a logger writes, kept as the operator's log collector would see
// them: the raw text (to search for secrets) and each line parsed.
import type { Logger } from "pino";
import { createLogger } from "../../src/log.js";
import { waitFor } from "./wait.js";

export type LogLine = Record<string, unknown> & { level: number; msg: string };

export class LogCapture {
  raw = "";
  readonly lines: LogLine[] = [];
  readonly logger: Logger;

  constructor(level = "debug") {
    this.logger = createLogger(level, {
      write: (chunk: string) => {
        this.raw += chunk;
        for (const line of chunk.split("\n")) if (line) this.lines.push(JSON.parse(line) as LogLine);
      },
    });
  }

  // Lines with this message whose fields include `fields`.
  find(msg: string, fields: Record<string, unknown> = {}): LogLine[] {
    return this.lines.filter((l) => l.msg === msg && Object.entries(fields).every(([k, v]) => l[k] === v));
  }

  // The first such line, once it is written.
  async next(msg: string, fields: Record<string, unknown> = {}, timeoutMs = 10_000): Promise<LogLine> {
    return waitFor(`log line "${msg}" ${JSON.stringify(fields)}`, timeoutMs, async () => this.find(msg, fields)[0], 10);
  }
}
