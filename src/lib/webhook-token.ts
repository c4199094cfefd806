import { createHash, randomBytes } from "node:crypto";

// `whk_` + 32 random bytes, base64url: 256 bits, URL- and header-safe.
export function newWebhookToken(): string {
  return "whk_" + randomBytes(32).toString("base64url");
}

// Tokens are stored and compared only as SHA-256 digests: a lookup by digest
// reveals nothing about near matches, and the store never holds the token.
export function webhookTokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
