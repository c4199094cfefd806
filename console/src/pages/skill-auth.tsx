// A skill's authentication in its form: the draft of each mode, what it
// sends, and the fields. Secrets are write-only: the API says only that one is
// stored (`*_set`), and an empty field keeps it.
import { useState } from "react";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { TokenEndpointAuthMethod, type Skill, type SkillAuthSchema } from "../../../gen/platform/v1/skill_pb.js";
import { Field } from "../components/form.js";

export type AuthMode = "none" | "staticBearer" | "headers" | "oauth";

interface HeaderRow {
  name: string;
  value: string;
  // A value is stored for this name (as loaded); an empty value keeps it.
  valueSet: boolean;
}

const MODES: [AuthMode, string][] = [
  ["none", "None"],
  ["staticBearer", "Static bearer token"],
  ["headers", "Headers"],
  ["oauth", "OAuth client credentials"],
];

const METHODS: [TokenEndpointAuthMethod, string][] = [
  [TokenEndpointAuthMethod.UNSPECIFIED, "chosen from the server's metadata"],
  [TokenEndpointAuthMethod.CLIENT_SECRET_BASIC, "client_secret_basic"],
  [TokenEndpointAuthMethod.CLIENT_SECRET_POST, "client_secret_post"],
  [TokenEndpointAuthMethod.PRIVATE_KEY_JWT, "private_key_jwt"],
];

