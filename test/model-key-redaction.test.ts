// A model API key never reaches a run's error or a log line (issue 19 item
// 7): not when the provider quotes it back (as sent, base64- or URL-encoded),
// and not when a key with a line break fails in our own header check.
import { createChatModel, ModelError, type ModelEndpoint } from "../src/integrations/model/chat-model.js";
import { startModelServer, type ModelServer } from "./support/model-server.js";
import { devIssuer, devToken } from "./support/dev-auth.js";
import { bearer, connectCall, startServer } from "./support/server.js";

const KEY = "sk-live-Zq8/+Rt5v2Wm9Xy7Kp3~Lh";
const b64 = (s: string) => Buffer.from(s).toString("base64");

// What a reader could recover from a text: the text, and every run of base64
// (either alphabet) in it decoded, at each of the four offsets.
function recoverable(text: string): string {
  const decoded = [...text.matchAll(/[A-Za-z0-9+/_-]{8,}/g)].flatMap(([run]) =>
    [0, 1, 2, 3].map((k) => Buffer.from(run.slice(k), run.includes("_") || run.includes("-") ? "base64url" : "base64").toString("latin1")),
  );
  return [text, decodeURIComponent(text.replace(/%(?![0-9A-F]{2})/gi, "%25")), ...decoded].join("\n");
}

async function failure(endpoint: ModelEndpoint): Promise<ModelError> {
  const model = createChatModel({ fetch, backoffMs: [] });
  const err = await model.complete(endpoint, { messages: [{ role: "user", content: "hi" }], tools: [] }, AbortSignal.timeout(10_000)).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ModelError)) throw new Error(`expected a ModelError, got ${String(err)}`);
  return err;
}

// How the provider quotes the Authorization header it refused, by name.
const QUOTES: [string, (auth: string) => string][] = [
  ["as sent", (auth) => `Incorrect API key provided: ${auth.slice("Bearer ".length)}`],
  // Where the reason is cut to 200 characters, mid-key.
  ["across the cut of a long reason", (auth) => `${"x".repeat(170)} ${auth.slice("Bearer ".length)}`],
  ["with its scheme", (auth) => `header was ${auth}`],
  ["base64", (auth) => `key (base64) ${b64(auth)} and ${b64(`x${auth.slice(7)}`)}`],
  ["URL- and form-encoded", (auth) => `key=${encodeURIComponent(auth.slice(7))}&form=${new URLSearchParams({ k: auth.slice(7) }).toString()}`],
  ["base64url", (auth) => `key (base64url) ${Buffer.from(`ab${auth.slice(7)}`).toString("base64url")}`],
];

describe("model API key redaction", () => {
  let server: ModelServer;
  let quote = QUOTES[0]![1];
  // Each request is refused with a body quoting what it received.
  beforeAll(async () => {
    server = await startModelServer(() => ({
      status: 401,
      body: { error: { message: quote(server.authorizations().at(-1)!), type: "invalid_request_error", code: "invalid_api_key" } },
    }));
  });
  afterAll(() => server.close());

  it.each(QUOTES)("keeps the key out of a 401 that quotes it %s", async (_, how) => {
    quote = how;
    const err = await failure({ baseUrl: server.baseUrl, apiKey: KEY, model: "m" });
    expect(err.kind).toBe("model_unauthorized");
    expect(err.message).toContain("[redacted]");
    expect(recoverable(err.message)).not.toContain("Rt5v2Wm9");
  });

  it("keeps a key with a line break out of the header error, every line of it", async () => {
    const err = await failure({ baseUrl: server.baseUrl, apiKey: "sk-first-half-XYZ\r\nsecond-half-ABC", model: "m" });
    expect(err.message).not.toContain("first-half");
    expect(err.message).not.toContain("second-half");
    expect(err.message).toContain("[redacted]");
  });
});

describe("a model API key with a line break", () => {
  it("is refused when saved, without being quoted", async () => {
    const issuer = await devIssuer();
    const admin = await devToken(issuer);
    const s = await startServer({ authenticator: issuer.authenticator(60) });
    try {
      await s.seedTenant("acme", [{ subject: issuer.clientId, role: "admin" }]);
      const res = await connectCall(
        s,
        "CreateAgent",
        { agent: { name: "a", model: { baseUrl: "https://models.test/v1", model: "m", apiKey: "sk-first-half\r\nX-Injected: 1" } } },
        bearer(admin, "acme"),
      );
      expect({ status: res.status, body: res.body }).toEqual({
        status: 400,
        body: { code: "invalid_argument", message: "agent.model.api_key: must be visible ASCII, spaces and tabs" },
      });
    } finally {
      await s.close();
    }
  });
});
