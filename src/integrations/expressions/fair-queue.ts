// Waiting work of many tenants, served round-robin one unit at a time: a job
// may yield several units (an event's filters), and after each the tenant
// goes to the back of the rotation. A tenant that holds `share` slots is
// passed over until it releases one, so it never takes every slot.
export class FairQueue<Job> {
  readonly #queues = new Map<string, Job[]>();
  // Tenants with work waiting, in the order they are served.
  readonly #rotation: string[] = [];
  readonly #held = new Map<string, number>();

  constructor(
    private readonly share: number,
    private readonly maxWaitingPerTenant: number,
  ) {}

  get empty(): boolean {
    return this.#queues.size === 0;
  }

  // False when the tenant already has `maxWaitingPerTenant` jobs waiting.
  push(tenant: string, job: Job): boolean {
    let queue = this.#queues.get(tenant);
    if (queue && queue.length >= this.maxWaitingPerTenant) return false;
    if (!queue) this.#queues.set(tenant, (queue = []));
    if (queue.length === 0) this.#rotation.push(tenant);
    queue.push(job);
    return true;
  }

  // The next unit of the first tenant in rotation under its share; `take`
  // removes one unit from a job and says whether the job has more.
  next<Unit>(take: (job: Job) => { unit: Unit; more: boolean }): { tenant: string; job: Job; unit: Unit } | undefined {
    const r = this.#rotation.findIndex((tenant) => (this.#held.get(tenant) ?? 0) < this.share);
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

  release(tenant: string): void {
    const held = (this.#held.get(tenant) ?? 1) - 1;
    if (held) this.#held.set(tenant, held);
    else this.#held.delete(tenant);
  }

  // Every waiting job, removed.
  drain(): Job[] {
    const jobs = [...this.#queues.values()].flat();
    this.#queues.clear();
    this.#rotation.length = 0;
    return jobs;
  }
}
