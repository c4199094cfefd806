// A skill's secrets stay where they were given (issue 19 items 7 and 8): a
// token endpoint that echoes the client secret it was sent (base64 in a Basic
// header, form-encoded in a body) does not get it into the skill's error; a
// static bearer token with a line break is refused; and an OAuth skill moved
// to another origin asks for its client secret again, as bearer and header
// secrets do, so the service never mints a token for a server the secret's
// owner did not name.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { DevIssuer } from "../src/integrations/identity/dev-issuer.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { listenOnLoopback } from "./support/listen.js";
import { bearer, connectCall, connectMust, startServer, type TestServer } from "./support/server.js";

type Json = Record<string, unknown>;
const SECRET = "cs-Zq8/+Rt5v2Wm9 Xy7Kp3~Lh&=";

// An MCP server protected by its own authorization server, on one origin,
// whose token endpoint refuses every request quoting the Authorization
// header and the body it got. Records every request's path.
interface EchoingAs {
  origin: string;
  mcpUrl: string;
  paths: string[];
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of req) text += String(chunk);
  return text;
}

async function startEchoingAs(methods: string[]): Promise<EchoingAs> {
  const paths: string[] = [];
  let origin = "";
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url!, origin).pathname;
      paths.push(`${req.method} ${path}`);
      const json = (status: number, doc: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify(doc));
      };
      if (path === "/mcp") {
        await body(req);
        return json(401, { error: "unauthorized" }, { "www-authenticate": `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"` });
      }
      if (path === "/.well-known/oauth-protected-resource/mcp") return json(200, { resource: `${origin}/mcp`, authorization_servers: [origin] });
      if (path === "/.well-known/oauth-authorization-server")
        return json(200, { issuer: origin, token_endpoint: `${origin}/token`, token_endpoint_auth_methods_supported: methods });
      if (path === "/token") {
        const form = await body(req);
        return json(401, { error: "invalid_client", error_description: `got ${req.headers.authorization ?? "no header"} and ${form}` });
      }
      json(404, {});
    })();
  });
  origin = `http://127.0.0.1:${await listenOnLoopback(server)}`;
  return {
    origin,
    mcpUrl: `${origin}/mcp`,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// What a reader could recover from a text: the text URL- and form-decoded,
// and every run of base64 in it decoded at each offset.
function recoverable(text: string): string {
  const decoded = [...text.matchAll(/[A-Za-z0-9+/_-]{8,}/g)].flatMap(([run]) =>
    [0, 1, 2, 3].map((k) => Buffer.from(run.slice(k), "base64").toString("latin1")),
  );
  const unescaped = decodeURIComponent(text.replace(/\+/g, " ").replace(/%(?![0-9A-F]{2})/gi, "%25"));
  return [text, unescaped, ...decoded].join("\n");
}

let issuer: DevIssuer;
let admin: string;
let server: TestServer;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  issuer = await devIssuer();
  admin = await devToken(issuer);
  server = await startServer({ authenticator: issuer.authenticator(60), outboundAllow: ["127.0.0.0/8"] });
  await server.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
});
afterAll(async () => {
  await Promise.all(stops.map((stop) => stop()));
  await server.close();
});

const call = (method: string, body: unknown) => connectCall(server, method, body, bearer(admin, "acme"));
const must = (method: string, body: unknown) => connectMust(server, method, body, bearer(admin, "acme"));

async function echoing(methods: string[]): Promise<EchoingAs> {
  const as = await startEchoingAs(methods);
  stops.push(as.close);
  return as;
}

let names = 0;
describe("an OAuth client secret echoed by the token endpoint", () => {
  it.each([["client_secret_basic"], ["client_secret_post"]])("is not in the skill's refresh error (%s)", async (method) => {
    const as = await echoing([method]);
    const { skill } = (await must("CreateSkill", {
      skill: { name: `echo-${++names}`, mcpUrl: as.mcpUrl, auth: { oauth: { issuer: as.origin, clientId: "client one", clientSecret: SECRET } } },
    })) as { skill: Json };
    const error = String(skill.toolsRefreshError);
    expect(error).toContain("invalid_client");
    expect(error).toContain("[redacted]");
    expect(recoverable(error)).not.toContain("Rt5v2Wm9");
  });
});

describe("a static bearer token", () => {
  // NUL is refused in every request string before a resource's own rules.
  it.each([
    ["CR LF", "tok-abcdef\r\nX-Injected: 1", "must be visible ASCII, spaces and tabs"],
    ["LF", "tok-abcdef\nmore", "must be visible ASCII, spaces and tabs"],
    ["NUL", "tok-abcdef\u0000", "must not contain NUL characters or unpaired UTF-16 surrogates"],
  ])("with %s is refused, and not quoted", async (_, token, reason) => {
    const res = await call("CreateSkill", { skill: { name: `bearer-${++names}`, mcpUrl: "http://127.0.0.1:9/mcp", auth: { staticBearer: { token } } } });
    expect({ status: res.status, body: res.body }).toEqual({
      status: 400,
      body: { code: "invalid_argument", message: `skill.auth.static_bearer.token: ${reason}` },
    });
  });
});

describe("an OAuth skill moved to another origin", () => {
  it("asks for its client secret again, although the issuer is unchanged, and calls nothing at the new origin", async () => {
    const home = await echoing(["client_secret_basic"]);
    const elsewhere = await echoing(["client_secret_basic"]);
    const oauth = { issuer: home.origin, clientId: "client", clientSecret: SECRET };
    const { skill } = (await must("CreateSkill", { skill: { name: `moving-${++names}`, mcpUrl: home.mcpUrl, auth: { oauth } } })) as { skill: Json };

    const moved = await call("UpdateSkill", { skill: { id: skill.id, mcpUrl: elsewhere.mcpUrl }, updateMask: "mcpUrl" });
    expect({ status: moved.status, body: moved.body }).toEqual({
      status: 400,
      body: { code: "invalid_argument", message: "skill.auth.oauth.client_secret: is required again: a stored secret does not follow the skill to another origin" },
    });
    const withAuth = await call("UpdateSkill", {
      skill: { id: skill.id, mcpUrl: elsewhere.mcpUrl, auth: { oauth: { ...oauth, clientSecret: "" } } },
      updateMask: "mcpUrl,auth",
    });
    expect(withAuth.status).toBe(400);
    expect(elsewhere.paths).toEqual([]);

    // Given again, it moves.
    const given = await call("UpdateSkill", { skill: { id: skill.id, mcpUrl: elsewhere.mcpUrl, auth: { oauth } }, updateMask: "mcpUrl,auth" });
    expect(given.status).toBe(200);
    // Unmoved, an edit of the scopes keeps the stored secret, as before.
    const scoped = await call("UpdateSkill", {
      skill: { id: skill.id, auth: { oauth: { ...oauth, clientSecret: "", scopes: ["read"] } } },
      updateMask: "auth",
    });
    expect(scoped.status).toBe(200);
    expect(((scoped.body.skill as Json).auth as { oauth: Json }).oauth.clientSecretSet).toBe(true);
  });
});
