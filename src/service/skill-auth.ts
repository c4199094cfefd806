import { create, type JsonObject } from "@bufbuild/protobuf";
import {
  SkillAuthSchema,
  TokenEndpointAuthMethod,
  type OAuthClientCredentials,
  type SkillAuth,
  type SkillHeader,
} from "../../gen/platform/v1/skill_pb.js";
import { generateSigningKeyPair, importSigningKey, SIGNING_ALGS, signingAlgOf, type SigningAlg } from "../lib/signing-keys.js";
import type { StoredSkillAuth, TokenEndpointAuthMethodName } from "../store/rows.js";
import { invalidArgument } from "./errors.js";
import { checkHttpUrl } from "./expressions.js";
import { MAX_COUNT, MAX_LENGTH } from "./limits.js";
import { checkCount, checkLength, requireText } from "./validate.js";

// The secrets of a skill's auth as stored: sealed, each under its own context.
export interface SkillAuthColumns {
  auth: StoredSkillAuth;
  // Static bearer token, OAuth client secret, or the JSON object of header values.
  authSecret: string | null;
  // PKCS#8 PEM of the private_key_jwt key pair.
  authPrivateKey: string | null;
}

export interface SkillSealers {
  seal: (plain: string) => string;
  sealKey: (pem: string) => string;
}

const METHOD_NAMES: Record<TokenEndpointAuthMethod, TokenEndpointAuthMethodName | undefined> = {
  [TokenEndpointAuthMethod.UNSPECIFIED]: undefined,
  [TokenEndpointAuthMethod.CLIENT_SECRET_BASIC]: "client_secret_basic",
  [TokenEndpointAuthMethod.CLIENT_SECRET_POST]: "client_secret_post",
  [TokenEndpointAuthMethod.PRIVATE_KEY_JWT]: "private_key_jwt",
};
const METHOD_ENUMS = Object.fromEntries(Object.entries(METHOD_NAMES).map(([k, v]) => [v, Number(k)])) as Record<
  TokenEndpointAuthMethodName,
  TokenEndpointAuthMethod
>;

// Headers the transport sets or that describe one hop, not the caller: a skill
// may not replace them. `Mcp-*` and the trace headers belong to the protocol
// and to tracing.
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "content-type",
  "content-encoding",
  "accept",
  "accept-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "expect",
  "last-event-id",
  "traceparent",
  "tracestate",
]);
const MAX_SKILL_HEADERS = 8;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Visible ASCII, space and tab (RFC 9110 field-value without obs-text): no
// CR, LF or NUL, so a value can never split a header.
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;

function checkHeaderName(field: string, name: string): string {
  if (!name) throw invalidArgument(field, "is required");
  if (name.length > 100 || !TOKEN.test(name)) throw invalidArgument(field, "must be a header field name (RFC 9110 token characters, at most 100)");
  const lower = name.toLowerCase();
  if (RESERVED_HEADERS.has(lower) || lower.startsWith("mcp-"))
    throw invalidArgument(field, `"${name}" is set by the transport and cannot be configured`);
  return name;
}

// One header as the service would send it (an empty value is checked by the
// caller, which may keep a stored one); `agentplane skill probe` applies the
// same rule to its --header options.
export function checkSkillHeader(field: string, h: { name: string; value: string }): string {
  const name = checkHeaderName(`${field}.name`, h.name);
  checkHeaderValue(`${field}.value`, h.value);
  return name;
}

// A secret the service sends in a header (a header value, a bearer token, a
// model API key): within the length cap, and nothing that could split the
// header or make the HTTP stack refuse it with the value in its error.
export function checkHeaderValue(field: string, value: string): string {
  checkLength(field, value, MAX_LENGTH.secret);
  if (!FIELD_VALUE.test(value)) throw invalidArgument(field, "must be visible ASCII, spaces and tabs");
  return value;
}

