import { useEffect, useRef, useState, type ReactNode } from "react";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { RunStatus, StepStatus, type Run, type RunStep } from "../../../gen/platform/v1/run_pb.js";
import { CopyId, Facts, Json, LiveIndicator, Status, When } from "../components/bits.js";
import { ErrorBanner, useAction } from "../components/form.js";
import { RecordTable } from "../components/records.js";
import { isTerminal, millis, millisText, RUN_STATUSES, runStatusName, stepStatusName, time, valueJson } from "../format.js";
import { useLiveList, useLiveRecord } from "../live.js";
import { useNames, type Names } from "../names.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading } from "./common.js";
import { mapStream } from "./events.js";

const PAGE = 50;

const WINDOWS: [string, string, number][] = [
  ["hour", "last hour", 3_600_000],
  ["day", "last 24 hours", 86_400_000],
  ["week", "last 7 days", 7 * 86_400_000],
];

// What started a run, as its page and the list say it: the event's type,
// the schedule, the trigger, or by hand (RunAgent).
export function startedBy(run: Run, names: Names, base: string): ReactNode {
  if (run.eventId) return <Link to={`${base}/events/${run.eventId}`}>{names.eventType(run.eventId) ?? "event"}</Link>;
  const trigger = run.triggerId ? names.trigger(run.triggerId) : undefined;
  if (trigger?.kind.case === "schedule") return <span>schedule {trigger.kind.value.cron}</span>;
  if (run.triggerId) return <Link to={`${base}/triggers/${run.triggerId}`}>trigger</Link>;
  return <span>by hand</span>;
}

// Start to end, or to now while the run goes on.
function runMillis(run: Run, now: number): number | undefined {
  if (!run.startTime) return undefined;
  return (run.endTime ? millis(run.endTime) : now) - millis(run.startTime);
}

// Re-renders every `ms` while `on`: relative times and running durations move.
function useTick(ms: number, on = true): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms, on]);
  return now;
}

