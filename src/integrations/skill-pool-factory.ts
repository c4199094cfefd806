import { VERSION } from "../version.js";
import { SkillPool } from "./mcp-client/skill-pool.js";
import { AddressPolicy } from "./outbound/address-policy.js";
import { createGuardedFetch } from "./outbound/guarded-fetch.js";

export interface OutboundOptions {
  // CIDRs that customer URLs may resolve to although private or loopback.
  allow: string[];
  discoveryTimeoutMs: number;
  callTimeoutMs: number;
  maxResponseBytes: number;
}

export const DEFAULT_OUTBOUND: OutboundOptions = {
  allow: [],
  discoveryTimeoutMs: 10_000,
  callTimeoutMs: 30_000,
  maxResponseBytes: 4 * 1024 * 1024,
};

// Every call to a customer MCP server, its metadata and its token endpoint
// goes through the outbound guard.
export function createSkillPool(options: OutboundOptions = DEFAULT_OUTBOUND): SkillPool {
  const fetch = createGuardedFetch({ policy: new AddressPolicy(options.allow), maxResponseBytes: options.maxResponseBytes });
  return new SkillPool({ fetch, discoveryTimeoutMs: options.discoveryTimeoutMs, callTimeoutMs: options.callTimeoutMs, version: VERSION });
}
