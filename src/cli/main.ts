#!/usr/bin/env node
import { parseArgs, type ParseArgsConfig } from "node:util";
import { DEV_VARIABLES, SERVE_VARIABLES, type ConfigVariable } from "../config-variables.js";
import { TOKEN_ENDPOINT_AUTH_METHODS } from "../integrations/mcp-client/token-endpoint-auth-methods.js";

// Each command loads what it needs when it runs (`import()` below): `--help`,
// a usage error or a store command never loads the HTTP stack, and `serve`
// never loads what only the store commands use.

type Options = NonNullable<ParseArgsConfig["options"]>;
type Values = Record<string, string | string[] | boolean | undefined>;

interface Command {
  name: string;
  // Positional arguments, as the usage line shows them.
  args: string[];
  synopsis: string;
  // Lines under the usage line: what it does, then each option.
  help: string[];
  options: Options;
  // The AGENTPLANE_* variables its --help lists.
  environment?: readonly ConfigVariable[];
  run(args: string[], values: Values): Promise<void>;
}

const str = (v: Values[string]) => v as string | undefined;

const COMMANDS: Command[] = [
  {
    name: "serve",
    args: [],
    synopsis: "[--role api|worker|all]",
    help: [
      "run the service, configured by AGENTPLANE_* variables (docs/reference/configuration.md)",
      "--role api|worker|all   api: HTTP only, worker: executes runs, all (default): both",
    ],
    options: { role: { type: "string" } },
    environment: SERVE_VARIABLES,
    run: async (_args, v) => (await import("./serve.js")).serve(str(v.role)),
  },
  {
    name: "dev",
    args: [],
    synopsis: "",
    help: ["run locally: SQLite in ./data, embedded token issuer, a dev tenant"],
    options: {},
    environment: DEV_VARIABLES,
    run: async () => (await import("./serve.js")).dev(),
  },
  {
    name: "migrate",
    args: [],
    synopsis: "",
    help: ["apply database migrations (AGENTPLANE_DATABASE_URL, else SQLite in AGENTPLANE_DATA_DIR)"],
    options: {},
    run: async () => (await import("./operator.js")).migrate(),
  },
  {
    name: "tenant create",
    args: ["slug"],
    synopsis: "<slug> [--admin <subject>] [--display-name <name>]",
    help: [
      "create a tenant",
      "--admin <subject>       add this token subject as the tenant's admin",
      "--display-name <name>   the name shown for it",
    ],
    options: { admin: { type: "string" }, "display-name": { type: "string" } },
    run: async ([slug], v) => (await import("./operator.js")).tenantCreate(slug!, str(v.admin), str(v["display-name"])),
  },
  {
    name: "member add",
    args: ["tenant", "subject"],
    synopsis: "<tenant> <subject> [--role admin|viewer]",
    help: ["add a token subject to a tenant", "--role admin|viewer     default viewer"],
    options: { role: { type: "string" } },
    run: async ([tenant, subject], v) => (await import("./operator.js")).memberAdd(tenant!, subject!, str(v.role) ?? "viewer"),
  },
  {
    name: "source create",
    args: ["tenant", "name"],
    synopsis: "<tenant> <name> [--kind envelope|standard_webhooks|github|stripe] [--signing-secret <secret>]",
    help: [
      "create a webhook source; prints its token once (a signed kind: its URL, and its signing secret once when generated)",
      "--kind <kind>              envelope (default: X-Webhook-Token at /webhooks/events), or a provider's signed",
      "                           deliveries at the source's URL: standard_webhooks, github, stripe",
      "--signing-secret <secret>  the provider's secret (Stripe: required, whsec_...); unset, one is generated",
      "                           (signed kinds need AGENTPLANE_SECRET_KEY; the URL uses AGENTPLANE_PUBLIC_URL)",
    ],
    options: { kind: { type: "string" }, "signing-secret": { type: "string" } },
    run: async ([tenant, name], v) => (await import("./operator.js")).sourceCreate(tenant!, name!, str(v.kind), str(v["signing-secret"])),
  },
  {
    name: "skill probe",
    args: [],
    synopsis: "--url <mcp url> [--bearer T | --header 'Name: value'... | --issuer I --client-id C (--client-secret S | --private-key-file F) [--auth-method M] [--scope S]... [--audience A]]",
    help: [
      "connect to an MCP server as the runtime would and list its tools",
      "(loopback and private addresses need AGENTPLANE_OUTBOUND_ALLOW)",
      "--url <mcp url>           the server's Streamable HTTP endpoint",
      "--bearer <token>          a static bearer token",
      "--header 'Name: value'    a fixed header (repeatable), as a skill's headers mode",
      "--issuer <url>            OAuth client credentials: the authorization server",
      "--client-id, --client-secret, --scope (repeatable), --audience",
      "--private-key-file <pem>  private_key_jwt: an RS256 or ES256 private key",
      `--auth-method <method>    pin ${TOKEN_ENDPOINT_AUTH_METHODS.join(", ")}; default: from the server's metadata`,
    ],
    options: {
      url: { type: "string" },
      bearer: { type: "string" },
      header: { type: "string", multiple: true },
      issuer: { type: "string" },
      "client-id": { type: "string" },
      "client-secret": { type: "string" },
      scope: { type: "string", multiple: true },
      audience: { type: "string" },
      "private-key-file": { type: "string" },
      "auth-method": { type: "string" },
    },
    async run(_args, v) {
      if (!v.url) throw new UsageError("skill probe needs --url", this);
      const authMethod = TOKEN_ENDPOINT_AUTH_METHODS.find((m) => m === v["auth-method"]);
      if (v["auth-method"] !== undefined && !authMethod) throw new UsageError(`--auth-method must be one of ${TOKEN_ENDPOINT_AUTH_METHODS.join(", ")}`, this);
      const [{ ConnectError }, { checkSkillHeader }, { probeSkill }] = await Promise.all([
        import("@connectrpc/connect"),
        import("../service/skill-auth.js"),
        import("./probe.js"),
      ]);
      const allow = process.env.AGENTPLANE_OUTBOUND_ALLOW?.split(",").map((c) => c.trim()).filter(Boolean) ?? [];
      const headers: Record<string, string> = {};
      for (const [i, line] of ((v.header as string[] | undefined) ?? []).entries()) {
        const at = line.indexOf(":");
        if (at < 1) throw new UsageError("--header must be 'Name: value'", this);
        const h = { name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() };
        try {
          headers[checkSkillHeader(`--header[${i}]`, h)] = h.value;
        } catch (err) {
          throw new UsageError(err instanceof ConnectError ? err.rawMessage : String(err), this);
        }
      }
      process.exitCode = await probeSkill({
        url: v.url as string,
        bearer: str(v.bearer),
        headers,
        issuer: str(v.issuer),
        clientId: str(v["client-id"]),
        clientSecret: str(v["client-secret"]),
        privateKeyFile: str(v["private-key-file"]),
        authMethod,
        scopes: (v.scope as string[] | undefined) ?? [],
        audience: str(v.audience),
        allow,
      });
    },
  },
];

