// What the service keeps of an upstream server's words (skill servers, token
// endpoints, model providers): run and skill errors are read by every viewer of
// the tenant, and an error page can hold anything (a reflected API key, an
// internal host name, a stack trace), so a raw body is never kept. Only a
// reason given in a known JSON error shape survives, cleaned and short.

const MAX_REASON = 200;

// Control and format characters (terminal escapes, bidi overrides) become
// spaces, whitespace is collapsed, and the text is cut to `max` characters.
export function clean(text: string, max = MAX_REASON): string {
  const flat = text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\s]+/gu, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

// The `error` member of an OpenAI-style or JSON-RPC error body:
// `{code, message}` → "code: message"; a plain string as it is. `redact`
// runs before the text is cleaned and cut, which could split a secret.
export function errorReason(error: unknown, redact: (text: string) => string = (t) => t): string | undefined {
  if (typeof error === "string") return clean(redact(error)) || undefined;
  if (typeof error !== "object" || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  const parts = [code, message].filter((p) => typeof p === "string" || typeof p === "number").map(String);
  return parts.length ? clean(redact(parts.join(": "))) : undefined;
}

// The reason in a JSON error body (OpenAI, JSON-RPC, or OAuth's `error` and
// `error_description`); undefined for anything else, HTML and text included.
export function jsonReason(body: string | Record<string, unknown>, redact: (text: string) => string = (t) => t): string | undefined {
  let parsed: unknown = body;
  if (typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { error, error_description: description } = parsed as { error?: unknown; error_description?: unknown };
  if (typeof error === "string" && typeof description === "string" && description) return clean(redact(`${error}: ${description}`));
  return errorReason(error, redact);
}
