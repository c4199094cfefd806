import { useState, type ReactNode } from "react";
import { WebhookSourceKind, type WebhookSource } from "../../../gen/platform/v1/webhook_source_pb.js";
import { CopyId, Facts, When } from "../components/bits.js";
import { ExpressionEditor, positionIn, TryIt, type Marked } from "../components/expression.js";
import { ExpressionKind } from "../../../gen/platform/v1/expression_pb.js";
import { useNames } from "../names.js";
import { ActionForm, ErrorBanner, Field, placeProblem, useAction } from "../components/form.js";
import { EditPage, Enabled, RecordActions, RecordList, SubmitButton } from "../components/records.js";
import { time } from "../format.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

export function SourcesPage() {
  const { api, tenant, base } = useTenant();
  const names = useNames();
  const sources = useLoad(async () => (await api.listWebhookSources({ pageSize: 100 })).webhookSources, [tenant]);
  return (
    <RecordList
      title="Webhook sources"
      create={{ to: `${base}/sources/new`, label: "New source" }}
      records={sources}
      columns={["Source", "Kind", "Status", "Triggers", "Last event"]}
      empty={
        <p>
          No sources yet. A source is a sender of webhook events (your app, GitHub, Stripe, any Standard Webhooks sender): create one
          and its page shows the URL and a ready <code>curl</code>.
        </p>
      }
    >
      {(s) => [
        <>
          <Link to={`${base}/sources/${s.id}`}>{s.name}</Link>
          <div className="sub">
            <CopyId id={s.id} />
          </div>
        </>,
        KIND_LABELS[kindOf(s)],
        <Enabled enabled={s.enabled} />,
        <span className="num">{names.triggers.filter((t) => t.kind.case === "webhook" && (t.kind.value.sourceId === s.id || !t.kind.value.sourceId)).length}</span>,
        <LastEvent sourceId={s.id} />,
      ]}
    </RecordList>
  );
}

function LastEvent({ sourceId }: { sourceId: string }) {
  const { api, base } = useTenant();
  const event = useLoad(async () => (await api.listEvents({ sourceId, pageSize: 1 })).events[0] ?? null, [sourceId]);
  if (event.value === undefined) return <span className="muted">…</span>;
  if (event.value === null) return <span className="muted">none yet</span>;
  return (
    <Link to={`${base}/events/${event.value.id}`}>
      {event.value.eventType} <When ts={event.value.receiveTime} />
    </Link>
  );
}

const KIND_LABELS: Record<WebhookSourceKind, string> = {
  [WebhookSourceKind.UNSPECIFIED]: "Envelope",
  [WebhookSourceKind.ENVELOPE]: "Envelope",
  [WebhookSourceKind.STANDARD_WEBHOOKS]: "Standard Webhooks",
  [WebhookSourceKind.GITHUB]: "GitHub",
  [WebhookSourceKind.STRIPE]: "Stripe",
};

const kindOf = (s: WebhookSource) => (s.kind === WebhookSourceKind.UNSPECIFIED ? WebhookSourceKind.ENVELOPE : s.kind);
const isSigned = (kind: WebhookSourceKind) => kind !== WebhookSourceKind.ENVELOPE && kind !== WebhookSourceKind.UNSPECIFIED;

function CopyButton({ text }: { text: string }) {
  return (
    <button type="button" onClick={() => void navigator.clipboard?.writeText(text)}>
      Copy
    </button>
  );
}

// A new token or signing secret, shown once: the API never returns it again.
function TokenOnce({ token }: { token: string }) {
  return (
    <section className="banner token" aria-labelledby="token-heading">
      <h2 id="token-heading">Webhook token</h2>
      <p>Copy it now: it is shown only once. Senders put it in the <code>X-Webhook-Token</code> header.</p>
      <output className="token-value" data-testid="webhook-token">
        {token}
      </output>{" "}
      <CopyButton text={token} />
    </section>
  );
}

// How a sender reaches an envelope source: its URL and a curl to paste, as
// `agentplane dev` prints it; the token in it only while it is shown once.
function SendBy({ token }: { token?: string }) {
  const url = `${location.origin}/webhooks/events`;
  const curl = `curl -s -X POST ${url} -H 'content-type: application/json' -H 'X-Webhook-Token: ${token ?? "$WEBHOOK_TOKEN"}' -d '{"event_type": "order.created", "payload": {"id": 1}}'`;
  return (
    <section aria-labelledby="send-heading">
      <h2 id="send-heading">Send an event</h2>
      <p>
        POST an envelope to <code data-testid="source-url">{url}</code> <CopyButton text={url} /> with the source's token
        {token ? "" : " (shown when the source was created or its token rotated; $WEBHOOK_TOKEN below)"}:
      </p>
      <pre className="json" data-testid="source-curl" tabIndex={0} aria-label="curl command">
        {curl}
      </pre>
      <CopyButton text={curl} />
    </section>
  );
}