const usageLine = (c: Command) => `agentplane ${c.name}${c.synopsis ? ` ${c.synopsis}` : ""}`;
const listing = (commands: Command[]) => commands.map((c) => `  ${usageLine(c)}\n      ${c.help[0]}`).join("\n");
const USAGE = `usage:\n${listing(COMMANDS)}\n\n'agentplane <command> --help' describes a command.`;
const environment = (vars: readonly ConfigVariable[]) => {
  const width = Math.max(...vars.map((v) => v.name.length));
  return `\nenvironment (every variable: docs/reference/configuration.md):\n${vars.map((v) => `  ${v.name.padEnd(width)}  ${v.what} (default: ${v.shownDefault})`).join("\n")}`;
};
const commandUsage = (c: Command) =>
  `usage: ${usageLine(c)}\n${c.help.map((l) => `  ${l}`).join("\n")}${c.environment ? environment(c.environment) : ""}`;

// `tenant`, `member`, `source`, `skill`: the first word of the commands
// that have two, and the commands under each.
const subCommands = (group: string) => COMMANDS.filter((c) => c.name.startsWith(`${group} `));
const groupUsage = (group: string) => `usage:\n${listing(subCommands(group))}\n\n'agentplane ${group} <command> --help' describes a command.`;

class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: Command,
    // The group's listing instead of every command's.
    readonly group?: string,
  ) {
    super(message);
  }
}

async function main(argv: string[]): Promise<void> {
  const words = argv.slice(0, 2).filter((w) => !w.startsWith("-"));
  const command = COMMANDS.find((c) => c.name === words.join(" ") || c.name === words[0]);
  if (!command) {
    const asksHelp = argv.includes("--help") || argv.includes("-h");
    if (!argv.length) throw new UsageError("no command given");
    const group = words[0] !== undefined && subCommands(words[0]).length ? words[0] : undefined;
    if (asksHelp && !words.length) return void console.log(USAGE);
    if (asksHelp && group && words.length === 1) return void console.log(groupUsage(group));
    if (group && words.length === 1) throw new UsageError(`${group} needs a command`, undefined, group);
    throw new UsageError(`unknown command "${words.join(" ") || argv[0]}"`, undefined, group);
  }
  const rest = argv.slice(command.name.split(" ").length);
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: rest, allowPositionals: true, strict: true, options: { ...command.options, help: { type: "boolean", short: "h" } } });
  } catch (err) {
    // Node's messages name the option ("Unknown option '--x'"); the rest is advice for scripts.
    const first = (err as Error).message.split(/\.\s/)[0] ?? "";
    throw new UsageError(first.charAt(0).toLowerCase() + first.slice(1), command);
  }
  if (parsed.values.help) return void console.log(commandUsage(command));
  const { positionals } = parsed;
  if (positionals.length > command.args.length) throw new UsageError(`unexpected argument "${positionals[command.args.length]}"`, command);
  const missing = command.args.slice(positionals.length);
  if (missing.length) throw new UsageError(`${command.name} needs ${missing.map((a) => `<${a}>`).join(" and ")}`, command);
  await command.run(positionals, parsed.values);
}

main(process.argv.slice(2)).catch(async (err: unknown) => {
  if (err instanceof UsageError) console.error(`${err.message}\n${err.command ? commandUsage(err.command) : err.group ? groupUsage(err.group) : USAGE}`);
  else if (err instanceof (await import("../config.js")).ConfigError) console.error((err as Error).message);
  else console.error(`agentplane: ${(err as Error).message}`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
