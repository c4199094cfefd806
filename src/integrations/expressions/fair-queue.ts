// Waiting work of many tenants, served one unit at a time (a job may yield
// several units: an event's filters) by the time each tenant has had, not by
// turns: the next unit is the one of the tenant whose units have held slots
// the least time, so a tenant whose units take 100 ms gets no more slot time
// than one whose units take 2 ms (which is then served some fifty times as
// often). Taking turns instead let one slow unit of a hostile tenant come
// before every quick one of another, whose queue then grew without end.
// A tenant that holds `share` slots is passed over until it releases one, so
// it never takes every slot, unless nobody else has work waiting and its
// recent units have all been quick (`quickMs`): then a free slot is better
// used than kept, and whoever comes next waits for a quick unit at most.
export class FairQueue<Job> {
  readonly #queues = new Map<string, Job[]>();
  // Tenants with work waiting, in the order they came: ties go to the first.
  readonly #rotation: string[] = [];
  readonly #held = new Map<string, number>();
  // Slot time (ms) of each tenant with work waiting or running, on a common
  // scale: one that comes back after a pause starts level with the least
  // served of the others, owing nothing and owed nothing.
  readonly #used = new Map<string, number>();
  // The slowest of each such tenant's recent units (ms), decaying: one slow
  // unit stops its borrowing at once, a run of quick ones restores it.
  readonly #slowest = new Map<string, number>();

  constructor(
    private readonly share: number,
    private readonly maxWaitingPerTenant: number,
    private readonly quickMs = 0,
  ) {}

  get empty(): boolean {
    return this.#queues.size === 0;
  }

  // False when the tenant already has `maxWaitingPerTenant` jobs waiting.
  push(tenant: string, job: Job): boolean {
    let queue = this.#queues.get(tenant);
    if (queue && queue.length >= this.maxWaitingPerTenant) return false;
    if (!this.#used.has(tenant)) this.#used.set(tenant, this.#leastUsed());
    if (!queue) this.#queues.set(tenant, (queue = []));
    if (queue.length === 0) this.#rotation.push(tenant);
    queue.push(job);
    return true;
  }

  // The next unit of the least served tenant under its share; `take`
  // removes one unit from a job and says whether the job has more.
  next<Unit>(take: (job: Job) => { unit: Unit; more: boolean }): { tenant: string; job: Job; unit: Unit } | undefined {
    let r = -1;
    for (let i = 0; i < this.#rotation.length; i++) {
      const tenant = this.#rotation[i]!;
      if ((this.#held.get(tenant) ?? 0) >= this.share) continue;
      if (r < 0 || this.#used.get(tenant)! < this.#used.get(this.#rotation[r]!)!) r = i;
    }
    if (r < 0 && this.#rotation.length === 1 && (this.#slowest.get(this.#rotation[0]!) ?? Infinity) <= this.quickMs) r = 0;
    if (r < 0) return undefined;
    const tenant = this.#rotation[r]!;
    const queue = this.#queues.get(tenant)!;
    const job = queue[0]!;
    const { unit, more } = take(job);
    if (!more) queue.shift();
    this.#rotation.splice(r, 1);
    if (queue.length) this.#rotation.push(tenant);
    else this.#queues.delete(tenant);
    return { tenant, job, unit };
  }

  hold(tenant: string): void {
    this.#held.set(tenant, (this.#held.get(tenant) ?? 0) + 1);
  }

  // A slot the tenant held for `ms` is free again.
  release(tenant: string, ms: number): void {
    const held = (this.#held.get(tenant) ?? 1) - 1;
    if (held) this.#held.set(tenant, held);
    else this.#held.delete(tenant);
    const used = this.#used.get(tenant);
    if (used === undefined) return;
    this.#slowest.set(tenant, Math.max(ms, 0.8 * (this.#slowest.get(tenant) ?? 0)));
    if (!held && !this.#queues.has(tenant)) {
      this.#used.delete(tenant);
      this.#slowest.delete(tenant);
    } else this.#used.set(tenant, used + Math.max(0, ms));
  }

  // Every waiting job, removed.
  drain(): Job[] {
    const jobs = [...this.#queues.values()].flat();
    this.#queues.clear();
    this.#rotation.length = 0;
    for (const tenant of this.#used.keys())
      if (!this.#held.has(tenant)) {
        this.#used.delete(tenant);
        this.#slowest.delete(tenant);
      }
    return jobs;
  }

  #leastUsed(): number {
    let least: number | undefined;
    for (const used of this.#used.values()) if (least === undefined || used < least) least = used;
    return least ?? 0;
  }
}