function SigningSecretOnce({ secret }: { secret: string }) {
  return (
    <section className="banner token" aria-labelledby="secret-heading">
      <h2 id="secret-heading">Signing secret</h2>
      <p>Copy it now: it is shown only once. Give it to the provider as the webhook's secret.</p>
      <output className="token-value" data-testid="signing-secret">
        {secret}
      </output>{" "}
      <CopyButton text={secret} />
    </section>
  );
}

// A new signing secret: generated (shown once), or the provider's own
// (Stripe issues its secrets, so one is required there). The old one keeps
// verifying for 24 hours, so the provider can be switched over.
function RotateSigningSecret({ source, rotated }: { source: WebhookSource; rotated: (source: WebhookSource | undefined, secret: string) => void }) {
  const { api } = useTenant();
  const [secret, setSecret] = useState("");
  const action = useAction();
  const { at, general } = placeProblem(action.problem, ["signing_secret"]);
  const stripe = kindOf(source) === WebhookSourceKind.STRIPE;
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        if (!confirm("Rotate the signing secret? The old one keeps verifying for 24 hours.")) return;
        void action.run(async () => {
          const res = await api.rotateWebhookSourceSigningSecret({ id: source.id, signingSecret: secret });
          setSecret("");
          rotated(res.webhookSource, res.signingSecret);
        });
      }}
    >
      <h2>Rotate signing secret</h2>
      <ErrorBanner message={general} />
      <Field
        label={stripe ? "New signing secret (from Stripe)" : "New signing secret (optional)"}
        error={at("signing_secret")}
        hint={stripe ? "Roll the endpoint's secret in the Stripe dashboard and paste the new whsec_… here." : "Leave empty to generate one."}
      >
        {(p) => <input {...p} type="password" autoComplete="off" value={secret} onChange={(e) => setSecret(e.target.value)} />}
      </Field>
      <button type="submit" disabled={action.busy}>
        Rotate signing secret
      </button>
    </form>
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
  const [shown] = useState(() => takeCreated(id));
  const [token, setToken] = useState<string | undefined>(shown?.token);
  const [secret, setSecret] = useState<string | undefined>(shown?.signingSecret);
  const rotate = useAction();
  const del = useAction();
  const s = source.value;
  const signed = s ? isSigned(kindOf(s)) : false;
  return (
    <>
      <Heading>Webhook source {s?.name}</Heading>
      <ErrorBanner message={source.error} />
      {token && <TokenOnce token={token} />}
      {secret && <SigningSecretOnce secret={secret} />}
      {s && (
        <>
          <RecordActions
            list={`${base}/sources`}
            id={id}
            confirm={`Delete source ${s.name}?`}
            del={del}
            remove={() => api.deleteWebhookSource({ id })}
          >
            {!signed && (
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
            )}
          </RecordActions>
          <ErrorBanner message={rotate.problem?.message ?? del.problem?.message} />
          <Facts rows={facts(s)} />
          {!signed && <SendBy token={token} />}
          <p>
            <Link to={`${base}/events?source=${encodeURIComponent(id)}`}>Events from this source</Link>
          </p>
          {canWrite && signed && (
            <RotateSigningSecret
              source={s}
              rotated={(next, generated) => {
                if (next) source.setValue(next);
                setSecret(generated || undefined);
              }}
            />
          )}
          {canWrite && <TestEvent source={s} />}
        </>
      )}
    </>
  );
}

function facts(s: WebhookSource): [string, ReactNode][] {
  const credentials: [string, ReactNode][] = isSigned(kindOf(s))
    ? [
        [
          "URL",
          <>
            <code data-testid="source-url">{s.url}</code> <CopyButton text={s.url} />
          </>,
        ],
        ["Signing secret", s.signingSecretSet ? "set (never shown again)" : "not set"],
        ["Previous signing secret valid until", time(s.previousSigningSecretExpireTime)],
      ]
    : [["Previous token valid until", time(s.previousTokenExpireTime)]];
  return [
    ["ID", <CopyId id={s.id} />],
    ["Kind", KIND_LABELS[kindOf(s)]],
    ...credentials,
    ["Enabled", s.enabled === false ? "no" : "yes"],
    ["Mapping", s.mapping ? <pre className="json">{s.mapping}</pre> : "none"],
    ["Created", time(s.createTime)],
  ];
}

