import { secretRedactor as redactorOf } from "../../lib/secret-redaction.js";
import type { SkillAuthConfig } from "./skill-pool.js";

// Removes a skill's own secrets from text the service keeps or logs (a run
// step's error, a skill's refresh error): a careless server may quote the
// header or token it refused ("Unauthorized: X-API-Key=…"), a token endpoint
// the client secret it was sent (in a Basic header, or form-encoded), and
// those texts are read by every viewer of the tenant and written to the logs.
export function secretRedactor(auth: SkillAuthConfig): (text: string) => string {
  switch (auth.mode) {
    case "static_bearer":
      return redactorOf([auth.token, `Bearer ${auth.token}`]);
    case "headers":
      return redactorOf(Object.values(auth.headers));
    case "oauth": {
      if (!auth.clientSecret) return (text) => text;
      // The Basic credential as client-auth.ts sends it (RFC 6749 §2.3.1).
      const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
      const basic = Buffer.from(`${enc(auth.clientId)}:${enc(auth.clientSecret)}`).toString("base64");
      return redactorOf([auth.clientSecret, `Basic ${basic}`]);
    }
    default:
      return (text) => text;
  }
}
