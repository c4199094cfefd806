// The person's share of a dev-issuer sign-in, by plain HTTP as a browser
// would: cookies and manual redirects, the sign-in page and its button.
import { createHash, randomBytes } from "node:crypto";

export class Browser {
  private cookies = new Map<string, string>();
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(url, { ...init, redirect: "manual", headers: { ...(init.headers as Record<string, string>), ...(cookie && { cookie }) } });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair!.indexOf("=");
      const name = pair!.slice(0, at);
      const value = pair!.slice(at + 1);
      if (value && !/expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.set(name, value);
      else this.cookies.delete(name);
    }
    return res;
  }
}

export const location = (res: Response, base: string) => new URL(res.headers.get("location")!, base).href;

export const pkce = () => {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
};

export interface Consent {
  page: string;
  pageHeaders: Headers;
  // The final redirect to the client, with `code` and `state`.
  callback: URL;
}

// authorize → sign-in page → the button → back to the client's redirect URI.
export async function signIn(server: { url: string }, authorizeUrl: string, browser = new Browser()): Promise<Consent> {
  const start = await browser.fetch(authorizeUrl);
  expect(start.status).toBe(303);
  const interaction = location(start, server.url);
  expect(interaction).toMatch(new RegExp(`^${server.url}/oauth/interaction/`));
  const pageRes = await browser.fetch(interaction);
  expect(pageRes.status).toBe(200);
  const page = await pageRes.text();
  const approved = await browser.fetch(interaction, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" });
  expect(approved.status).toBe(303);
  const resumed = await browser.fetch(location(approved, server.url));
  expect(resumed.status).toBe(303);
  return { page, pageHeaders: pageRes.headers, callback: new URL(location(resumed, server.url)) };
}
