import type { Observer } from "../lib/observer.js";
import { VERSION } from "../version.js";
import { SkillPool } from "./mcp-client/skill-pool.js";
import type { FetchLike } from "./outbound/guarded-fetch.js";
import { DEFAULT_OUTBOUND, type OutboundOptions } from "./outbound/outbound.js";

// Every call to a customer MCP server, its metadata and its token endpoint
// goes through `fetch`, the outbound guard.
export function createSkillPool(
  fetch: FetchLike,
  options: Pick<OutboundOptions, "discoveryTimeoutMs" | "callTimeoutMs"> = DEFAULT_OUTBOUND,
  observer?: Observer,
): SkillPool {
  return new SkillPool({ fetch, discoveryTimeoutMs: options.discoveryTimeoutMs, callTimeoutMs: options.callTimeoutMs, version: VERSION, observer });
}
