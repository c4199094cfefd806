import { Fragment, useState } from "react";
import type { Agent } from "../../../gen/platform/v1/agent_pb.js";
import type { Skill } from "../../../gen/platform/v1/skill_pb.js";
import { CopyId, Facts } from "../components/bits.js";
import { ExpressionEditor, positionIn, TryIt, type Marked } from "../components/expression.js";
import { ExpressionKind } from "../../../gen/platform/v1/expression_pb.js";
import { Enabled, LastRun, RecordList } from "../components/records.js";
import { describeTrigger, useNames } from "../names.js";
import { ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { duration, jsonValue, time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

export function AgentsPage() {
  const { api, tenant, base } = useTenant();
  const names = useNames();
  const agents = useLoad(async () => (await api.listAgents({ pageSize: 100 })).agents, [tenant]);
  return (
    <RecordList
      title="Agents"
      create={{ to: `${base}/agents/new`, label: "New agent" }}
      records={agents}
      columns={["Agent", "Status", "Does", "Skills", "Triggers", "Last run"]}
      empty={
        <p>
          No agents yet. An agent calls tools of your skills, step by step or with a model: add a skill first, then create an agent
          that uses it.
        </p>
      }
    >
      {(a) => [
        <>
          <Link to={`${base}/agents/${a.id}`}>{a.name}</Link>
          <div className="sub">
            <CopyId id={a.id} />
          </div>
        </>,
        <Enabled enabled={a.enabled} />,
        <span className="muted">{a.model ? `model ${a.model.model}` : `${a.steps.length} step${a.steps.length === 1 ? "" : "s"}`}</span>,
        a.skillIds.length ? a.skillIds.map((s, i) => <Fragment key={s}>{i ? ", " : ""}<Link to={`${base}/skills/${s}`}>{names.skill(s)}</Link></Fragment>) : "—",
        <span className="num">{names.triggers.filter((t) => t.agentId === a.id).length}</span>,
        <LastRun agentId={a.id} />,
      ]}
    </RecordList>
  );
}

function RunByHand({ agent }: { agent: Agent }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const [input, setInput] = useState("{}");
  const action = useAction();
  const { at, general } = placeProblem(action.problem, ["input"]);
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void action.run(async () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(input);
          } catch (err) {
            action.setProblem({ field: "input", message: `not JSON: ${(err as Error).message}` });
            return;
          }
          const res = await api.runAgent({ id: agent.id, input: jsonValue(parsed as never) });
          if (res.run) navigate(`${base}/runs/${res.run.id}`);
        });
      }}
    >
      <h2>Run by hand</h2>
      <ErrorBanner message={general} />
      <Field label="Input (JSON)" error={at("input")}>
        {(p) => <textarea {...p} rows={4} value={input} onChange={(e) => setInput(e.target.value)} />}
      </Field>
      <button type="submit" disabled={action.busy}>
        Run agent
      </button>
    </form>
  );
}

