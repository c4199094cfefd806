// The dev issuer's only pages: sign-in (consent) and errors. Server-rendered,
// no script, no external assets. Registration is open, so any page can
// register a client and send the browser here: the page names the client and
// where the code will go, and nothing happens without the button.

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

// No framing (a hidden frame could take the click), no referrer (the URL
// holds the interaction id), never cached.
export const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.4rem}dt{font-weight:600;margin-top:.6rem}dd{margin:0;overflow-wrap:anywhere}code{font-size:.95em}
button{font:inherit;margin-top:1.5rem;padding:.6rem 1.4rem;border:0;border-radius:4px;background:#1f5fbf;color:#fff;cursor:pointer}
button:focus-visible{outline:3px solid #f0a000;outline-offset:2px}`;

function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>${STYLE}</style></head>
<body><main>${body}</main></body></html>`;
}

export interface SignInDetails {
  user: string;
  tenant: string;
  clientId: string;
  clientName?: string;
  redirectUri: string;
  scopes: string[];
  resources: string[];
  action: string;
}

export function signInPage(d: SignInDetails): string {
  const client = d.clientName ? `${d.clientName} (client ID ${d.clientId})` : `client ID ${d.clientId}`;
  return page(
    `Sign in to agentplane dev as ${d.user}`,
    `<h1>Sign in to agentplane dev as ${escape(d.user)}</h1>
<p>An application asks to act as <strong>${escape(d.user)}</strong>, admin of tenant <code>${escape(d.tenant)}</code>.
Continue only if you started this sign-in.</p>
<dl>
<dt>Application</dt><dd>${escape(client)}</dd>
<dt>Returns to</dt><dd><code>${escape(d.redirectUri)}</code></dd>
<dt>Access</dt><dd>${d.scopes.map((s) => `<code>${escape(s)}</code>`).join(" ") || "none"}</dd>
<dt>For</dt><dd>${d.resources.map((r) => `<code>${escape(r)}</code>`).join(" ")}</dd>
</dl>
<form method="post" action="${escape(d.action)}"><button type="submit" autofocus>Sign in as ${escape(d.user)}</button></form>`,
  );
}

export function errorPage(title: string, detail: string): string {
  return page(`Sign-in failed: ${title}`, `<h1>Sign-in failed</h1><p><code>${escape(title)}</code></p><p>${escape(detail)}</p>`);
}
