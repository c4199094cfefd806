// The sandbox's queue of tenants' expressions (integrations/expressions/
// fair-queue.ts): who is served next, by slot time, under the share rule.
import { FairQueue } from "../src/integrations/expressions/fair-queue.js";

// Jobs of one unit each, named.
const one = (job: string) => ({ unit: job, more: false });

it("serves the tenant whose units have held slots the least time", () => {
  const q = new FairQueue<string>(2, 100);
  for (const job of ["s1", "s2", "s3"]) q.push("slow", job);
  for (const job of ["q1", "q2", "q3"]) q.push("quick", job);
  expect(q.next(one)?.unit).toBe("s1");
  q.hold("slow");
  q.release("slow", 100);
  // slow has had 100 ms, quick nothing: quick's units until they have had as much.
  expect(q.next(one)?.unit).toBe("q1");
  q.hold("quick");
  q.release("quick", 2);
  expect(q.next(one)?.unit).toBe("q2");
});

it("passes over a tenant at its share, unless it is alone and its recent units were quick", () => {
  const q = new FairQueue<string>(1, 100, 40);
  for (const job of ["a1", "a2", "a3", "a4"]) q.push("a", job);
  expect(q.next(one)?.unit).toBe("a1");
  q.hold("a");
  // At its share, with no history of quick units: the other slot stays free.
  expect(q.next(one)).toBeUndefined();
  q.release("a", 5);
  expect(q.next(one)?.unit).toBe("a2");
  q.hold("a");
  // Alone, its last unit quick: it may take the second slot too.
  expect(q.next(one)?.unit).toBe("a3");
  q.hold("a");
  // Not while another tenant waits: that one is under its share and served first.
  q.push("b", "b1");
  expect(q.next(one)?.unit).toBe("b1");
  q.hold("b");
  q.release("a", 300);
  q.release("b", 1);
  // A slow unit ends its borrowing: held 1 of a share of 1, and b has nothing left.
  expect(q.next(one)).toBeUndefined();
});
