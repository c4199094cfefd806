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

  it("puts a tenant that just spent a large turn behind one that spent little, even with nothing waiting between", async () => {
    const turns = new FairTurns();
    await turns.turn("big", 50_000);
    await turns.turn("small", 100);
    // Both ask again at once: the big one's virtual time is still ahead.
    expect(await grantOrder(turns, [["big", 100], ["small", 100]])).toEqual(["small", "big"]);
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
});
