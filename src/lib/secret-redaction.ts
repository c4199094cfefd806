// Removes our own credentials (a skill's token, header values or OAuth
// client secret; a model API key) from text the service keeps or logs: a run
// step's error, a skill's refresh error, a log line. A careless server quotes
// what it refused ("Incorrect API key provided: sk-…"), sometimes as it
// arrived on the wire (base64 in a Basic header, URL-encoded in a form), and
// our own HTTP stack quotes a header value it refuses (a line break in it).

const REDACTED = "[redacted]";

// Shorter values are left alone: redacting "401" or "yes" would garble
// messages, and a secret that short guards little.
const MIN_REDACTED = 6;

// The base64 characters that depend on `value` alone wherever it sits in a
// longer encoded text: one run for each of the three byte offsets it may
// start at, without the characters shared with its neighbours.
function base64Cores(value: Buffer): string[] {
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), value]).toString("base64");
    const start = offset ? 4 : 0;
    const end = Math.floor((offset + value.length) / 3) * 4;
    if (end > start) cores.push(encoded.slice(start, end));
  }
  return cores.flatMap((c) => [c, c.replace(/\+/g, "-").replace(/\//g, "_")]);
}

// Every form one credential may be quoted in: as sent and without its scheme
// (`Basic <credential>`, with a Basic credential decoded, whole and its
// password), each line of it (an error may quote one), with control
// characters collapsed as clean() does, JSON-escaped, URL- and form-encoded,
// and base64 in both alphabets.
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
  forms.push(...value.split(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+/u));
  forms.push(value.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\s]+/gu, " ").trim(), JSON.stringify(value).slice(1, -1));
  forms.push(encodeURIComponent(value), new URLSearchParams({ v: value }).toString().slice(2));
  return forms.flatMap((f) => [f, ...base64Cores(Buffer.from(f))]);
}

// A function that replaces every quotable form of every value with
// "[redacted]", longest first (so a form containing another goes whole).
export function secretRedactor(values: string[]): (text: string) => string {
  const forms = [...new Set(values.flatMap(quotable))].filter((f) => f.length >= MIN_REDACTED).sort((a, b) => b.length - a.length);
  if (!forms.length) return (text) => text;
  return (text) => forms.reduce((t, form) => t.replaceAll(form, REDACTED), text);
}
