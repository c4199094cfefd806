import { useState } from "react";
import type { WebhookSource } from "../../../gen/platform/v1/webhook_source_pb.js";
import { Facts } from "../components/bits.js";
import { ActionForm, ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { EditPage, RecordActions, RecordList, SubmitButton } from "../components/records.js";
import { time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

export function SourcesPage() {
  const { api, tenant, base } = useTenant();
  const sources = useLoad(async () => (await api.listWebhookSources({ pageSize: 100 })).webhookSources, [tenant]);
  return (
    <RecordList
      title="Webhook sources"
      create={{ to: `${base}/sources/new`, label: "New source" }}
      records={sources}
      empty="No sources yet. A source is a sender of webhook events with its own token."
    >
      {(s) => (
        <>
          <Link to={`${base}/sources/${s.id}`}>{s.name}</Link> {s.enabled === false && <span className="muted">(disabled)</span>}
        </>
      )}
    </RecordList>
  );
}

// A new token, shown once: the API never returns it again.
function TokenOnce({ token }: { token: string }) {
  return (
    <section className="banner token" aria-labelledby="token-heading">
      <h2 id="token-heading">Webhook token</h2>
      <p>Copy it now: it is shown only once. Senders put it in the <code>X-Webhook-Token</code> header.</p>
      <output className="token-value" data-testid="webhook-token">
        {token}
      </output>{" "}
      <button type="button" onClick={() => void navigator.clipboard?.writeText(token)}>
        Copy
      </button>
    </section>
  );
}

function TestEvent({ source }: { source: WebhookSource }) {
  const { api, base } = useTenant();
  const [eventType, setEventType] = useState("test.ping");
  const [payload, setPayload] = useState("{}");
  const [sent, setSent] = useState<{ id: string; matched: number }>();
  const action = useAction();
  const { at, general } = placeProblem(action.problem, ["event_type", "payload"]);
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setSent(undefined);
        void action.run(async () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(payload);
          } catch (err) {
            action.setProblem({ field: "payload", message: `not JSON: ${(err as Error).message}` });
            return;
          }
          if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
            action.setProblem({ field: "payload", message: "must be a JSON object" });
            return;
          }
          const res = await api.sendWebhookSourceTestEvent({ id: source.id, eventType, payload: parsed as never });
          if (res.event) setSent({ id: res.event.id, matched: res.matchedTriggers });
        });
      }}
    >
      <h2>Send a test event</h2>
      <p>Ingested as if this source had sent it: the same validation, matching and runs.</p>
      <ErrorBanner message={general} />
      <Field label="Event type" error={at("event_type")}>
        {(p) => <input {...p} value={eventType} onChange={(e) => setEventType(e.target.value)} />}
      </Field>
      <Field label="Payload (JSON object)" error={at("payload")}>
        {(p) => <textarea {...p} rows={4} value={payload} onChange={(e) => setPayload(e.target.value)} />}
      </Field>
      <button type="submit" disabled={action.busy}>
        Send test event
      </button>
      {sent && (
        <p role="status">
          Sent <Link to={`${base}/events/${sent.id}`}>event {sent.id}</Link>; it matched {sent.matched} trigger{sent.matched === 1 ? "" : "s"}.
        </p>
      )}
    </form>
  );
}

export function SourcePage({ id }: { id: string }) {
  const { api, base, canWrite } = useTenant();
  const source = useLoad(async () => (await api.getWebhookSource({ id })).webhookSource, [id]);
  const [token, setToken] = useState<string | undefined>(() => takeCreatedToken(id));
  const rotate = useAction();
  const del = useAction();
  const s = source.value;
  return (
    <>
      <Heading>Webhook source {s?.name}</Heading>
      <ErrorBanner message={source.error} />
      {token && <TokenOnce token={token} />}
      {s && (
        <>
          <RecordActions
            list={`${base}/sources`}
            id={id}
            confirm={`Delete source ${s.name}?`}
            del={del}
            remove={() => api.deleteWebhookSource({ id })}
          >
            <button
              type="button"
              disabled={rotate.busy}
              onClick={() =>
                confirm("Issue a new token? The old one stays valid for 24 hours.") &&
                void rotate.run(async () => {
                  const res = await api.rotateWebhookSourceToken({ id });
                  setToken(res.token);
                  if (res.webhookSource) source.setValue(res.webhookSource);
                })
              }
            >
              Rotate token
            </button>
          </RecordActions>
          <ErrorBanner message={rotate.problem?.message ?? del.problem?.message} />
          <Facts
            rows={[
              ["ID", <code>{s.id}</code>],
              ["Enabled", s.enabled === false ? "no" : "yes"],
              ["Previous token valid until", time(s.previousTokenExpireTime)],
              ["Created", time(s.createTime)],
            ]}
          />
          <p>
            <Link to={`${base}/events?source=${encodeURIComponent(id)}`}>Events from this source</Link>
          </p>
          {canWrite && <TestEvent source={s} />}
        </>
      )}
    </>
  );
}

// The token of a source created a moment ago, handed to its page in memory
// only (not the URL or history state, which the browser keeps).
let created: { id: string; token: string } | undefined;
function takeCreatedToken(id: string): string | undefined {
  const token = created?.id === id ? created.token : undefined;
  created = undefined;
  return token;
}

function SourceForm({ source }: { source?: WebhookSource }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const [name, setName] = useState(source?.name ?? "");
  const [enabled, setEnabled] = useState(source?.enabled !== false);
  const action = useAction();
  const { at, general } = placeProblem(action.problem, ["webhook_source.name"]);
  return (
    <ActionForm
      action={action}
      submit={async () => {
        const message = { id: source?.id ?? "", name, enabled };
        if (source) {
          await api.updateWebhookSource({ webhookSource: message, updateMask: { paths: ["name", "enabled"] } });
          navigate(`${base}/sources/${source.id}`);
        } else {
          const res = await api.createWebhookSource({ webhookSource: message });
          created = { id: res.webhookSource!.id, token: res.token };
          navigate(`${base}/sources/${created.id}`);
        }
      }}
    >
      <ErrorBanner message={general} />
      <Field label="Name" error={at("webhook_source.name")}>
        {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <div className="field">
        <label>
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Enabled (a disabled source's events are
          refused)
        </label>
      </div>
      <SubmitButton busy={action.busy} editing={!!source} noun="source" />
    </ActionForm>
  );
}

export function SourceEditPage({ id }: { id?: string }) {
  const { api } = useTenant();
  const source = useLoad(async () => (id ? (await api.getWebhookSource({ id })).webhookSource : undefined), [id]);
  return (
    <EditPage title={id ? `Edit source ${source.value?.name ?? ""}` : "New webhook source"} error={source.error} ready={!id || !!source.value}>
      <SourceForm source={source.value} />
    </EditPage>
  );
}
