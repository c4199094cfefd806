import { createHmac, timingSafeEqual } from "node:crypto";

// Signature checks of the providers that cannot send our envelope, on the raw
// body exactly as it arrived (any re-encoding would change the bytes signed).
// Each check is true when any signature in the headers matches any of the
// secrets (the current one, and during a rotation the previous one); every
// comparison is in constant time over equal-length digests.

export type SignedKind = "standard_webhooks" | "github" | "stripe";

export type RequestHeaders = Record<string, string | string[] | undefined>;

// Standard Webhooks and Stripe sign a timestamp: a delivery older or newer
// than this is refused, so a captured one cannot be replayed later.
const TIMESTAMP_TOLERANCE_S = 300;

// Headers that carry signatures; never handed to a mapping.
export const SIGNATURE_HEADERS: readonly string[] = [
  "webhook-signature",
  "svix-signature",
  "x-hub-signature",
  "x-hub-signature-256",
  "stripe-signature",
];

export function header(headers: RequestHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

const hmac = (key: Buffer | string, ...parts: (string | Buffer)[]): Buffer => {
  const h = createHmac("sha256", key);
  for (const part of parts) h.update(part);
  return h.digest();
};

// Whether one of the given digests equals one of the expected ones.
function anyEqual(expected: Buffer[], given: Buffer[]): boolean {
  let found = false;
  for (const e of expected)
    for (const g of given)
      // Every pair is compared, so the time does not tell which matched.
      if (g.length === e.length && timingSafeEqual(g, e)) found = true;
  return found;
}

function fresh(timestamp: string, nowMs: number): boolean {
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  return Math.abs(nowMs / 1000 - Number(timestamp)) <= TIMESTAMP_TOLERANCE_S;
}

const HEX_DIGEST = /^[0-9a-fA-F]{64}$/;

// The key bytes of a Standard Webhooks secret: base64 after `whsec_`.
export function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
}

// Standard Webhooks (and Svix, which sends the same under `svix-*` names):
// base64 HMAC-SHA256 of `${id}.${timestamp}.${body}` keyed by the secret's
// decoded bytes; `webhook-signature` is a space-separated list of `v1,<sig>`.
function standardWebhooks(secrets: string[], body: Buffer, headers: RequestHeaders, nowMs: number): boolean {
  const id = header(headers, "webhook-id") ?? header(headers, "svix-id");
  const timestamp = header(headers, "webhook-timestamp") ?? header(headers, "svix-timestamp");
  const signatures = header(headers, "webhook-signature") ?? header(headers, "svix-signature");
  if (!id || !timestamp || !signatures || !fresh(timestamp, nowMs)) return false;
  const given = signatures
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .map((s) => Buffer.from(s.slice(3), "base64"));
  const expected = secrets.map((s) => hmac(standardWebhooksKey(s), `${id}.${timestamp}.`, body));
  return anyEqual(expected, given);
}

// GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body keyed
// by the secret's text.
function github(secrets: string[], body: Buffer, headers: RequestHeaders): boolean {
  const signature = header(headers, "x-hub-signature-256");
  if (!signature?.startsWith("sha256=") || !HEX_DIGEST.test(signature.slice(7))) return false;
  const given = [Buffer.from(signature.slice(7), "hex")];
  return anyEqual(
    secrets.map((s) => hmac(s, body)),
    given,
  );
}

// Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of
// `${t}.${body}` keyed by the whole `whsec_…` text (as Stripe's libraries do).
function stripe(secrets: string[], body: Buffer, headers: RequestHeaders, nowMs: number): boolean {
  const value = header(headers, "stripe-signature");
  if (!value) return false;
  let timestamp: string | undefined;
  const given: Buffer[] = [];
  for (const item of value.split(",")) {
    const at = item.indexOf("=");
    const key = item.slice(0, at).trim();
    const v = item.slice(at + 1).trim();
    if (key === "t") timestamp ??= v;
    else if (key === "v1" && HEX_DIGEST.test(v)) given.push(Buffer.from(v, "hex"));
  }
  if (timestamp === undefined || !given.length || !fresh(timestamp, nowMs)) return false;
  return anyEqual(
    secrets.map((s) => hmac(s, `${timestamp}.`, body)),
    given,
  );
}

export function verifySignature(kind: SignedKind, secrets: string[], body: Buffer, headers: RequestHeaders, nowMs: number): boolean {
  if (!secrets.length) return false;
  switch (kind) {
    case "standard_webhooks":
      return standardWebhooks(secrets, body, headers, nowMs);
    case "github":
      return github(secrets, body, headers);
    case "stripe":
      return stripe(secrets, body, headers, nowMs);
  }
}
