import type { Event } from "../../../gen/platform/v1/event_pb.js";
import { Fragment, type ReactNode } from "react";
import { CopyId, Facts, Json, LiveIndicator, Status, When } from "../components/bits.js";
import { describeTrigger, useNames, type Names } from "../names.js";
import { ErrorBanner, useAction } from "../components/form.js";
import { RecordTable } from "../components/records.js";
import { millis, runStatusName, time } from "../format.js";
import { useLiveList } from "../live.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";

// The agents an event's matched triggers start, by name, each once.
function agentsOf(triggerIds: string[], names: Names): ReactNode {
  const agents = [...new Set(triggerIds.map((t) => names.trigger(t)?.agentId).filter((a): a is string => !!a))];
  if (!triggerIds.length) return <span className="muted">no trigger</span>;
  return agents.map((a, i) => (
    <Fragment key={a}>
      {i ? ", " : ""}
      {names.agent(a)}
    </Fragment>
  ));
}

export function EventsPage() {
  const { api, tenant, base } = useTenant();
  const { loc, navigate } = useRouter();
  const names = useNames();
  const sources = names.sources;
  const sourceId = loc.search.get("source") ?? "";
  const eventType = loc.search.get("type") ?? "";
  const { items, liveness, error } = useLiveList<Event>({
    key: `${tenant}|${sourceId}|${eventType}`,
    list: async () => (await api.listEvents({ pageSize: 50, sourceId, eventType })).events,
    watch: (signal, onOpen) => mapStream(api.watchEvents({ sourceId, eventType }, { signal, onHeader: onOpen }), (r) => r.event),
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
        columns={["Event", "Source", "Received", "Started agents", "Runs"]}
        empty={
          sourceId || eventType ? (
            "No events match these filters."
          ) : (
            <p>
              No events yet. Send one to a <Link to={`${base}/sources`}>webhook source</Link> (its page shows a ready <code>curl</code>) or use
              its "Send test event" form.
            </p>
          )
        }
        error={error}
        rows={items.map((e) => (
          <tr key={e.id}>
            <td>
              <Link to={`${base}/events/${e.id}`}>{e.eventType}</Link>
              <div className="sub">
                <CopyId id={e.id} />
              </div>
            </td>
            <td>{names.source(e.sourceId)}</td>
            <td>
              <When ts={e.receiveTime} />
            </td>
            <td>{agentsOf(e.matchedTriggerIds, names)}</td>
            <td className="num">{e.runIds.length}</td>
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
  const names = useNames();
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
              ["ID", <CopyId id={e.id} />],
              ["Source", <Link to={`${base}/sources/${e.sourceId}`}>{names.source(e.sourceId)}</Link>],
              ["Received", time(e.receiveTime)],
              ["Idempotency key", e.idempotencyKey || "—"],
              [
                "Matched triggers",
                e.matchedTriggerIds.length
                  ? e.matchedTriggerIds.map((t, i) => {
                      const trigger = names.trigger(t);
                      return (
                        <Fragment key={t}>
                          {i ? ", " : ""}
                          <Link to={`${base}/triggers/${t}`}>{trigger ? `${describeTrigger(trigger, names.source)} → ${names.agent(trigger.agentId)}` : t}</Link>
                        </Fragment>
                      );
                    })
                  : "none",
              ],
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
                  <Link to={`${base}/runs/${r.id}`}>{names.agent(r.agentId)}</Link> <Status name={runStatusName(r.status)} />{" "}
                  <When ts={r.createTime} />
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
