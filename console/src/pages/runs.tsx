import { RunStatus, StepStatus, type Run, type RunStep } from "../../../gen/platform/v1/run_pb.js";
import { Facts, Json, LiveIndicator, Status } from "../components/bits.js";
import { ErrorBanner, useAction } from "../components/form.js";
import { RecordTable } from "../components/records.js";
import { duration, isTerminal, millis, RUN_STATUSES, runStatusName, stepStatusName, time, valueJson } from "../format.js";
import { useLiveList, useLiveRecord } from "../live.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "./common.js";
import { mapStream } from "./events.js";

export function useAgentNames() {
  const { api, tenant } = useTenant();
  const agents = useLoad(async () => (await api.listAgents({ pageSize: 100 })).agents, [tenant]).value ?? [];
  return (id: string) => agents.find((a) => a.id === id)?.name ?? id;
}

function useSkillNames() {
  const { api, tenant } = useTenant();
  const skills = useLoad(async () => (await api.listSkills({ pageSize: 100 })).skills, [tenant]).value ?? [];
  return (id: string) => skills.find((s) => s.id === id)?.name ?? id;
}

export function RunsPage() {
  const { api, tenant, base } = useTenant();
  const { loc, navigate } = useRouter();
  const agentName = useAgentNames();
  const statusParam = loc.search.get("status") ?? "";
  const status = RUN_STATUSES.find((s) => runStatusName(s) === statusParam) ?? RunStatus.UNSPECIFIED;
  const agentId = loc.search.get("agent") ?? "";
  const { items, liveness, error } = useLiveList<Run>({
    key: `${tenant}|${status}|${agentId}`,
    list: async () => (await api.listRuns({ pageSize: 50, status, agentId })).runs,
    // Watched without the status filter, so a run that leaves the status is
    // seen leaving (kept out by `keep`).
    watch: (signal) => mapStream(api.watchRuns({ agentId }, { signal }), (r) => r.run),
    id: (r) => r.id,
    version: (r) => millis(r.updateTime),
    order: (r) => millis(r.createTime),
    keep: (r) => status === RunStatus.UNSPECIFIED || r.status === status,
  });
  return (
    <>
      <Heading>Runs</Heading>
      <div className="filters">
        <label>
          Status{" "}
          <select
            value={statusParam}
            onChange={(e) => {
              const q = new URLSearchParams(loc.search);
              if (e.target.value) q.set("status", e.target.value);
              else q.delete("status");
              navigate(`${base}/runs${q.size ? `?${q}` : ""}`);
            }}
          >
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option key={s} value={runStatusName(s)}>
                {runStatusName(s)}
              </option>
            ))}
          </select>
        </label>
        {agentId && (
          <span>
            Agent {agentName(agentId)} <Link to={`${base}/runs`}>(all agents)</Link>
          </span>
        )}
        <LiveIndicator liveness={liveness} />
      </div>
      <RecordTable
        columns={["Run", "Agent", "Status", "Created", "Started by"]}
        className="runs"
        empty="No runs."
        error={error}
        rows={items.map((r) => (
          <tr key={r.id} data-run-id={r.id}>
            <td>
              <Link to={`${base}/runs/${r.id}`}>{r.id}</Link>
            </td>
            <td>{agentName(r.agentId)}</td>
            <td>
              <Status name={runStatusName(r.status)} />
            </td>
            <td>{time(r.createTime)}</td>
            <td>{r.eventId ? <Link to={`${base}/events/${r.eventId}`}>event</Link> : r.triggerId ? "trigger" : "by hand"}</td>
          </tr>
        ))}
      />
    </>
  );
}

function Step({ step, index, skillName }: { step: RunStep; index: number; skillName: (id: string) => string }) {
  const status = stepStatusName(step.status, step.error);
  return (
    <li className={`step step-${status}`} data-step-status={status}>
      <h3>
        {index + 1}. {step.tool || "model call"} <Status name={status} />
      </h3>
      <Facts
        rows={[
          ["Skill", step.skillId ? skillName(step.skillId) : "—"],
          ["Started", time(step.startTime)],
          ["Duration", step.status === StepStatus.RUNNING ? "running…" : duration(step.duration)],
          ["Run attempt", String(step.attempt || 1)],
          ["Call attempts", String(step.callAttempts.length || 1)],
        ]}
      />
      <details open>
        <summary>Arguments</summary>
        <Json value={valueJson(step.arguments)} label={`Arguments of step ${index + 1}`} />
      </details>
      {step.error ? (
        <p className="step-error">
          <strong>Error:</strong> {step.error}
        </p>
      ) : (
        step.result && (
          <details open>
            <summary>Result</summary>
            <Json value={valueJson(step.result)} label={`Result of step ${index + 1}`} />
          </details>
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
    </li>
  );
}

export function RunPage({ id }: { id: string }) {
  const { api, base, canWrite } = useTenant();
  const agentName = useAgentNames();
  const skillName = useSkillNames();
  const { item: run, setItem, liveness, error } = useLiveRecord<Run>({
    key: id,
    get: async () => (await api.getRun({ id })).run,
    watch: (signal) => mapStream(api.watchRun({ id }, { signal }), (r) => r.run),
    done: (r) => isTerminal(r.status),
  });
  const cancel = useAction();
  const status = run ? runStatusName(run.status) : "";
  return (
    <>
      <Heading>Run {id}</Heading>
      <ErrorBanner message={error} />
      {run && (
        <>
          <p className="run-status">
            Status: <Status name={status} /> {!isTerminal(run.status) && <LiveIndicator liveness={liveness} />}
          </p>
          {canWrite && !isTerminal(run.status) && (
            <p>
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
              <ErrorBanner message={cancel.problem?.message} />
            </p>
          )}
          <Facts
            rows={[
              ["Agent", <Link to={`${base}/agents/${run.agentId}`}>{agentName(run.agentId)}</Link>],
              ["Started by", run.eventId ? <Link to={`${base}/events/${run.eventId}`}>event {run.eventId}</Link> : run.triggerId ? `trigger ${run.triggerId}` : "by hand"],
              ["Attempt", String(run.attempt)],
              ["Created", time(run.createTime)],
              ["Started", time(run.startTime)],
              ["Ended", time(run.endTime)],
            ]}
          />
          {run.error && (
            <p className="banner error">
              <strong>Error:</strong> {run.error}
            </p>
          )}
          <h2>Input</h2>
          <Json value={valueJson(run.input)} label="Input" />
          <h2>Steps</h2>
          {run.steps.length ? (
            <ol className="timeline" aria-live="polite">
              {run.steps.map((s, i) => (
                <Step key={i} step={s} index={i} skillName={skillName} />
              ))}
            </ol>
          ) : (
            <p>No steps yet.</p>
          )}
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
