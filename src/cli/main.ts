#!/usr/bin/env node
import { parseArgs } from "node:util";
import { ConfigError } from "../config.js";
import { dev, memberAdd, migrate, serve, sourceCreate, tenantCreate } from "./commands.js";
import { probeSkill } from "./probe.js";

const USAGE = `usage:
  agentplane serve [--role api|worker|all]          run the service (configured by AGENTPLANE_* variables);
                                                     api: HTTP only, worker: executes runs, all (default): both
  agentplane dev                                     run locally: SQLite in ./data, embedded token issuer
  agentplane migrate                                 apply database migrations
  agentplane tenant create <slug> [--admin <subject>] [--display-name <name>]
  agentplane member add <tenant> <subject> [--role admin|viewer]
  agentplane source create <tenant> <name>          create a webhook source; prints its token once
  agentplane skill probe --url <mcp url> [--bearer T | --issuer I --client-id C --client-secret S [--scope S]...]
                                                     connect as the runtime would and list the tools`;

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      admin: { type: "string" },
      "display-name": { type: "string" },
      // member add: admin|viewer (default viewer); serve: api|worker|all.
      role: { type: "string" },
      url: { type: "string" },
      bearer: { type: "string" },
      issuer: { type: "string" },
      "client-id": { type: "string" },
      "client-secret": { type: "string" },
      scope: { type: "string", multiple: true },
      audience: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, sub, ...rest] = positionals;
  if (values.help || !command) return void console.log(USAGE);
  switch (`${command}${sub && command !== "serve" && command !== "dev" && command !== "migrate" ? " " + sub : ""}`) {
    case "serve":
      return serve(values.role);
    case "dev":
      return dev();
    case "migrate":
      return migrate();
    case "tenant create":
      if (!rest[0]) throw new UsageError("tenant create needs a slug");
      return tenantCreate(rest[0], values.admin, values["display-name"]);
    case "source create":
      if (!rest[0] || !rest[1]) throw new UsageError("source create needs a tenant and a name");
      return sourceCreate(rest[0], rest[1]);
    case "skill probe": {
      if (!values.url) throw new UsageError("skill probe needs --url");
      const allow = process.env.AGENTPLANE_OUTBOUND_ALLOW?.split(",").map((c) => c.trim()).filter(Boolean) ?? [];
      process.exitCode = await probeSkill({
        url: values.url,
        bearer: values.bearer,
        issuer: values.issuer,
        clientId: values["client-id"],
        clientSecret: values["client-secret"],
        scopes: values.scope ?? [],
        audience: values.audience,
        allow,
      });
      return;
    }
    case "member add":
      if (!rest[0] || !rest[1]) throw new UsageError("member add needs a tenant and a subject");
      return memberAdd(rest[0], rest[1], values.role ?? "viewer");
    default:
      throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  }
}

class UsageError extends Error {}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) console.error(`${err.message}\n${USAGE}`);
  else if (err instanceof ConfigError) console.error(err.message);
  else console.error(`agentplane: ${(err as Error).message}`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