// The token or generated signing secret of a source created a moment ago,
// handed to its page in memory only (not the URL or history state, which the
// browser keeps).
let created: { id: string; token: string; signingSecret: string } | undefined;
function takeCreated(id: string): { token?: string; signingSecret?: string } | undefined {
  const shown = created?.id === id ? created : undefined;
  created = undefined;
  return shown && { token: shown.token || undefined, signingSecret: shown.signingSecret || undefined };
}

// A source not created yet has no events: its mapping is tried on pasted JSON.
const NO_SOURCE = "src_none";

const KIND_CHOICES = [WebhookSourceKind.ENVELOPE, WebhookSourceKind.STANDARD_WEBHOOKS, WebhookSourceKind.GITHUB, WebhookSourceKind.STRIPE];

function SourceForm({ source }: { source?: WebhookSource }) {
  const { api, base } = useTenant();
  const { navigate } = useRouter();
  const [name, setName] = useState(source?.name ?? "");
  const [enabled, setEnabled] = useState(source?.enabled !== false);
  const [kind, setKind] = useState<WebhookSourceKind>(source ? kindOf(source) : WebhookSourceKind.ENVELOPE);
  const [signingSecret, setSigningSecret] = useState("");
  const [mapping, setMapping] = useState(source?.mapping ?? "");
  const [marked, setMarked] = useState<Marked>();
  const action = useAction();
  const { at, general } = placeProblem(action.problem, [
    "webhook_source.name",
    "webhook_source.kind",
    "webhook_source.signing_secret",
    "webhook_source.mapping",
  ]);
  return (
    <ActionForm
      action={action}
      submit={async () => {
        if (source) {
          await api.updateWebhookSource({
            webhookSource: { id: source.id, name, enabled, mapping },
            updateMask: { paths: ["name", "enabled", "mapping"] },
          });
          navigate(`${base}/sources/${source.id}`);
        } else {
          const res = await api.createWebhookSource({ webhookSource: { name, enabled, kind, signingSecret: isSigned(kind) ? signingSecret : "", mapping } });
          created = { id: res.webhookSource!.id, token: res.token, signingSecret: res.signingSecret };
          navigate(`${base}/sources/${created.id}`);
        }
      }}
    >
      <ErrorBanner message={general} />
      <Field label="Name" error={at("webhook_source.name")}>
        {(p) => <input {...p} value={name} onChange={(e) => setName(e.target.value)} />}
      </Field>
      <Field
        label="Kind"
        error={at("webhook_source.kind")}
        hint={
          source
            ? "Set when the source was created."
            : "Envelope: your senders post {event_type, payload} with a token. The others receive a provider's own signed deliveries at the source's URL."
        }
      >
        {(p) => (
          <select {...p} value={kind} disabled={!!source} onChange={(e) => setKind(Number(e.target.value) as WebhookSourceKind)}>
            {KIND_CHOICES.map((k) => (
              <option key={k} value={k}>
                {KIND_LABELS[k]}
              </option>
            ))}
          </select>
        )}
      </Field>
      {!source && isSigned(kind) && (
        <Field
          label={kind === WebhookSourceKind.STRIPE ? "Signing secret (from Stripe)" : "Signing secret (optional)"}
          error={at("webhook_source.signing_secret")}
          hint={
            kind === WebhookSourceKind.STRIPE
              ? "The endpoint's whsec_… secret from the Stripe dashboard. Stored encrypted and never shown again."
              : "Leave empty to generate one, shown once after creating. Stored encrypted and never shown again."
          }
        >
          {(p) => <input {...p} type="password" autoComplete="off" value={signingSecret} onChange={(e) => setSigningSecret(e.target.value)} />}
        </Field>
      )}
      <Field
        label="Mapping (JSONata, optional)"
        error={at("webhook_source.mapping")}
        hint={
          <>
            Turns a delivery into the event: its input is <code>{"{body, headers, event_type}"}</code>, its result{" "}
            <code>{'{"event_type": "…", "payload": {…}}'}</code>. Empty: the kind's own event.
          </>
        }
      >
        {(p) => (
          <ExpressionEditor
            control={p}
            rows={4}
            value={mapping}
            onChange={(v) => (setMapping(v), setMarked(undefined))}
            marked={marked ?? positionIn(at("webhook_source.mapping"))}
          />
        )}
      </Field>
      <TryIt kind={ExpressionKind.MAPPING} expression={mapping} sourceId={source?.id ?? NO_SOURCE} onMarked={setMarked} />
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
