import { Fragment, useState } from "react";
import type { Skill } from "../../../gen/platform/v1/skill_pb.js";
import { CopyId, Facts, Json, Status } from "../components/bits.js";
import { useNames } from "../names.js";
import { ActionForm, ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { EditPage, RecordActions, RecordList, SubmitButton } from "../components/records.js";
import { time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";
import { useSkillAuth } from "./skill-auth.js";

function authName(s: Skill): string {
  const mode = s.auth?.mode;
  switch (mode?.case) {
    case "staticBearer":
      return "static bearer token";
    case "headers":
      return `headers ${mode.value.headers.map((h) => h.name).join(", ")}`;
    case "oauth":
      return `OAuth client ${mode.value.clientId}`;
    default:
      return "none";
  }
}

// The public half of the skill's private_key_jwt key pair, to register at the
// authorization server.
function PublicJwk({ skill }: { skill: Skill }) {
  const [copied, setCopied] = useState(false);
  const jwk = skill.auth?.mode.case === "oauth" ? skill.auth.mode.value.publicJwk : undefined;
  if (!jwk) return null;
  return (
    <>
      <h2>Public key</h2>
      <p>Register this JWK with the authorization server as the client's key (private_key_jwt). The private key never leaves the service.</p>
      <Json value={jwk} label="Public JWK" />
      <button
        type="button"
        onClick={() =>
          void navigator.clipboard?.writeText(JSON.stringify(jwk)).then(
            () => setCopied(true),
            () => setCopied(false),
          )
        }
      >
        Copy public JWK
      </button>{" "}
      {copied && <span role="status">copied</span>}
    </>
  );
}

export function SkillsPage() {
  const { api, tenant, base } = useTenant();
  const names = useNames();
  const skills = useLoad(async () => (await api.listSkills({ pageSize: 100 })).skills, [tenant]);
  return (
    <RecordList
      title="Skills"
      create={{ to: `${base}/skills/new`, label: "New skill" }}
      records={skills}
      columns={["Skill", "Status", "Tools", "Used by", "Auth"]}
      empty={
        <p>
          No skills yet. A skill is an MCP server whose tools agents call: add one with its URL, and its tools are listed at once.
        </p>
      }
    >
      {(s) => {
        const users = names.agents.filter((a) => a.skillIds.includes(s.id));
        return [
          <>
            <Link to={`${base}/skills/${s.id}`}>{s.name}</Link>
            <div className="sub">
              <CopyId id={s.id} />
            </div>
          </>,
          s.toolsRefreshError ? <Status name="listing tools failed" /> : <Status name="ok" />,
          <span className="num">{s.tools.length}</span>,
          users.length ? users.map((a, i) => <Fragment key={a.id}>{i ? ", " : ""}<Link to={`${base}/agents/${a.id}`}>{a.name}</Link></Fragment>) : <span className="muted">no agent</span>,
          <span className="muted">{authName(s)}</span>,
        ];
      }}
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
          <PublicJwk skill={s} />
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

function SkillForm({ skill }: { skill?: Skill }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const [name, setName] = useState(skill?.name ?? "");
  const [mcpUrl, setMcpUrl] = useState(skill?.mcpUrl ?? "");
  const auth = useSkillAuth(skill);
  const action = useAction();
  const { at, general } = placeProblem(action.problem, ["skill.name", "skill.mcp_url", ...auth.fields]);
  return (
    <ActionForm
      action={action}
      submit={async () => {
        const message = { id: skill?.id ?? "", name, mcpUrl, auth: auth.message() };
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
      {auth.render(at)}
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