// The fields of every mode, kept while the user switches between them.
export function useSkillAuth(skill: Skill | undefined) {
  const mode0 = skill?.auth?.mode;
  const oauth0 = mode0?.case === "oauth" ? mode0.value : undefined;
  const [mode, setMode] = useState<AuthMode>((mode0?.case as AuthMode | undefined) ?? "none");
  const [token, setToken] = useState("");
  const [headers, setHeaders] = useState<HeaderRow[]>(
    mode0?.case === "headers" ? mode0.value.headers.map((h) => ({ name: h.name, value: "", valueSet: h.valueSet })) : [{ name: "", value: "", valueSet: false }],
  );
  const [issuer, setIssuer] = useState(oauth0?.issuer ?? "");
  const [clientId, setClientId] = useState(oauth0?.clientId ?? "");
  const [clientSecret, setClientSecret] = useState("");
  const [scopes, setScopes] = useState(oauth0?.scopes.join(" ") ?? "");
  const [audience, setAudience] = useState(oauth0?.audience ?? "");
  const [method, setMethod] = useState(oauth0?.tokenEndpointAuthMethod ?? TokenEndpointAuthMethod.UNSPECIFIED);
  // The stored pair's algorithm: sent back as it is, it keeps the pair.
  const [signingAlg, setSigningAlg] = useState(oauth0?.signingAlg ?? "");
  const [privateKey, setPrivateKey] = useState("");

  const message = (): MessageInitShape<typeof SkillAuthSchema> => {
    switch (mode) {
      case "staticBearer":
        return { mode: { case: "staticBearer", value: { token } } };
      case "headers":
        return { mode: { case: "headers", value: { headers: headers.map(({ name, value }) => ({ name, value })) } } };
      case "oauth":
        return {
          mode: {
            case: "oauth",
            value: { issuer, clientId, clientSecret, audience, scopes: scopes.split(/\s+/).filter(Boolean), tokenEndpointAuthMethod: method, signingAlg, privateKey },
          },
        };
      case "none":
        return { mode: { case: "none", value: {} } };
    }
  };

  // Where the API's `invalid_argument` messages can show (see placeProblem).
  const fields = [
    "skill.auth.static_bearer.token",
    "skill.auth.headers.headers",
    ...headers.flatMap((_, i) => [`skill.auth.headers.headers[${i}].name`, `skill.auth.headers.headers[${i}].value`]),
    "skill.auth.oauth.issuer",
    "skill.auth.oauth.client_id",
    "skill.auth.oauth.client_secret",
    "skill.auth.oauth.scopes",
    "skill.auth.oauth.audience",
    "skill.auth.oauth.token_endpoint_auth_method",
    "skill.auth.oauth.signing_alg",
    "skill.auth.oauth.private_key",
  ];

  const secretHint = (set: boolean | undefined) => (set ? "A secret is stored; leave empty to keep it." : undefined);
  const setRow = (i: number, change: Partial<HeaderRow>) => setHeaders(headers.map((h, j) => (j === i ? { ...h, ...change } : h)));
  const storedAlg = oauth0?.signingAlg;

  const render = (at: (field: string) => string | undefined) => (
    <>
      <fieldset>
        <legend>Authentication</legend>
        {MODES.map(([value, label]) => (
          <label key={value} className="check">
            <input type="radio" name="auth" checked={mode === value} onChange={() => setMode(value)} /> {label}
          </label>
        ))}
      </fieldset>
      {mode === "staticBearer" && (
        <Field label="Token" error={at("skill.auth.static_bearer.token")} hint={secretHint(mode0?.case === "staticBearer" && mode0.value.tokenSet)}>
          {(p) => <input {...p} type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} />}
        </Field>
      )}
      {mode === "headers" && (
        <fieldset className={at("skill.auth.headers.headers") ? "invalid" : undefined}>
          <legend>Headers</legend>
          <p className="hint">
            Sent on every request to the server, e.g. <code>X-API-Key</code> or <code>Authorization</code> with <code>Basic …</code>. Values are
            write-only.
          </p>
          {headers.map((h, i) => (
            <fieldset key={i}>
              <legend>Header {i + 1}</legend>
              <Field label={`Header ${i + 1} name`} error={at(`skill.auth.headers.headers[${i}].name`)}>
                {(p) => <input {...p} autoComplete="off" value={h.name} onChange={(e) => setRow(i, { name: e.target.value })} />}
              </Field>
              <Field
                label={`Header ${i + 1} value`}
                error={at(`skill.auth.headers.headers[${i}].value`)}
                hint={h.valueSet ? "set; leave empty to keep it" : undefined}
              >
                {(p) => (
                  <input
                    {...p}
                    type="password"
                    autoComplete="off"
                    placeholder={h.valueSet ? "set" : undefined}
                    value={h.value}
                    onChange={(e) => setRow(i, { value: e.target.value })}
                  />
                )}
              </Field>
              <button type="button" onClick={() => setHeaders(headers.filter((_, j) => j !== i))}>
                Remove header {i + 1}
              </button>
            </fieldset>
          ))}
          {at("skill.auth.headers.headers") && (
            <p className="field-error" role="alert">
              {at("skill.auth.headers.headers")}
            </p>
          )}
          <button type="button" onClick={() => setHeaders([...headers, { name: "", value: "", valueSet: false }])}>
            Add header
          </button>
        </fieldset>
      )}
      {mode === "oauth" && (
        <>
          <Field label="Issuer" error={at("skill.auth.oauth.issuer")}>
            {(p) => <input {...p} type="url" value={issuer} onChange={(e) => setIssuer(e.target.value)} />}
          </Field>
          <Field label="Client ID" error={at("skill.auth.oauth.client_id")}>
            {(p) => <input {...p} value={clientId} onChange={(e) => setClientId(e.target.value)} />}
          </Field>
          <Field label="Client secret" error={at("skill.auth.oauth.client_secret")} hint={secretHint(oauth0?.clientSecretSet)}>
            {(p) => <input {...p} type="password" autoComplete="off" value={clientSecret} onChange={(e) => setClientSecret(e.target.value)} />}
          </Field>
          <Field label="Scopes (space-separated)" error={at("skill.auth.oauth.scopes")}>
            {(p) => <input {...p} value={scopes} onChange={(e) => setScopes(e.target.value)} />}
          </Field>
          <Field label="Audience (optional)" error={at("skill.auth.oauth.audience")}>
            {(p) => <input {...p} value={audience} onChange={(e) => setAudience(e.target.value)} />}
          </Field>
          <Field label="Token endpoint authentication" error={at("skill.auth.oauth.token_endpoint_auth_method")}>
            {(p) => (
              <select {...p} value={method} onChange={(e) => setMethod(Number(e.target.value) as TokenEndpointAuthMethod)}>
                {METHODS.map(([value, label]) => (
                  <option key={value} value={value}>
                    {label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field
            label="Key pair for private_key_jwt"
            error={at("skill.auth.oauth.signing_alg")}
            hint={storedAlg ? "Choosing the other algorithm makes a new key pair: register its public key again." : "The service generates the key pair and keeps the private key."}
          >
            {(p) => (
              <select {...p} value={signingAlg} onChange={(e) => setSigningAlg(e.target.value)}>
                <option value="">{storedAlg ? "keep the stored key pair" : "none"}</option>
                <option value="RS256">RS256</option>
                <option value="ES256">ES256</option>
              </select>
            )}
          </Field>
          <Field
            label="Private key (optional, PKCS#8 PEM)"
            error={at("skill.auth.oauth.private_key")}
            hint={
              storedAlg
                ? "A key pair is stored; leave empty to keep it. Give your own only if the authorization server issued it."
                : "Only if the authorization server issued your key pair; otherwise choose an algorithm above."
            }
          >
            {(p) => <textarea {...p} rows={4} autoComplete="off" spellCheck={false} value={privateKey} onChange={(e) => setPrivateKey(e.target.value)} />}
          </Field>
        </>
      )}
    </>
  );

  return { message, fields, render };
}
