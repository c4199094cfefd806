import { useState } from "react";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Skill, SkillAuthSchema } from "../../../gen/platform/v1/skill_pb.js";
import { Facts, Json } from "../components/bits.js";
import { ActionForm, ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { EditPage, RecordActions, RecordList, SubmitButton } from "../components/records.js";
import { time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

const authName = (s: Skill) =>
  s.auth?.mode.case === "staticBearer" ? "static bearer token" : s.auth?.mode.case === "oauth" ? `OAuth client ${s.auth.mode.value.clientId}` : "none";

export function SkillsPage() {
  const { api, tenant, base } = useTenant();
  const skills = useLoad(async () => (await api.listSkills({ pageSize: 100 })).skills, [tenant]);
  return (
    <RecordList
      title="Skills"
      create={{ to: `${base}/skills/new`, label: "New skill" }}
      records={skills}
      empty="No skills yet. A skill is an MCP server whose tools agents call."
    >
      {(s) => (
        <>
          <Link to={`${base}/skills/${s.id}`}>{s.name}</Link> <span className="muted">{s.tools.length} tools</span>
          {s.toolsRefreshError && <span className="warning"> listing tools failed</span>}
        </>
      )}
    </RecordList>
  );
}

export function SkillPage({ id }: { id: string }) {
  const { api, base } = useTenant();
  const skill = useLoad(async () => (await api.getSkill({ id })).skill, [id]);
  const refresh = useAction();
  const del = useAction();
  const s = skill.value;
  return (
    <>
      <Heading>Skill {s?.name}</Heading>
      <ErrorBanner message={skill.error} />
      {s && (
        <>
          <RecordActions
            list={`${base}/skills`}
            id={id}
            confirm={`Delete skill ${s.name}?`}
            del={del}
            remove={() => api.deleteSkill({ id })}
          >
            <button
              type="button"
              disabled={refresh.busy}
              onClick={() =>
                void refresh.run(async () => {
                  try {
                    const res = await api.refreshSkillTools({ id });
                    if (res.skill) skill.setValue(res.skill);
                  } finally {
                    // A failed refresh is recorded on the skill: show it.
                    skill.reload();
                  }
                })
              }
            >
              Refresh tools
            </button>
          </RecordActions>
          <ErrorBanner message={refresh.problem?.message ?? del.problem?.message} />
          <Facts
            rows={[
              ["ID", <code>{s.id}</code>],
              ["MCP URL", <code>{s.mcpUrl}</code>],
              ["Authentication", authName(s)],
              ["Tools listed", time(s.toolsRefreshTime)],
            ]}
          />
          {s.toolsRefreshError && (
            <p className="banner warning" role="status">
              The last refresh failed: {s.toolsRefreshError}
            </p>
          )}
          <h2>Tools</h2>
          {s.tools.length === 0 ? (
            <p>No tools listed.</p>
          ) : (
            <ul className="tools">
              {s.tools.map((t) => (
                <li key={t.name}>
                  <details>
                    <summary>
                      <code>{t.name}</code> {t.description}
                    </summary>
                    <Json value={t.inputSchema} label={`Input schema of ${t.name}`} />
                  </details>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </>
  );
}

type AuthMode = "none" | "staticBearer" | "oauth";

function SkillForm({ skill }: { skill?: Skill }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const mode0 = skill?.auth?.mode;
  const oauth0 = mode0?.case === "oauth" ? mode0.value : undefined;
  const [name, setName] = useState(skill?.name ?? "");
  const [mcpUrl, setMcpUrl] = useState(skill?.mcpUrl ?? "");
  const [mode, setMode] = useState<AuthMode>((mode0?.case as AuthMode | undefined) ?? "none");
  const [token, setToken] = useState("");
  const [issuer, setIssuer] = useState(oauth0?.issuer ?? "");
  const [clientId, setClientId] = useState(oauth0?.clientId ?? "");
  const [clientSecret, setClientSecret] = useState("");
  const [scopes, setScopes] = useState(oauth0?.scopes.join(" ") ?? "");
  const [audience, setAudience] = useState(oauth0?.audience ?? "");
  const action = useAction();
  const { at, general } = placeProblem(action.problem, [
    "skill.name", "skill.mcp_url", "skill.auth.static_bearer.token", "skill.auth.oauth.issuer", "skill.auth.oauth.client_id",
    "skill.auth.oauth.client_secret", "skill.auth.oauth.scopes", "skill.auth.oauth.audience",
  ]);
  const secretHint = (set: boolean | undefined) => (set ? "A secret is stored; leave empty to keep it." : undefined);
  const auth = (): MessageInitShape<typeof SkillAuthSchema> => ({
    mode:
      mode === "staticBearer"
        ? { case: "staticBearer" as const, value: { token } }
        : mode === "oauth"
          ? { case: "oauth" as const, value: { issuer, clientId, clientSecret, audience, scopes: scopes.split(/\s+/).filter(Boolean) } }
          : { case: "none" as const, value: {} },
  });
  return (
    <ActionForm
      action={action}
      submit={async () => {
        const message = { id: skill?.id ?? "", name, mcpUrl, auth: auth() };
        const res = skill
          ? await api.updateSkill({ skill: message, updateMask: { paths: ["name", "mcp_url", "auth"] } })
          : await api.createSkill({ skill: message });
        if (res.skill) navigate(`${base}/skills/${res.skill.id}`);
      }}
    >
      <ErrorBanner message={general} />
      <Field label="Name" error={at("skill.name")}>
        {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <Field label="MCP URL" error={at("skill.mcp_url")} hint="The server's Streamable HTTP endpoint, ending in /mcp">
        {(p) => <input {...p} type="url" value={mcpUrl} onChange={(e) => setMcpUrl(e.target.value)} />}
      </Field>
      <fieldset>
        <legend>Authentication</legend>
        {(
          [
            ["none", "None"],
            ["staticBearer", "Static bearer token"],
            ["oauth", "OAuth client credentials"],
          ] as const
        ).map(([value, label]) => (
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
        </>
      )}
      <SubmitButton busy={action.busy} editing={!!skill} noun="skill" />
    </ActionForm>
  );
}

export function SkillEditPage({ id }: { id?: string }) {
  const { api } = useTenant();
  const skill = useLoad(async () => (id ? (await api.getSkill({ id })).skill : undefined), [id]);
  return (
    <EditPage title={id ? `Edit skill ${skill.value?.name ?? ""}` : "New skill"} error={skill.error} ready={!id || !!skill.value}>
      <SkillForm skill={skill.value} />
    </EditPage>
  );
}
