import { AddressPolicy } from "./address-policy.js";
import { createGuardedFetch, type FetchLike } from "./guarded-fetch.js";

export interface OutboundOptions {
  // CIDRs that tenant-chosen URLs may resolve to although private or loopback.
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

// The one fetch for every request made on a tenant's behalf (skills, their
// OAuth metadata and token endpoints, model providers): built once per
// process and handed to each integration, so none can bypass the policy.
export function createOutboundFetch(options: Pick<OutboundOptions, "allow" | "maxResponseBytes"> = DEFAULT_OUTBOUND): FetchLike {
  return createGuardedFetch({ policy: new AddressPolicy(options.allow), maxResponseBytes: options.maxResponseBytes });
}
