import { secretRedactor as redactorOf } from "../../lib/secret-redaction.js";
import { clientSecretRedactor } from "./client-auth.js";
import type { OpenedSkillAuth } from "./skill-pool.js";

// Removes a skill's own secrets from text the service keeps or logs (a run
// step's error, a skill's refresh error): a careless server may quote the
// header or token it refused ("Unauthorized: X-API-Key=…"), a token endpoint
// the client secret it was sent (in a Basic header, or form-encoded), and
// those texts are read by every viewer of the tenant and written to the logs.
export function secretRedactor(auth: OpenedSkillAuth): (text: string) => string {
  switch (auth.mode) {
    case "static_bearer":
      return redactorOf([auth.token, `Bearer ${auth.token}`]);
    case "headers":
      return redactorOf(Object.values(auth.headers));
    case "oauth":
      return clientSecretRedactor(auth);
    default:
      return (text) => text;
  }
}
