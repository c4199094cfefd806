import { randomBytes } from "node:crypto";
import { WebhookSourceKind } from "../../gen/platform/v1/webhook_source_pb.js";
import { standardWebhooksKey, type SignedKind } from "../lib/webhook-signatures.js";
import type { WebhookSourceKindName } from "../store/types.js";
import { invalidArgument } from "./errors.js";
import { MAX_LENGTH } from "./limits.js";

// The kinds by the names the store keeps and the CLI's --kind takes.
const VALUES: Record<WebhookSourceKindName, WebhookSourceKind> = {
  envelope: WebhookSourceKind.ENVELOPE,
  standard_webhooks: WebhookSourceKind.STANDARD_WEBHOOKS,
  github: WebhookSourceKind.GITHUB,
  stripe: WebhookSourceKind.STRIPE,
};

export const KIND_NAMES = Object.keys(VALUES) as WebhookSourceKindName[];

// Unspecified is the envelope, as the proto says.
const NAMES = new Map<WebhookSourceKind, WebhookSourceKindName>([
  [WebhookSourceKind.UNSPECIFIED, "envelope"],
  ...KIND_NAMES.map((name) => [VALUES[name], name] as const),
]);

export function kindName(field: string, kind: WebhookSourceKind): WebhookSourceKindName {
  const name = NAMES.get(kind);
  if (!name) throw invalidArgument(field, `unknown kind ${kind}`);
  return name;
}

export const kindValue = (name: WebhookSourceKindName): WebhookSourceKind => VALUES[name];

// A name as typed (the CLI's --kind); undefined when it names no kind.
export const kindNamed = (name: string): WebhookSourceKind | undefined =>
  Object.hasOwn(VALUES, name) ? VALUES[name as WebhookSourceKindName] : undefined;

// Standard Webhooks secrets are 24 to 64 bytes (the spec's range), base64
// after `whsec_`; Stripe shows its own `whsec_…`; GitHub takes any text.
const STANDARD_WEBHOOKS_SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/;
const STRIPE_SECRET = /^whsec_[A-Za-z0-9]{16,250}$/;

// The signing secret a signed kind verifies with: the one given, checked for
// the provider's format, or a new one (`generated`) when none was given and
// the kind lets us choose it. Stripe issues its secrets, so one is required.
export function signingSecretFor(kind: SignedKind, given: string, field: string): { secret: string; generated: boolean } {
  if (!given) {
    if (kind === "stripe") throw invalidArgument(field, "is required for Stripe: the endpoint's whsec_… secret from the Stripe dashboard");
    const secret = kind === "standard_webhooks" ? "whsec_" + randomBytes(32).toString("base64") : randomBytes(32).toString("hex");
    return { secret, generated: true };
  }
  if (kind === "standard_webhooks") {
    const bytes = STANDARD_WEBHOOKS_SECRET.test(given) ? standardWebhooksKey(given).length : 0;
    if (bytes < 24 || bytes > 64) throw invalidArgument(field, "must be whsec_ followed by the base64 of 24 to 64 bytes");
  } else if (kind === "stripe") {
    if (!STRIPE_SECRET.test(given)) throw invalidArgument(field, "must be a Stripe endpoint secret (whsec_ followed by letters and digits)");
  } else if (given.length < 8 || given.length > MAX_LENGTH.githubSecret || given.trim() !== given)
    throw invalidArgument(field, `must be 8 to ${MAX_LENGTH.githubSecret} characters without surrounding spaces`);
  return { secret: given, generated: false };
}
