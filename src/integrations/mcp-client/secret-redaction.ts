import type { SkillAuthConfig } from "./skill-pool.js";

// Shorter values are left alone: redacting "401" or "yes" would garble
// messages, and a secret that short guards little.
const MIN_REDACTED = 6;

// The forms a server may quote one of our credentials in: as sent, without
// its scheme (`Basic <credential>`), and a Basic credential decoded, whole
// and its password.
function quotable(value: string): string[] {
  const forms = [value];
  const [, scheme, credential] = /^(\S+)\s+(\S+)$/.exec(value) ?? [];
  if (credential) {
    forms.push(credential);
    if (scheme!.toLowerCase() === "basic") {
      const decoded = Buffer.from(credential, "base64").toString("utf8");
      forms.push(decoded, decoded.slice(decoded.indexOf(":") + 1));
    }
  }
  return forms;
}

// Removes a skill's own secrets from text the service keeps or logs (a run
// step's error, a skill's refresh error): a careless server may quote the
// header or token it refused ("Unauthorized: X-API-Key=…"), and those texts
// are read by every viewer of the tenant and written to the logs.
export function secretRedactor(auth: SkillAuthConfig): (text: string) => string {
  const values =
    auth.mode === "static_bearer" ? [auth.token] : auth.mode === "headers" ? Object.values(auth.headers) : auth.mode === "oauth" && auth.clientSecret ? [auth.clientSecret] : [];
  const forms = [...new Set(values.flatMap(quotable))].filter((f) => f.length >= MIN_REDACTED).sort((a, b) => b.length - a.length);
  if (!forms.length) return (text) => text;
  return (text) => forms.reduce((t, form) => t.replaceAll(form, "[redacted]"), text);
}
