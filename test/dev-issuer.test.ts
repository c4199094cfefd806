// `agentplane dev`'s embedded issuer: the seed's variant B token request
// yields a JWT that the real server accepts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { bearer, connectCall, startServer, type TestServer } from "./support/server.js";

describe("dev issuer", () => {
  let dir: string;
  let issuer: DevIssuer;
  let server: TestServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agentplane-dev-"));
    issuer = await DevIssuer.load(dir, "http://127.0.0.1:1", "http://127.0.0.1:1");
    server = await startServer({ authenticator: issuer.authenticator(60) });
    await server.seedTenant("dev", [{ subject: issuer.clientId, role: "admin" }]);
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("issues a token for the dev client that lists agents", async () => {
    const { access_token } = await issuer.issue({
      grant_type: "client_credentials",
      client_id: issuer.clientId,
      client_secret: issuer.clientSecret,
      audience: issuer.audience,
    });
    const res = await connectCall(server, "ListAgents", {}, bearer(access_token, "dev"));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
  });

  it("refuses a wrong client secret", async () => {
    await expect(
      issuer.issue({ grant_type: "client_credentials", client_id: issuer.clientId, client_secret: "nope" }),
    ).rejects.toThrow(/invalid_client/);
  });

  it("keeps its key and client across restarts", async () => {
    const again = await DevIssuer.load(dir, issuer.issuer, issuer.audience);
    expect(again.clientSecret).toBe(issuer.clientSecret);
    expect(again.publicJwks).toEqual(issuer.publicJwks);
  });
});
