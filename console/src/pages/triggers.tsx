import { useState, type ReactNode } from "react";
import type { Agent } from "../../../gen/platform/v1/agent_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Trigger, TriggerSchema } from "../../../gen/platform/v1/trigger_pb.js";
import type { WebhookSource } from "../../../gen/platform/v1/webhook_source_pb.js";
import { CopyId, Facts, Status } from "../components/bits.js";
import { ExpressionEditor, positionIn, TryIt, type Marked } from "../components/expression.js";
import { ExpressionKind } from "../../../gen/platform/v1/expression_pb.js";
import { ActionForm, ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { EditPage, Enabled, LastRun, RecordActions, RecordList, SubmitButton } from "../components/records.js";
import { describeTrigger, useNames } from "../names.js";
import { time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

export function TriggersPage() {
  const { api, tenant, base } = useTenant();
  const triggers = useLoad(async () => (await api.listTriggers({ pageSize: 100 })).triggers, [tenant]);
  const names = useNames();
  return (
    <RecordList
      title="Triggers"
      create={{ to: `${base}/triggers/new`, label: "New trigger" }}
      records={triggers}
      columns={["Agent", "Fires on", "Status", "Last run"]}
      empty={
        <p>
          No triggers yet. A trigger starts an agent on a source's webhook events or on a schedule; without one, agents run only by
          hand.
        </p>
      }
    >
      {(t) => [
        <>
          <Link to={`${base}/agents/${t.agentId}`}>{names.agent(t.agentId)}</Link>
          <div className="sub">
            <CopyId id={t.id} />
          </div>
        </>,
        <Link to={`${base}/triggers/${t.id}`}>{describeTrigger(t, names.source)}</Link>,
        t.filterError ? <Status name="filter failing" /> : <Enabled enabled={t.enabled} />,
        <LastRun triggerId={t.id} />,
      ]}
    </RecordList>
  );
}

export function TriggerPage({ id }: { id: string }) {
  const { api, base } = useTenant();
  const trigger = useLoad(async () => (await api.getTrigger({ id })).trigger, [id]);
  const names = useNames();
  const del = useAction();
  const t = trigger.value;
  return (
    <>
      <Heading>Trigger</Heading>
      <ErrorBanner message={trigger.error} />
      {t && (
        <>
          <RecordActions
            list={`${base}/triggers`}
            id={id}
            confirm="Delete this trigger?"
            del={del}
            remove={() => api.deleteTrigger({ id })}
          />
          <ErrorBanner message={del.problem?.message} />
          <Facts
            rows={[
              ["ID", <CopyId id={t.id} />],
              ["Agent", <Link to={`${base}/agents/${t.agentId}`}>{names.agent(t.agentId)}</Link>],
              ["Fires on", describeTrigger(t, names.source)],
              ...(t.kind.case === "webhook" && t.kind.value.filter ? [["Filter", <code>{t.kind.value.filter}</code>] as [string, ReactNode]] : []),
              ["Enabled", t.enabled === false ? "no" : "yes"],
              ["Last run", <LastRun triggerId={t.id} />],
              ["Runs", <Link to={`${base}/runs?trigger=${encodeURIComponent(t.id)}`}>this trigger's runs</Link>],
              ["Updated", time(t.updateTime)],
            ]}
          />
          {t.filterError && (
            <p className="banner warning" role="status">
              The filter last failed {time(t.filterErrorTime)}: {t.filterError}
            </p>
          )}
        </>
      )}
    </>
  );
}

type Kind = "webhook" | "schedule" | "manual";

function TriggerForm({ trigger, agents, sources }: { trigger?: Trigger; agents: Agent[]; sources: WebhookSource[] }) {
  const { api, base, loc } = { ...useTenant(), ...useRouter() };
  const { navigate } = useRouter();
  const k = trigger?.kind;
  const [kind, setKind] = useState<Kind>(k?.case ?? "webhook");
  // No agent until one is chosen: a trigger for the wrong agent is worse than a refused form.
  const [agentId, setAgentId] = useState(trigger?.agentId ?? loc.search.get("agent") ?? "");
  const [enabled, setEnabled] = useState(trigger?.enabled !== false);
  const [sourceId, setSourceId] = useState(k?.case === "webhook" ? k.value.sourceId : "");
  const [pattern, setPattern] = useState(k?.case === "webhook" ? k.value.eventTypePattern : "");
  const [filter, setFilter] = useState(k?.case === "webhook" ? k.value.filter : "");
  const [marked, setMarked] = useState<Marked>();
  const [cron, setCron] = useState(k?.case === "schedule" ? k.value.cron : "");
  const [timezone, setTimezone] = useState(k?.case === "schedule" ? k.value.timezone : "");
  const action = useAction();
  const { at, general } = placeProblem(action.problem, [
    "trigger.agent_id", "trigger.webhook.source_id", "trigger.webhook.event_type_pattern", "trigger.webhook.filter",
    "trigger.schedule.cron", "trigger.schedule.timezone", "trigger.kind", "trigger",
  ]);
  const message = (): MessageInitShape<typeof TriggerSchema> => ({
    id: trigger?.id ?? "",
    agentId,
    enabled,
    kind:
      kind === "webhook"
        ? { case: "webhook" as const, value: { sourceId, eventTypePattern: pattern, filter } }
        : kind === "schedule"
          ? { case: "schedule" as const, value: { cron, timezone } }
          : { case: "manual" as const, value: {} },
  });
  return (
    <ActionForm
      action={action}
      submit={async () => {
        const res = trigger
          ? await api.updateTrigger({ trigger: message(), updateMask: { paths: ["agent_id", "enabled", kind] } })
          : await api.createTrigger({ trigger: message() });
        if (res.trigger) navigate(`${base}/triggers/${res.trigger.id}`);
      }}
    >
      <ErrorBanner message={general} />
      <Field label="Agent" error={at("trigger.agent_id")}>
        {(p) => (
          <select {...p} value={agentId} onChange={(e) => setAgentId(e.target.value)}>
            <option value="">choose an agent</option>
            {agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <div className="field">
        <label>
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Enabled
        </label>
      </div>
      <fieldset>
        <legend>Fires on</legend>
        {(["webhook", "schedule", "manual"] as const).map((value) => (
          <label key={value} className="check">
            <input type="radio" name="kind" checked={kind === value} onChange={() => setKind(value)} />{" "}
            {value === "webhook" ? "Webhook events" : value === "schedule" ? "A schedule" : "Only by hand"}
          </label>
        ))}
      </fieldset>
      {kind === "webhook" && (
        <>
          <Field label="Source" error={at("trigger.webhook.source_id")}>
            {(p) => (
              <select {...p} value={sourceId} onChange={(e) => setSourceId(e.target.value)}>
                <option value="">any source</option>
                {sources.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.name}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Event type pattern" error={at("trigger.webhook.event_type_pattern")} hint="Exact, * for one segment, a final ** for the rest: order.*">
            {(p) => <input {...p} value={pattern} onChange={(e) => setPattern(e.target.value)} />}
          </Field>
          <Field label="Filter (JSONata, optional)" error={at("trigger.webhook.filter")} hint="A boolean over {event_type, payload}">
            {(p) => (
              <ExpressionEditor
                control={p}
                value={filter}
                onChange={(v) => (setFilter(v), setMarked(undefined))}
                marked={marked ?? positionIn(at("trigger.webhook.filter"))}
              />
            )}
          </Field>
          <TryIt kind={ExpressionKind.FILTER} expression={filter} sourceId={sourceId || undefined} onMarked={setMarked} />
        </>
      )}
      {kind === "schedule" && (
        <>
          <Field label="Cron" error={at("trigger.schedule.cron")} hint="e.g. 0 9 * * 1-5">
            {(p) => <input {...p} value={cron} onChange={(e) => setCron(e.target.value)} />}
          </Field>
          <Field label="Time zone" error={at("trigger.schedule.timezone")} hint="IANA name; UTC when empty">
            {(p) => <input {...p} value={timezone} onChange={(e) => setTimezone(e.target.value)} />}
          </Field>
        </>
      )}
      <SubmitButton busy={action.busy} editing={!!trigger} noun="trigger" />
    </ActionForm>
  );
}

export function TriggerEditPage({ id }: { id?: string }) {
  const { api, tenant } = useTenant();
  const trigger = useLoad(async () => (id ? (await api.getTrigger({ id })).trigger : undefined), [id]);
  const agents = useLoad(async () => (await api.listAgents({ pageSize: 100 })).agents, [tenant]);
  const sources = useLoad(async () => (await api.listWebhookSources({ pageSize: 100 })).webhookSources, [tenant]);
  const ready = agents.value && sources.value && (!id || trigger.value);
  return (
    <EditPage title={id ? "Edit trigger" : "New trigger"} error={trigger.error ?? agents.error ?? sources.error} ready={!!ready}>
      <TriggerForm trigger={trigger.value} agents={agents.value!} sources={sources.value!} />
    </EditPage>
  );
}
