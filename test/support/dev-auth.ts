// The dev issuer's real JWT path, for suites about resources rather than
// identity providers: one admin token for one tenant.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DevIssuer } from "../../src/integrations/identity/dev-issuer.js";

export async function devIssuer(): Promise<DevIssuer> {
  return DevIssuer.load(mkdtempSync(join(tmpdir(), "agentplane-issuer-")), "http://issuer.test", "http://api.test");
}

export async function devToken(issuer: DevIssuer, scope?: string): Promise<string> {
  const { access_token } = await issuer.issue({
    grant_type: "client_credentials",
    client_id: issuer.clientId,
    client_secret: issuer.clientSecret,
    scope,
  });
  return access_token;
}
