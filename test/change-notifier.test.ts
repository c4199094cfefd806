// The PostgreSQL change notifier (src/store/postgres/change-notifier.ts)
// against a real server and a real LISTEN: what changes while a statement
// and the gap after it run is carried by one statement after the gap, never
// one statement per change. The gap is a gate the test opens.
import { ChangeNotifier } from "../src/store/postgres/change-notifier.js";
import { CHANNELS } from "../src/store/postgres/channels.js";
import { openPostgres, type OpenedPostgres } from "../src/store/postgres/open.js";
import { SignalHub } from "../src/store/signal-hub.js";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";

const SENTINEL = "agentplane_test_sentinel";
const until = (what: string, check: () => boolean) => waitFor(what, PATIENCE_MS, () => check() || undefined, 5);

describe("ChangeNotifier (PostgreSQL)", () => {
  let database: TestDatabase;
  let main: OpenedPostgres;
  let listener: OpenedPostgres;
  const heard: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    // One connection: statements reach the server in the order they are sent.
    main = openPostgres({ url: database.url, poolSize: 1 });
    listener = openPostgres({ url: database.url, poolSize: 1 });
    await listener.sql.listen(CHANNELS.runsChanged, (tenant) => heard.push(`runs ${tenant}`));
    await listener.sql.listen(CHANNELS.eventsAdded, (tenant) => heard.push(`events ${tenant}`));
    await listener.sql.listen(SENTINEL, () => heard.push("sentinel"));
  });
  afterAll(async () => {
    await listener.sql.end();
    await main.sql.end();
    await database.drop();
  });

  it("sends what changed during a statement and its gap in one statement after the gap", async () => {
    let opened = false;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let gaps = 0;
    const notifier = new ChangeNotifier(main.sql, new SignalHub(), () => {
      gaps++;
      return opened ? Promise.resolve() : gate;
    });

    notifier.runsChanged("ten_a");
    await until("the first notification", () => heard.includes("runs ten_a"));
    // During the first statement or its gap: a burst of changes.
    for (let i = 0; i < 50; i++) notifier.runsChanged("ten_a");
    notifier.runsChanged("ten_b");
    notifier.eventsAdded("ten_b");
    await new Promise((resolve) => setImmediate(resolve));
    // Sent after whatever the notifier sent before it, on the same connection.
    await main.sql`select pg_notify(${SENTINEL}, '')`;
    await until("the sentinel", () => heard.includes("sentinel"));
    expect(heard).toEqual(["runs ten_a", "sentinel"]);

    opened = true;
    open();
    await until("the burst's notifications", () => heard.includes("events ten_b"));
    await notifier.flush();
    // One statement for the burst: one notification per tenant and channel.
    expect(heard.slice(2).sort()).toEqual(["events ten_b", "runs ten_a", "runs ten_b"]);
    expect(gaps).toBe(2);
  });
});
