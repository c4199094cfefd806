// Webhook body bytes each tenant has in flight in this process: admitted
// after the token check, not yet answered. Everything an admitted body costs
// the service thread (parsing, validation, filters, the commit that stores
// it) grows with its size and shares that thread with every other tenant, so
// bounding a tenant's bytes in flight bounds what its flood puts ahead of
// another tenant's webhook.
// One body of the default largest size, or several smaller ones.
export const DEFAULT_TENANT_INFLIGHT_BYTES = 1024 * 1024;

// A signed delivery's body is charged to nobody until its signature is
// checked, so it has only this long to arrive: a provider posts at once, and
// 10 s is 1 MiB at under 1 Mbit/s.
export const DEFAULT_SIGNED_BODY_TIMEOUT_MS = 10_000;

export class InflightBytes {
  readonly #held = new Map<string, number>();

  // `max`: bytes one tenant may hold. A tenant holding nothing is always
  // admitted, so one body of the largest accepted size always fits.
  constructor(private readonly max: number) {}

  // False when `bytes` more would pass the limit; nothing is taken then.
  take(tenant: string, bytes: number): boolean {
    const held = this.#held.get(tenant) ?? 0;
    if (held > 0 && held + bytes > this.max) return false;
    this.#held.set(tenant, held + bytes);
    return true;
  }

  give(tenant: string, bytes: number): void {
    const left = (this.#held.get(tenant) ?? 0) - bytes;
    if (left > 0) this.#held.set(tenant, left);
    else this.#held.delete(tenant);
  }
}