export function AgentPage({ id }: { id: string }) {
  const { api, base, canWrite } = useTenant();
  const { navigate } = useRouter();
  const agent = useLoad(async () => (await api.getAgent({ id })).agent, [id]);
  const triggers = useLoad(async () => (await api.listTriggers({ agentId: id, pageSize: 100 })).triggers, [id]);
  const names = useNames();
  const del = useAction();
  const a = agent.value;
  return (
    <>
      <Heading>Agent {a?.name}</Heading>
      <ErrorBanner message={agent.error} />
      {a && (
        <>
          {canWrite && (
            <p className="actions">
              <Link to={`${base}/agents/${id}/edit`} className="button">
                Edit
              </Link>{" "}
              <button
                type="button"
                className="danger"
                onClick={() => confirm(`Delete agent ${a.name}?`) && void del.run(async () => (await api.deleteAgent({ id }), navigate(`${base}/agents`)))}
              >
                Delete
              </button>
            </p>
          )}
          <ErrorBanner message={del.problem?.message} />
          <Facts
            rows={[
              ["ID", <CopyId id={a.id} />],
              ["Description", a.description || "—"],
              ["Enabled", a.enabled === false ? "no" : "yes"],
              ["Skills", a.skillIds.map((s, i) => <Fragment key={s}>{i ? ", " : ""}<Link to={`${base}/skills/${s}`}>{names.skill(s)}</Link></Fragment>)],
              ["Runs", <Link to={`${base}/runs?agent=${encodeURIComponent(a.id)}`}>this agent's runs</Link>],
              ["Last run", <LastRun agentId={a.id} />],
              ["Timeout", duration(a.timeout)],
              ["Max steps", String(a.maxSteps)],
              ["Max concurrent runs", a.maxConcurrentRuns ? String(a.maxConcurrentRuns) : "no limit"],
              ["Updated", time(a.updateTime)],
            ]}
          />
          {a.model ? (
            <p>
              Model <code>{a.model.model}</code> at <code>{a.model.baseUrl}</code> (API key {a.model.apiKeySet ? "set" : "not set"})
            </p>
          ) : (
            <>
              <h2>Steps</h2>
              <ol>
                {a.steps.map((s, i) => (
                  <li key={i}>
                    <code>{s.tool}</code> on <Link to={`${base}/skills/${s.skillId}`}>{names.skill(s.skillId)}</Link> with <code>{s.arguments || "{}"}</code>
                  </li>
                ))}
              </ol>
            </>
          )}
          <h2>Triggers</h2>
          {triggers.value?.length ? (
            <ul>
              {triggers.value.map((t) => (
                <li key={t.id}>
                  <Link to={`${base}/triggers/${t.id}`}>{describeTrigger(t, names.source)}</Link>
                </li>
              ))}
            </ul>
          ) : (
            <p>
              No triggers: this agent runs only by hand.{" "}
              {canWrite && <Link to={`${base}/triggers/new?agent=${encodeURIComponent(id)}`}>Add a trigger</Link>}
            </p>
          )}
          <p>
            <Link to={`${base}/runs?agent=${encodeURIComponent(id)}`}>Runs of this agent</Link>
          </p>
          {canWrite && <RunByHand agent={a} />}
        </>
      )}
    </>
  );
}

interface StepDraft {
  skillId: string;
  tool: string;
  arguments: string;
}

interface AgentDraft {
  name: string;
  description: string;
  instructions: string;
  enabled: boolean;
  skillIds: string[];
  mode: "steps" | "model";
  steps: StepDraft[];
  baseUrl: string;
  model: string;
  apiKey: string;
  apiKeySet: boolean;
  maxSteps: string;
  timeoutSeconds: string;
  maxConcurrentRuns: string;
}

function draftOf(a: Agent | undefined): AgentDraft {
  return {
    name: a?.name ?? "",
    description: a?.description ?? "",
    instructions: a?.instructions ?? "",
    enabled: a?.enabled !== false,
    skillIds: a?.skillIds ?? [],
    mode: a?.model ? "model" : "steps",
    steps: a?.steps.map((s) => ({ skillId: s.skillId, tool: s.tool, arguments: s.arguments })) ?? [],
    baseUrl: a?.model?.baseUrl ?? "",
    model: a?.model?.model ?? "",
    apiKey: "",
    apiKeySet: a?.model?.apiKeySet ?? false,
    maxSteps: a?.maxSteps ? String(a.maxSteps) : "",
    timeoutSeconds: a?.timeout ? String(Number(a.timeout.seconds)) : "",
    maxConcurrentRuns: a?.maxConcurrentRuns ? String(a.maxConcurrentRuns) : "",
  };
}

// The agent message the draft stands for; the API validates every field.
function agentOf(d: AgentDraft, id: string) {
  return {
    id,
    name: d.name,
    description: d.description,
    instructions: d.instructions,
    enabled: d.enabled,
    skillIds: d.skillIds,
    steps: d.mode === "steps" ? d.steps : [],
    model: d.mode === "model" ? { baseUrl: d.baseUrl, model: d.model, apiKey: d.apiKey } : undefined,
    maxSteps: d.maxSteps ? Number(d.maxSteps) : 0,
    timeout: d.timeoutSeconds ? { seconds: BigInt(Math.trunc(Number(d.timeoutSeconds) || 0)) } : undefined,
    maxConcurrentRuns: d.maxConcurrentRuns ? Number(d.maxConcurrentRuns) : undefined,
  };
}

const EDITED = ["name", "description", "instructions", "enabled", "skill_ids", "steps", "model", "max_steps", "timeout", "max_concurrent_runs"];

function AgentForm({ agent, skills }: { agent?: Agent; skills: Skill[] }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const [d, setD] = useState(() => draftOf(agent));
  const [marked, setMarked] = useState<Record<number, Marked | undefined>>({});
  const action = useAction();
  const set = (patch: Partial<AgentDraft>) => setD((prev) => ({ ...prev, ...patch }));
  const setStep = (i: number, patch: Partial<StepDraft>) => set({ steps: d.steps.map((s, j) => (j === i ? { ...s, ...patch } : s)) });
  const fields = [
    "agent.name", "agent.description", "agent.instructions", "agent.skill_ids", "agent.steps", "agent.model.base_url",
    "agent.model.model", "agent.model.api_key", "agent.max_steps", "agent.timeout", "agent.max_concurrent_runs",
    ...d.steps.flatMap((_, i) => [`agent.steps[${i}].skill_id`, `agent.steps[${i}].tool`, `agent.steps[${i}].arguments`]),
  ];
  const { at, general } = placeProblem(action.problem, fields);
  const toolsOf = (skillId: string) => skills.find((s) => s.id === skillId)?.tools ?? [];
  const submit = () =>
    action.run(async () => {
      const message = agentOf(d, agent?.id ?? "");
      const res = agent
        ? await api.updateAgent({ agent: message, updateMask: { paths: EDITED } })
        : await api.createAgent({ agent: message });
      if (res.agent) navigate(`${base}/agents/${res.agent.id}`);
    });
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <ErrorBanner message={general} />
      <Field label="Name" error={at("agent.name")}>
        {(p) => <input {...p} value={d.name} onChange={(e) => set({ name: e.target.value })} />}
      </Field>
      <Field label="Description" error={at("agent.description")}>
        {(p) => <input {...p} value={d.description} onChange={(e) => set({ description: e.target.value })} />}
      </Field>
      <div className="field">
        <label>
          <input type="checkbox" checked={d.enabled} onChange={(e) => set({ enabled: e.target.checked })} /> Enabled
        </label>
      </div>
      <fieldset className={at("agent.skill_ids") ? "invalid" : undefined}>
        <legend>Skills</legend>
        {skills.length === 0 && <p>No skills yet: create one first.</p>}
        {skills.map((s) => (
          <label key={s.id} className="check">
            <input
              type="checkbox"
              checked={d.skillIds.includes(s.id)}
              onChange={(e) => set({ skillIds: e.target.checked ? [...d.skillIds, s.id] : d.skillIds.filter((x) => x !== s.id) })}
            />{" "}
            {s.name}
          </label>
        ))}
        {at("agent.skill_ids") && <p className="field-error" role="alert">{at("agent.skill_ids")}</p>}
      </fieldset>
      <fieldset>
        <legend>What it does</legend>
        <label className="check">
          <input type="radio" name="mode" checked={d.mode === "steps"} onChange={() => set({ mode: "steps" })} /> A plan of tool calls
        </label>
        <label className="check">
          <input type="radio" name="mode" checked={d.mode === "model"} onChange={() => set({ mode: "model" })} /> A model calling tools
        </label>
      </fieldset>
      {d.mode === "steps" ? (
        <fieldset className={at("agent.steps") ? "invalid" : undefined}>
          <legend>Steps</legend>
          {d.steps.map((s, i) => (
            <fieldset key={i} className="step-draft">
              <legend>Step {i + 1}</legend>
              <Field label="Skill" error={at(`agent.steps[${i}].skill_id`)}>
                {(p) => (
                  <select {...p} value={s.skillId} onChange={(e) => setStep(i, { skillId: e.target.value })}>
                    <option value="">choose a skill</option>
                    {skills
                      .filter((k) => d.skillIds.includes(k.id))
                      .map((k) => (
                        <option key={k.id} value={k.id}>
                          {k.name}
                        </option>
                      ))}
                  </select>
                )}
              </Field>
              <Field label="Tool" error={at(`agent.steps[${i}].tool`)}>
                {(p) => (
                  <>
                    <input {...p} list={`${p.id}-tools`} value={s.tool} onChange={(e) => setStep(i, { tool: e.target.value })} />
                    <datalist id={`${p.id}-tools`}>
                      {toolsOf(s.skillId).map((t) => (
                        <option key={t.name} value={t.name}>
                          {t.description}
                        </option>
                      ))}
                    </datalist>
                  </>
                )}
              </Field>
              <Field
                label="Arguments (JSONata)"
                error={at(`agent.steps[${i}].arguments`)}
                hint={
                  <>
                    Over <code>{"{event, input, steps}"}</code>, e.g. <code>{'{"text": event.payload.name}'}</code>
                  </>
                }
              >
                {(p) => (
                  <ExpressionEditor
                    control={p}
                    value={s.arguments}
                    onChange={(v) => (setStep(i, { arguments: v }), setMarked((m) => ({ ...m, [i]: undefined })))}
                    marked={marked[i] ?? positionIn(at(`agent.steps[${i}].arguments`))}
                  />
                )}
              </Field>
              <TryIt kind={ExpressionKind.STEP_ARGUMENTS} expression={s.arguments} onMarked={(m) => setMarked((all) => ({ ...all, [i]: m }))} />
              <button type="button" onClick={() => set({ steps: d.steps.filter((_, j) => j !== i) })}>
                Remove step {i + 1}
              </button>
            </fieldset>
          ))}
          {at("agent.steps") && <p className="field-error" role="alert">{at("agent.steps")}</p>}
          <button type="button" onClick={() => set({ steps: [...d.steps, { skillId: d.skillIds[0] ?? "", tool: "", arguments: "" }] })}>
            Add step
          </button>
        </fieldset>
      ) : (
        <fieldset>
          <legend>Model</legend>
          <Field label="Base URL" error={at("agent.model.base_url")} hint="An OpenAI-compatible chat completions endpoint">
            {(p) => <input {...p} type="url" value={d.baseUrl} onChange={(e) => set({ baseUrl: e.target.value })} />}
          </Field>
          <Field label="Model" error={at("agent.model.model")}>
            {(p) => <input {...p} value={d.model} onChange={(e) => set({ model: e.target.value })} />}
          </Field>
          <Field label="API key" error={at("agent.model.api_key")} hint={d.apiKeySet ? "A key is stored; leave empty to keep it." : undefined}>
            {(p) => <input {...p} type="password" autoComplete="off" value={d.apiKey} onChange={(e) => set({ apiKey: e.target.value })} />}
          </Field>
          <Field label="Instructions" error={at("agent.instructions")}>
            {(p) => <textarea {...p} rows={4} value={d.instructions} onChange={(e) => set({ instructions: e.target.value })} />}
          </Field>
          <Field label="Max steps" error={at("agent.max_steps")} hint="Default 16">
            {(p) => <input {...p} inputMode="numeric" value={d.maxSteps} onChange={(e) => set({ maxSteps: e.target.value })} />}
          </Field>
        </fieldset>
      )}
      <Field label="Timeout (seconds)" error={at("agent.timeout")} hint="Default 120">
        {(p) => <input {...p} inputMode="numeric" value={d.timeoutSeconds} onChange={(e) => set({ timeoutSeconds: e.target.value })} />}
      </Field>
      <Field label="Max concurrent runs" error={at("agent.max_concurrent_runs")} hint="Empty: no limit">
        {(p) => <input {...p} inputMode="numeric" value={d.maxConcurrentRuns} onChange={(e) => set({ maxConcurrentRuns: e.target.value })} />}
      </Field>
      <button type="submit" disabled={action.busy}>
        {agent ? "Save agent" : "Create agent"}
      </button>
    </form>
  );
}

export function AgentEditPage({ id }: { id?: string }) {
  const { api, tenant } = useTenant();
  const agent = useLoad(async () => (id ? (await api.getAgent({ id })).agent : undefined), [id]);
  const skills = useLoad(async () => (await api.listSkills({ pageSize: 100 })).skills, [tenant]);
  const ready = skills.value && (!id || agent.value);
  return (
    <>
      <Heading>{id ? `Edit agent ${agent.value?.name ?? ""}` : "New agent"}</Heading>
      <ErrorBanner message={agent.error ?? skills.error} />
      {ready && <AgentForm agent={agent.value} skills={skills.value!} />}
    </>
  );
}
