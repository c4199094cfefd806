import type { Event } from "../../../gen/platform/v1/event_pb.js";
import type { WebhookSource } from "../../../gen/platform/v1/webhook_source_pb.js";
import { Facts, Json, LiveIndicator, Status } from "../components/bits.js";
import { ErrorBanner, useAction } from "../components/form.js";
import { RecordTable } from "../components/records.js";
import { millis, runStatusName, time } from "../format.js";
import { useLiveList } from "../live.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

export function useSources() {
  const { api, tenant } = useTenant();
  return useLoad(async () => (await api.listWebhookSources({ pageSize: 100 })).webhookSources, [tenant]).value ?? [];
}

const sourceName = (sources: WebhookSource[], id: string) => sources.find((s) => s.id === id)?.name ?? id;

export function EventsPage() {
  const { api, tenant, base } = useTenant();
  const { loc, navigate } = useRouter();
  const sources = useSources();
  const sourceId = loc.search.get("source") ?? "";
  const eventType = loc.search.get("type") ?? "";
  const { items, liveness, error } = useLiveList<Event>({
    key: `${tenant}|${sourceId}|${eventType}`,
    list: async () => (await api.listEvents({ pageSize: 50, sourceId, eventType })).events,
    watch: (signal) => mapStream(api.watchEvents({ sourceId, eventType }, { signal }), (r) => r.event),
    id: (e) => e.id,
    version: (e) => millis(e.updateTime),
    order: (e) => millis(e.receiveTime),
  });
  const setFilter = (form: HTMLFormElement) => {
    const data = new FormData(form);
    const q = new URLSearchParams();
    for (const k of ["source", "type"]) if (data.get(k)) q.set(k, String(data.get(k)));
    navigate(`${base}/events${q.size ? `?${q}` : ""}`);
  };
  return (
    <>
      <Heading>Events</Heading>
      <form
        className="filters"
        key={`${sourceId}|${eventType}`}
        onSubmit={(e) => {
          e.preventDefault();
          setFilter(e.currentTarget);
        }}
      >
        <label>
          Source{" "}
          <select name="source" defaultValue={sourceId}>
            <option value="">any</option>
            {sources.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Event type <input name="type" defaultValue={eventType} placeholder="order.created" />
        </label>
        <button type="submit">Filter</button>
        <LiveIndicator liveness={liveness} />
      </form>
      <RecordTable
        columns={["Received", "Type", "Source", "Runs"]}
        empty="No events yet."
        error={error}
        rows={items.map((e) => (
          <tr key={e.id}>
            <td>
              <Link to={`${base}/events/${e.id}`}>{time(e.receiveTime)}</Link>
            </td>
            <td>{e.eventType}</td>
            <td>{sourceName(sources, e.sourceId)}</td>
            <td>{e.runIds.length}</td>
          </tr>
        ))}
      />
    </>
  );
}

export async function* mapStream<R, T>(stream: AsyncIterable<R>, f: (r: R) => T | undefined): AsyncIterable<T | undefined> {
  for await (const r of stream) yield f(r);
}

export function EventPage({ id }: { id: string }) {
  const { api, base, canWrite } = useTenant();
  const sources = useSources();
  const event = useLoad(async () => (await api.getEvent({ id })).event, [id]);
  const runs = useLoad(async () => (await api.listRuns({ eventId: id, pageSize: 100 })).runs, [id]);
  const replay = useAction();
  const e = event.value;
  return (
    <>
      <Heading>Event {e?.eventType}</Heading>
      <ErrorBanner message={event.error} />
      {e && (
        <>
          <Facts
            rows={[
              ["ID", <code>{e.id}</code>],
              ["Source", <Link to={`${base}/sources/${e.sourceId}`}>{sourceName(sources, e.sourceId)}</Link>],
              ["Received", time(e.receiveTime)],
              ["Idempotency key", e.idempotencyKey || "—"],
              ["Matched triggers", e.matchedTriggerIds.length ? e.matchedTriggerIds.map((t) => <Link key={t} to={`${base}/triggers/${t}`}>{t} </Link>) : "none"],
            ]}
          />
          <h2>Payload</h2>
          <Json value={e.payload} label="Payload" />
          <h2>Runs</h2>
          <ErrorBanner message={runs.error} />
          {runs.value?.length ? (
            <ul>
              {runs.value.map((r) => (
                <li key={r.id}>
                  <Link to={`${base}/runs/${r.id}`}>{r.id}</Link> <Status name={runStatusName(r.status)} />
                </li>
              ))}
            </ul>
          ) : (
            <p>This event started no runs.</p>
          )}
          {canWrite && (
            <>
              <button
                type="button"
                disabled={replay.busy}
                onClick={() =>
                  void replay.run(async () => {
                    const res = await api.replayEvent({ id });
                    runs.setValue([...res.runs, ...(runs.value ?? [])]);
                  })
                }
              >
                Replay
              </button>{" "}
              <small>Queues runs again for the triggers that match the event now.</small>
              <ErrorBanner message={replay.problem?.message} />
            </>
          )}
        </>
      )}
    </>
  );
}
