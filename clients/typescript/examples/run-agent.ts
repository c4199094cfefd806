// Runs an agent by name with a JSON input and follows the run until it ends:
//   node dist/examples/run-agent.js <agent name> ['{"some": "input"}']
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { RunStatus, type Agent } from "@agentplane/client";
import { clientFromEnv } from "./env.js";

const ENDED = new Set([RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT]);
const [name, input = "{}"] = process.argv.slice(2);
if (!name) {
  console.error("usage: run-agent <agent name> [input JSON]");
  process.exit(2);
}
const client = clientFromEnv();

async function agentNamed(name: string): Promise<Agent | undefined> {
  let pageToken = "";
  do {
    const page = await client.listAgents({ pageSize: 100, pageToken });
    const agent = page.agents.find((a) => a.name === name);
    if (agent) return agent;
    pageToken = page.nextPageToken;
  } while (pageToken);
  return undefined;
}

try {
  const agent = await agentNamed(name);
  if (!agent) throw new Error(`no agent named "${name}"`);
  const { run } = await client.runAgent({ id: agent.id, input: fromJson(ValueSchema, JSON.parse(input)) });
  console.log(`run ${run!.id} queued`);
  // The run's state now, then again on every change, until it ends. The
  // server ends a quiet or long-lived stream OK (as when it shuts down):
  // then watch again.
  let last = run!;
  while (!ENDED.has(last.status)) for await (const { run: current } of client.watchRun({ id: last.id })) last = current!;
  const status = RunStatus[last.status].toLowerCase();
  console.log(last.status === RunStatus.SUCCEEDED ? `run ${last.id} ${status}: ${JSON.stringify(last.output && toJson(ValueSchema, last.output))}` : `run ${last.id} ${status}: ${last.error}`);
  process.exitCode = last.status === RunStatus.SUCCEEDED ? 0 : 1;
} catch (err) {
  // A refused call says why, e.g. PermissionDenied when the client is not a
  // member of the tenant.
  const e = ConnectError.from(err);
  console.error(e.code === Code.Unknown ? e.rawMessage : `${Code[e.code]}: ${e.rawMessage}`);
  process.exitCode = 1;
}
