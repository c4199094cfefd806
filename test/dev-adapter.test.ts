// The dev issuer's client store under a registration flood (issue 19 item
// 8): past its cap the oldest client goes, but never one someone is signed
// in with (an unexpired grant, refresh token or session); with every client
// in use a registration is refused and nothing is evicted.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDevAdapter } from "../src/integrations/identity/dev-adapter.js";

describe("dev issuer client eviction", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "dev-adapter-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const adapter = () => createDevAdapter({ clientsFile: join(dir, "clients.json"), maxClients: 3, maxEntries: 100, full: () => new Error("full") });
  const stored = () => (JSON.parse(readFileSync(join(dir, "clients.json"), "utf8")) as [string][]).map(([id]) => id);

  it("drops the oldest client, as one that must register again", async () => {
    const clients = adapter()("Client");
    for (const id of ["a", "b", "c", "d"]) await clients.upsert(id, { client_id: id });
    expect(stored()).toEqual(["b", "c", "d"]);
    expect(await clients.find("a")).toBeUndefined();
  });

  it("never drops a client with a live grant, refresh token or session; an expired one protects nothing", async () => {
    const models = adapter();
    const clients = models("Client");
    for (const id of ["granted", "refreshing", "sessioned", "expired"]) await clients.upsert(id, { client_id: id });
    expect(stored()).toEqual(["refreshing", "sessioned", "expired"]);
    // Start over with the three in use in different ways.
    await clients.upsert("granted", { client_id: "granted" });
    expect(stored()).toEqual(["sessioned", "expired", "granted"]);
    await models("Grant").upsert("g1", { clientId: "granted", accountId: "dev-user" }, 3600);
    await models("Session").upsert("s1", { accountId: "dev-user", authorizations: { sessioned: { sid: "x" } } }, 3600);
    await models("RefreshToken").upsert("r0", { clientId: "expired", grantId: "g0" }, -1);
    for (const id of ["n1", "n2"]) await clients.upsert(id, { client_id: id });
    expect(stored()).toEqual(["sessioned", "granted", "n2"]);
    await models("RefreshToken").upsert("r1", { clientId: "n2", grantId: "g2" }, 3600);
    await expect(clients.upsert("n3", { client_id: "n3" })).rejects.toThrow("full");
    expect(stored()).toEqual(["sessioned", "granted", "n2"]);
    // A client of the store that registers again is not a new one.
    await clients.upsert("granted", { client_id: "granted", client_name: "renamed" });
    expect(stored()).toEqual(["sessioned", "n2", "granted"]);
  });
});