export function RunsPage() {
  const { api, tenant, base } = useTenant();
  const names = useNames();
  const { loc, navigate } = useRouter();
  const now = useTick(10_000);
  const statusParam = loc.search.get("status") ?? "";
  const status = RUN_STATUSES.find((s) => runStatusName(s) === statusParam) ?? RunStatus.UNSPECIFIED;
  const agentId = loc.search.get("agent") ?? "";
  const eventId = loc.search.get("event") ?? "";
  const triggerId = loc.search.get("trigger") ?? "";
  const since = WINDOWS.find(([key]) => key === loc.search.get("since"));
  const key = `${tenant}|${status}|${agentId}|${eventId}|${triggerId}|${since?.[0] ?? ""}`;
  // The window's start, fixed when the filter was chosen, so the query and
  // what the stream keeps agree.
  const after = useRef(0);
  const nextToken = useRef("");
  const [older, setOlder] = useState<{ key: string; runs: Run[]; token: string }>({ key: "", runs: [], token: "" });
  const query = () => ({
    pageSize: PAGE,
    status,
    agentId,
    eventId,
    triggerId,
    createTimeAfter: since ? timestampFromMs(after.current) : undefined,
  });
  const { items, liveness, error } = useLiveList<Run>({
    key,
    list: async () => {
      after.current = since ? Date.now() - since[2] : 0;
      const res = await api.listRuns(query());
      nextToken.current = res.nextPageToken;
      setOlder((o) => (o.key === key ? o : { key, runs: [], token: res.nextPageToken }));
      return res.runs;
    },
    // Watched without the status filter, so a run that leaves the status is
    // seen leaving (kept out by `keep`).
    watch: (signal, onOpen) => mapStream(api.watchRuns({ agentId, eventId, triggerId }, { signal, onHeader: onOpen }), (r) => r.run),
    id: (r) => r.id,
    version: (r) => millis(r.updateTime),
    order: (r) => millis(r.createTime),
    keep: (r) => (status === RunStatus.UNSPECIFIED || r.status === status) && millis(r.createTime) >= after.current,
  });
  const more = useAction();
  const loadOlder = () =>
    more.run(async () => {
      const res = await api.listRuns({ ...query(), pageToken: older.token });
      setOlder((o) => ({ key, runs: [...o.runs, ...res.runs], token: res.nextPageToken }));
    });
  // Runs that arrived live stay above the pages read by token (the live
  // list keeps up to 200), so nothing between them goes missing.
  const seen = new Set(items.map((i) => i.id));
  const shown = older.key === key ? [...items, ...older.runs.filter((r) => !seen.has(r.id))] : items;

  const setParam = (name: string, value: string) => {
    const q = new URLSearchParams(loc.search);
    if (value) q.set(name, value);
    else q.delete(name);
    navigate(`${base}/runs${q.size ? `?${q}` : ""}`);
  };
  const search = useAction();
  const find = (text: string) =>
    search.run(async () => {
      const id = text.trim();
      if (id.startsWith("run_")) {
        await api.getRun({ id });
        return navigate(`${base}/runs/${id}`);
      }
      const q = new URLSearchParams();
      if (id.startsWith("evt_")) q.set("event", id);
      else if (id.startsWith("trg_")) q.set("trigger", id);
      else if (id.startsWith("agt_")) q.set("agent", id);
      else if (id) throw new Error("Search by a run, event, trigger or agent id (run_…, evt_…, trg_…, agt_…).");
      navigate(`${base}/runs${q.size ? `?${q}` : ""}`);
    });

  return (
    <>
      <Heading>Runs</Heading>
      <div className="filters">
        <label>
          Agent{" "}
          <select value={agentId} onChange={(e) => setParam("agent", e.target.value)}>
            <option value="">any</option>
            {agentId && !names.agents.some((a) => a.id === agentId) && <option value={agentId}>{agentId}</option>}
            {names.agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Status{" "}
          <select value={statusParam} onChange={(e) => setParam("status", e.target.value)}>
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option key={s} value={runStatusName(s)}>
                {runStatusName(s)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Created{" "}
          <select value={since?.[0] ?? ""} onChange={(e) => setParam("since", e.target.value)}>
            <option value="">any time</option>
            {WINDOWS.map(([k, label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <form
          role="search"
          className="search"
          onSubmit={(e) => {
            e.preventDefault();
            void find(String(new FormData(e.currentTarget).get("id") ?? ""));
          }}
        >
          <label>
            Find by id <input name="id" key={eventId + triggerId} defaultValue={eventId || triggerId} placeholder="run_…, evt_…, trg_…" />
          </label>{" "}
          <button type="submit">Find</button>
        </form>
        {(eventId || triggerId) && <Link to={`${base}/runs`}>clear</Link>}
        <LiveIndicator liveness={liveness} />
      </div>
      <ErrorBanner message={search.problem?.message} />
      <RecordTable
        columns={["Agent", "Started by", "Status", "Duration", "Created", "Attempts"]}
        className="runs"
        empty={
          agentId || status || since || eventId || triggerId
            ? "No runs match these filters."
            : "No runs yet. Run an agent by hand from its page, or send an event to a source a trigger listens to."
        }
        error={error}
        rows={shown.map((r) => {
          const ms = runMillis(r, now);
          return (
            <tr key={r.id} data-run-id={r.id}>
              <td>
                <Link to={`${base}/runs/${r.id}`}>{names.agent(r.agentId)}</Link>
                <div className="sub">
                  <CopyId id={r.id} />
                </div>
              </td>
              <td>{startedBy(r, names, base)}</td>
              <td>
                <Status name={runStatusName(r.status)} />
              </td>
              <td className="num">{ms === undefined ? "—" : millisText(ms)}</td>
              <td>
                <When ts={r.createTime} />
              </td>
              <td className="num">{r.attempt}</td>
            </tr>
          );
        })}
      />
      {older.key === key && older.token && (
        <p>
          <button type="button" disabled={more.busy} onClick={() => void loadOlder()}>
            Older runs
          </button>
          <ErrorBanner message={more.problem?.message} />
        </p>
      )}
    </>
  );
}

// A step's own words for its status: a step the cancel stopped says so.
const stepWord = (s: RunStep) => stepStatusName(s.status, s.error);

interface Span {
  start: number;
  end: number;
}

// Where a span sits on the run's time axis, in percent.
function place({ start, end }: Span, axis: Span) {
  const total = Math.max(1, axis.end - axis.start);
  const left = ((start - axis.start) / total) * 100;
  return { left: `${left.toFixed(3)}%`, width: `${Math.max(0.4, ((end - start) / total) * 100).toFixed(3)}%` };
}

function StepDetails({ step, index, names }: { step: RunStep; index: number; names: Names }) {
  const word = stepWord(step);
  return (
    <div className="step-details">
      <Facts
        rows={[
          ["Skill", step.skillId ? names.skill(step.skillId) : "—"],
          ["Started", time(step.startTime)],
          ["Duration", step.status === StepStatus.RUNNING ? "running…" : step.endTime ? millisText(millis(step.endTime) - millis(step.startTime)) : "—"],
          ["Run attempt", String(step.attempt || 1)],
          ["Call attempts", String(step.callAttempts.length || 1)],
          ...(step.worker ? [["Worker", <code>{step.worker}</code>] as [string, ReactNode]] : []),
        ]}
      />
      <h4>Arguments</h4>
      <Json value={valueJson(step.arguments)} label={`Arguments of step ${index + 1}`} />
      {step.error ? (
        <p className={word === "cancelled" ? "step-error cancelled" : "step-error"}>
          <strong>{word === "cancelled" ? "Cancelled" : "Error"}:</strong> {step.error}
        </p>
      ) : (
        step.result && (
          <>
            <h4>Result</h4>
            <Json value={valueJson(step.result)} label={`Result of step ${index + 1}`} />
          </>
        )
      )}
      {step.callAttempts.length > 1 && (
        <ol className="attempts" aria-label="Call attempts">
          {step.callAttempts.map((a, i) => (
            <li key={i}>
              {time(a.startTime)}: {a.error || (a.endTime ? "succeeded" : "in flight")}
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

// The run's steps on one time axis: a bar per step, and under a step that
// retried a bar per try with the backoff between tries hatched.
function Timeline({ run, names, now }: { run: Run; names: Names; now: number }) {
  const live = !isTerminal(run.status);
  const endOf = (t: { endTime?: Run["endTime"] }) => (t.endTime ? millis(t.endTime) : live ? now : undefined);
  const spans = run.steps.map((s) => ({ start: millis(s.startTime), end: endOf(s) ?? (run.endTime ? millis(run.endTime) : millis(s.startTime)) }));
  const axis: Span = {
    start: Math.min(run.startTime ? millis(run.startTime) : Infinity, ...spans.map((s) => s.start)),
    end: Math.max(run.endTime ? millis(run.endTime) : live ? now : 0, ...spans.map((s) => s.end)),
  };
  const failing = run.steps.findLastIndex((s) => s.status === StepStatus.FAILED);
  // Open at first: a lone step, the failing one, one in flight; a click flips it.
  const [flipped, setFlipped] = useState<Set<number>>(() => new Set());
  const toggle = (i: number) => setFlipped((o) => (o.has(i) ? new Set([...o].filter((x) => x !== i)) : new Set([...o, i])));
  return (
    <div className="timeline" aria-live="polite">
      <div className="axis" aria-hidden="true">
        <span>0</span>
        <span>{millisText(axis.end - axis.start)}</span>
      </div>
      <ol className="lanes">
        {run.steps.map((s, i) => {
          const word = stepWord(s);
          const expanded = (run.steps.length === 1 || i === failing || s.status === StepStatus.RUNNING) !== flipped.has(i);
          const attempts = s.callAttempts;
          return (
            <li key={i} className={`step step-${word}${i === failing ? " failing" : ""}`} data-step-status={word}>
              <div className="lane">
                <button type="button" className="lane-label" aria-expanded={expanded} onClick={() => toggle(i)}>
                  <span className="caret" aria-hidden="true">
                    {expanded ? "▾" : "▸"}
                  </span>{" "}
                  {i + 1}. {s.tool || "model call"} <span className="muted">{s.skillId ? names.skill(s.skillId) : ""}</span>{" "}
                  <Status name={word} />
                  {i === failing && <span className="failing-mark"> the step that failed</span>}
                </button>
                <div className="track">
                  <span
                    className={`bar bar-step bar-${word}`}
                    style={place(spans[i]!, axis)}
                    title={`${s.tool}: ${word}, ${millisText(spans[i]!.end - spans[i]!.start)}`}
                  />
                </div>
              </div>
              {attempts.length > 1 &&
                attempts.map((a, j) => {
                  const span = { start: millis(a.startTime), end: endOf(a) ?? spans[i]!.end };
                  const prev = j > 0 ? endOf(attempts[j - 1]!) : undefined;
                  return (
                    <div className="lane attempt" key={j}>
                      <span className="lane-label muted">try {j + 1}</span>
                      <div className="track">
                        {prev !== undefined && span.start > prev && (
                          <span className="bar bar-backoff" style={place({ start: prev, end: span.start }, axis)} title={`backoff ${millisText(span.start - prev)}`} />
                        )}
                        <span
                          className={`bar bar-attempt bar-${a.error ? "failed" : a.endTime ? "succeeded" : word}`}
                          style={place(span, axis)}
                          title={a.error || (a.endTime ? "succeeded" : "in flight")}
                        />
                      </div>
                    </div>
                  );
                })}
              {expanded && <StepDetails step={s} index={i} names={names} />}
            </li>
          );
        })}
      </ol>
    </div>
  );
}

export function RunPage({ id }: { id: string }) {
  const { api, base, canWrite } = useTenant();
  const names = useNames();
  const { navigate } = useRouter();
  const { item: run, setItem, liveness, error } = useLiveRecord<Run>({
    key: id,
    get: async () => (await api.getRun({ id })).run,
    watch: (signal, onOpen) => mapStream(api.watchRun({ id }, { signal, onHeader: onOpen }), (r) => r.run),
    done: (r) => isTerminal(r.status),
  });
  const now = useTick(250, !!run && !isTerminal(run.status));
  const cancel = useAction();
  const again = useAction();
  const [replayed, setReplayed] = useState<string>();
  const status = run ? runStatusName(run.status) : "";
  const ms = run && runMillis(run, now);
  return (
    <>
      <Heading>
        {run ? (
          <>
            {names.agent(run.agentId)} <span className="muted">· {run.eventId ? (names.eventType(run.eventId) ?? "event") : startedByText(run, names)}</span>
          </>
        ) : (
          "Run"
        )}
      </Heading>
      <ErrorBanner message={error} />
      {run && (
        <>
          <p className="run-status">
            <Status name={status} /> {ms !== undefined && <span className="muted">{millisText(ms)}</span>}{" "}
            {!isTerminal(run.status) && <LiveIndicator liveness={liveness} />}
          </p>
          {canWrite && (
            <div className="actions">
              {!isTerminal(run.status) && (
                <button
                  type="button"
                  disabled={cancel.busy}
                  onClick={() =>
                    void cancel.run(async () => {
                      const res = await api.cancelRun({ id });
                      if (res.run) setItem(res.run);
                    })
                  }
                >
                  Cancel run
                </button>
              )}
              {run.eventId && (
                <button
                  type="button"
                  disabled={again.busy}
                  onClick={() =>
                    void again.run(async () => {
                      const res = await api.replayEvent({ id: run.eventId });
                      if (res.runs[0]) navigate(`${base}/runs/${res.runs[0].id}`);
                      else setReplayed("Replayed: the event matches no trigger now, so no run was queued.");
                    })
                  }
                >
                  Replay event
                </button>
              )}
              <button
                type="button"
                disabled={again.busy}
                onClick={() =>
                  void again.run(async () => {
                    const res = await api.runAgent({ id: run.agentId, input: run.input });
                    if (res.run) navigate(`${base}/runs/${res.run.id}`);
                  })
                }
              >
                Run again with this input
              </button>
            </div>
          )}
          <ErrorBanner message={cancel.problem?.message ?? again.problem?.message} />
          {replayed && <p role="status">{replayed}</p>}
          <Facts
            rows={[
              ["Agent", <Link to={`${base}/agents/${run.agentId}`}>{names.agent(run.agentId)}</Link>],
              ["Started by", startedBy(run, names, base)],
              ["Run ID", <CopyId id={run.id} />],
              ...(run.eventId ? [["Event ID", <CopyId id={run.eventId} />] as [string, ReactNode]] : []),
              ["Attempt", String(run.attempt)],
              ["Created", time(run.createTime)],
              ["Started", time(run.startTime)],
              ["Ended", time(run.endTime)],
            ]}
          />
          {run.error && (
            <p className={run.status === RunStatus.CANCELLED ? "banner" : "banner error"}>
              <strong>{run.status === RunStatus.CANCELLED ? "Cancelled" : "Error"}:</strong> {run.error}
            </p>
          )}
          <h2>Steps</h2>
          {run.steps.length ? <Timeline run={run} names={names} now={now} /> : <p>{isTerminal(run.status) ? "The run made no calls." : "No steps yet."}</p>}
          <h2>Input</h2>
          <Json value={valueJson(run.input)} label="Input" />
          {run.output && (
            <>
              <h2>Output</h2>
              <Json value={valueJson(run.output)} label="Output" />
            </>
          )}
        </>
      )}
    </>
  );
}

function startedByText(run: Run, names: Names): string {
  const trigger = run.triggerId ? names.trigger(run.triggerId) : undefined;
  if (trigger?.kind.case === "schedule") return "schedule";
  return run.triggerId ? "trigger" : "by hand";
}