// Names in `auth`; values sealed together as one JSON object. An empty value
// keeps the stored value of the header with the same name, in any case as
// header names are (write-only values are never sent back, so an edit of
// one header must not need the others, nor a name's spelling its value).
function headerColumns(headers: SkillHeader[], seal: (plain: string) => string, stored: Record<string, string> | undefined, missing: string) {
  const storedByName = new Map(Object.entries(stored ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  if (!headers.length) throw invalidArgument("skill.auth.headers.headers", "needs at least one header");
  checkCount("skill.auth.headers.headers", headers, MAX_SKILL_HEADERS);
  const values: Record<string, string> = {};
  const seen = new Set<string>();
  headers.forEach((h, i) => {
    const field = `skill.auth.headers.headers[${i}]`;
    const name = checkSkillHeader(field, h);
    if (seen.has(name.toLowerCase())) throw invalidArgument(`${field}.name`, `"${name}" is given twice`);
    seen.add(name.toLowerCase());
    const value = h.value || storedByName.get(name.toLowerCase());
    if (value === undefined || value === "") throw invalidArgument(`${field}.value`, missing);
    values[name] = value;
  });
  return { auth: { mode: "headers" as const, headers: Object.keys(values) }, authSecret: seal(JSON.stringify(values)), authPrivateKey: null };
}

async function keyPair(o: OAuthClientCredentials, previous: { jwk?: Record<string, unknown>; sealed: string | null }, sealKey: (pem: string) => string) {
  const method = METHOD_NAMES[o.tokenEndpointAuthMethod];
  if (o.signingAlg && !SIGNING_ALGS.includes(o.signingAlg as SigningAlg))
    throw invalidArgument("skill.auth.oauth.signing_alg", `must be one of ${SIGNING_ALGS.join(", ")}`);
  checkLength("skill.auth.oauth.private_key", o.privateKey, MAX_LENGTH.secret);
  if (o.privateKey) {
    const alg = (o.signingAlg || signingAlgOf(o.privateKey) || "RS256") as SigningAlg;
    const imported = await importSigningKey(o.privateKey, alg);
    if (typeof imported === "string") throw invalidArgument("skill.auth.oauth.private_key", imported);
    return { publicJwk: imported.publicJwk, sealed: sealKey(imported.privateKeyPem) };
  }
  const storedAlg = previous.jwk?.alg;
  if (previous.jwk && previous.sealed && (!o.signingAlg || o.signingAlg === storedAlg)) return { publicJwk: previous.jwk, sealed: previous.sealed };
  // A pinned private_key_jwt without a pair gets RS256, the algorithm every
  // authorization server that offers private_key_jwt accepts.
  const alg = (o.signingAlg || (method === "private_key_jwt" ? "RS256" : "")) as SigningAlg | "";
  if (!alg) return undefined;
  const generated = await generateSigningKeyPair(alg);
  return { publicJwk: generated.publicJwk, sealed: sealKey(generated.privateKeyPem) };
}

async function oauthColumns(
  o: OAuthClientCredentials,
  { seal, sealKey }: SkillSealers,
  previous: { spec: StoredSkillAuth; secret: string | null; privateKey: string | null; moved: boolean } | undefined,
): Promise<SkillAuthColumns> {
  const before = previous?.spec.mode === "oauth" ? previous : undefined;
  checkLength("skill.auth.oauth.client_secret", o.clientSecret, MAX_LENGTH.secret);
  checkCount("skill.auth.oauth.scopes", o.scopes, MAX_COUNT.scopes);
  checkHttpUrl("skill.auth.oauth.issuer", o.issuer);
  const method = METHOD_NAMES[o.tokenEndpointAuthMethod];
  // The client secret goes to the issuer's token endpoint only; another
  // issuer must be given it explicitly. Nor does it follow the skill to
  // another origin: the tokens it gets would be sent there, and an
  // authorization server that ignores RFC 8707 `resource` (Auth0, Keycloak)
  // mints tokens the real API accepts. (A key pair may stay: its assertions
  // name their issuer as audience, and the private key is never sent.)
  const keepSecret = before !== undefined && before.spec.mode === "oauth" && before.spec.issuer === o.issuer && !before.moved;
  const secret = o.clientSecret ? seal(o.clientSecret) : keepSecret ? before.secret : null;
  if (!secret && before?.secret && !keepSecret && (METHOD_NAMES[o.tokenEndpointAuthMethod] ?? "client_secret_basic") !== "private_key_jwt")
    throw invalidArgument(
      "skill.auth.oauth.client_secret",
      before.moved
        ? "is required again: a stored secret does not follow the skill to another origin"
        : "is required again: a stored client secret does not follow the skill to another issuer",
    );
  const pair = await keyPair(o, { jwk: before?.spec.mode === "oauth" ? before.spec.publicJwk : undefined, sealed: before?.privateKey ?? null }, sealKey);
  if (method === "private_key_jwt" ? !pair : method ? !secret : !secret && !pair)
    throw invalidArgument(
      "skill.auth.oauth.client_secret",
      method === "private_key_jwt" ? "private_key_jwt needs a key pair" : "is required (or a key pair for private_key_jwt: set signing_alg)",
    );
  return {
    auth: {
      mode: "oauth",
      // Kept as written: it is compared exactly with the advertised issuer.
      issuer: o.issuer,
      clientId: requireText("skill.auth.oauth.client_id", o.clientId, MAX_LENGTH.clientId),
      scopes: o.scopes.map((s, i) => requireText(`skill.auth.oauth.scopes[${i}]`, s, MAX_LENGTH.scope)),
      audience: checkLength("skill.auth.oauth.audience", o.audience, MAX_LENGTH.audience),
      ...(method ? { tokenEndpointAuthMethod: method } : {}),
      ...(pair ? { publicJwk: pair.publicJwk } : {}),
    },
    authSecret: secret,
    authPrivateKey: pair?.sealed ?? null,
  };
}

// The stored auth for a requested one. On update (`previous`), a secret left
// empty keeps the stored one when the mode is unchanged, so changing scopes
// does not require resending the client secret; but a bearer token or header
// value never follows the skill to another origin (`moved`): an admin cannot
// read a write-only secret, and pointing the skill at a server of theirs must
// not be a way to receive it.
export async function skillAuthColumns(
  auth: SkillAuth | undefined,
  sealers: SkillSealers,
  previous?: { spec: StoredSkillAuth; secret: string | null; privateKey: string | null; openSecret: () => string; moved: boolean },
): Promise<SkillAuthColumns> {
  const mode = auth?.mode;
  const same = (m: StoredSkillAuth["mode"]) => previous?.spec.mode === m && previous.secret !== null && !previous.moved;
  const missing = (m: StoredSkillAuth["mode"]) =>
    previous?.spec.mode === m && previous.secret !== null && previous.moved
      ? "is required again: a stored secret does not follow the skill to another origin"
      : "is required";
  switch (mode?.case) {
    case undefined:
    case "none":
      return { auth: { mode: "none" }, authSecret: null, authPrivateKey: null };
    case "staticBearer": {
      // Sent as `Authorization: Bearer <token>`.
      checkHeaderValue("skill.auth.static_bearer.token", mode.value.token);
      const secret = mode.value.token ? sealers.seal(mode.value.token) : same("static_bearer") ? previous!.secret : null;
      if (!secret) throw invalidArgument("skill.auth.static_bearer.token", missing("static_bearer"));
      return { auth: { mode: "static_bearer" }, authSecret: secret, authPrivateKey: null };
    }
    case "headers": {
      const stored = same("headers") ? (JSON.parse(previous!.openSecret()) as Record<string, string>) : undefined;
      return headerColumns(mode.value.headers, sealers.seal, stored, missing("headers"));
    }
    case "oauth":
      return oauthColumns(mode.value, sealers, previous);
  }
}

// What reads show: the shape, never a secret; `*_set` says one is stored.
export function skillAuthMessage(auth: StoredSkillAuth, secretSet: boolean): SkillAuth {
  switch (auth.mode) {
    case "none":
      return create(SkillAuthSchema, { mode: { case: "none", value: {} } });
    case "static_bearer":
      return create(SkillAuthSchema, { mode: { case: "staticBearer", value: { tokenSet: secretSet } } });
    case "headers":
      return create(SkillAuthSchema, {
        mode: { case: "headers", value: { headers: auth.headers.map((name) => ({ name, valueSet: secretSet })) } },
      });
    case "oauth":
      return create(SkillAuthSchema, {
        mode: {
          case: "oauth",
          value: {
            issuer: auth.issuer,
            clientId: auth.clientId,
            scopes: auth.scopes,
            audience: auth.audience,
            clientSecretSet: secretSet,
            tokenEndpointAuthMethod: auth.tokenEndpointAuthMethod ? METHOD_ENUMS[auth.tokenEndpointAuthMethod] : TokenEndpointAuthMethod.UNSPECIFIED,
            signingAlg: typeof auth.publicJwk?.alg === "string" ? auth.publicJwk.alg : "",
            publicJwk: auth.publicJwk as JsonObject | undefined,
          },
        },
      });
  }
}
