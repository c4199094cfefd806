// Lists the tenant's agents, newest first, following the pages.
import { clientFromEnv } from "./env.js";

const client = clientFromEnv();
let pageToken = "";
do {
  const page = await client.listAgents({ pageSize: 100, pageToken });
  for (const agent of page.agents) console.log(`${agent.id}  ${agent.name}`);
  pageToken = page.nextPageToken;
} while (pageToken);
