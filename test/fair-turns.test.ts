// Turns on the HTTP thread shared between tenants by cost (lib/fair-turns.ts):
// the order in which waiting turns are granted, which is what a quiet
// tenant's latency beside a busy one comes down to.
import { FairTurns } from "../src/lib/fair-turns.js";

// Takes turns for each [key, cost] in order, all waiting at once, and
// answers the order in which they were granted.
async function grantOrder(turns: FairTurns, requests: [string, number][]): Promise<string[]> {
  const granted: string[] = [];
  await Promise.all(requests.map(([key, cost]) => turns.turn(key, cost).then(() => granted.push(key))));
  return granted;
}

describe("fair turns", () => {
  it("serves a tenant's one request after at most one of another tenant's many that came first", async () => {
    const requests: [string, number][] = [...Array.from({ length: 8 }, (): [string, number] => ["amp", 55_000]), ["quiet", 200]];
    const order = await grantOrder(new FairTurns(), requests);
    expect(order.indexOf("quiet")).toBeLessThanOrEqual(1);
    expect(order.filter((k) => k === "amp")).toHaveLength(8);
  });

  it("shares turns between busy tenants in proportion to their cost, not their count", async () => {
    // Both keep requests waiting: big ones cost ten times small ones.
    const requests: [string, number][] = [];
    for (let i = 0; i < 30; i++) requests.push(["big", 10_000]);
    for (let i = 0; i < 300; i++) requests.push(["small", 1_000]);
    const order = await grantOrder(new FairTurns(), requests);
    // In the first 110 turns (while both have turns waiting), about ten
    // small for each big one.
    const head = order.slice(0, 110);
    expect(head.filter((k) => k === "big").length).toBeGreaterThanOrEqual(9);
    expect(head.filter((k) => k === "big").length).toBeLessThanOrEqual(11);
  });

  it("keeps a tenant's debt while turns wait, and forgets it once none does", async () => {
    const turns = new FairTurns();
    // "big" spends a large turn while "small" waits behind it, then both ask
    // again before the queue empties: small first, its virtual time behind.
    const order: string[] = [];
    const first = [turns.turn("big", 50_000).then(() => order.push("big")), turns.turn("small", 100).then(() => order.push("small"))];
    await first[0];
    const again = [turns.turn("big", 100).then(() => order.push("big")), turns.turn("small", 100).then(() => order.push("small"))];
    await Promise.all([...first, ...again]);
    expect(order).toEqual(["big", "small", "small", "big"]);
    // Nothing waits now: both start level, and the first to ask goes first.
    expect(await grantOrder(turns, [["big", 100], ["small", 100]])).toEqual(["big", "small"]);
  });

  it("gives up the place of a turn whose caller went away, and serves the others", async () => {
    const turns = new FairTurns();
    const gone = new AbortController();
    const blocked = turns.turn("a", 1);
    const left = turns.turn("b", 1, gone.signal);
    const other = turns.turn("c", 1);
    gone.abort(new Error("the sender went away"));
    await expect(left).rejects.toThrow("the sender went away");
    expect(turns.waiting).toBe(2);
    await Promise.all([blocked, other]);
    expect(turns.waiting).toBe(0);
  });

  it("grants the next turn only after the current one's work up to its next wait for I/O", async () => {
    const turns = new FairTurns();
    const events: string[] = [];
    const first = turns.turn("a", 1).then(async () => {
      events.push("1 starts");
      // Continuations (a cached lookup, an inline filter) are still the turn.
      for (let i = 0; i < 5; i++) await Promise.resolve();
      events.push("1 ends");
    });
    const second = turns.turn("b", 1).then(() => events.push("2 starts"));
    await Promise.all([first, second]);
    expect(events).toEqual(["1 starts", "1 ends", "2 starts"]);
  });

  it("grants waiting turns one after another within an event-loop iteration, for up to its budget", async () => {
    // Turns for a, b, c, then a mark of the next iteration (its immediate is
    // queued after the one that starts granting): the order they happen in.
    async function order(turns: FairTurns): Promise<string[]> {
      const events: string[] = [];
      const granted = ["a", "b", "c"].map((key) => turns.turn(key, 1).then(() => void events.push(key)));
      setImmediate(() => events.push("next iteration"));
      await Promise.all(granted);
      await new Promise((resolve) => setImmediate(resolve));
      return events;
    }
    // A clock that does not move: the budget never runs out.
    expect(await order(new FairTurns(() => 0))).toEqual(["a", "b", "c", "next iteration"]);
    // A clock past the budget at every look: one turn per iteration.
    let clock = 0;
    expect(await order(new FairTurns(() => (clock += 5)))).toEqual(["a", "next iteration", "b", "c"]);
  });
});
