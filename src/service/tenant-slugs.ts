import type { TenantStore } from "../store/store.js";

const MAX_ENTRIES = 10_000;

// Tenant slugs by id, for log lines that know only the id (webhooks, runs).
// A slug never changes, so an entry never goes stale; a deleted tenant's
// stays until the map is cleared at its bound.
export class TenantSlugs {
  readonly #slugs = new Map<string, string>();
  readonly #loading = new Map<string, Promise<string | undefined>>();

  constructor(private readonly tenants: Pick<TenantStore, "get">) {}

  // The slug when known; otherwise loads it for the next line and answers
  // undefined now, so a log line never waits for the store.
  peek(id: string): string | undefined {
    const slug = this.#slugs.get(id);
    if (slug === undefined) void this.get(id);
    return slug;
  }

  // The slug, read once per tenant; undefined when the store cannot say.
  get(id: string): Promise<string | undefined> {
    const slug = this.#slugs.get(id);
    if (slug !== undefined) return Promise.resolve(slug);
    let loading = this.#loading.get(id);
    if (!loading) {
      loading = this.tenants.get(id).then(
        (row) => {
          if (this.#slugs.size >= MAX_ENTRIES) this.#slugs.clear();
          if (row) this.#slugs.set(id, row.slug);
          return row?.slug;
        },
        () => undefined,
      );
      loading.finally(() => this.#loading.delete(id)).catch(() => {});
      this.#loading.set(id, loading);
    }
    return loading;
  }
}
