// The console's home page: GetTenantOverview drawn as plain SVG charts (no
// chart library: a few rectangles cost no bytes), read again every few
// seconds while the page is open and visible, so it follows the tenant live.
import { useEffect, useState, type ReactNode } from "react";
import { OverviewWindow, type OverviewBucket, type RunCounts, type TenantOverview } from "../../../gen/platform/v1/overview_pb.js";
import { ErrorBanner } from "../components/form.js";
import { duration, millis } from "../format.js";
import { problemOf } from "../api.js";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading } from "./common.js";

const WINDOWS: [string, OverviewWindow, string, number][] = [
  ["hour", OverviewWindow.HOUR, "Last hour", 5_000],
  ["day", OverviewWindow.DAY, "24 hours", 15_000],
  ["week", OverviewWindow.WEEK, "7 days", 60_000],
];

// Stacked bottom to top, in this order; colors from styles.css.
const STACK: [keyof Omit<RunCounts, "$typeName" | "$unknown">, string][] = [
  ["succeeded", "succeeded"],
  ["failed", "failed"],
  ["timedOut", "timed out"],
  ["cancelled", "cancelled"],
  ["running", "running"],
  ["queued", "queued"],
];

const total = (r: RunCounts | undefined) => (r ? STACK.reduce((a, [k]) => a + r[k], 0) : 0);

function useOverview(window: OverviewWindow, everyMs: number) {
  const { api, tenant } = useTenant();
  const [overview, setOverview] = useState<TenantOverview>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      if (document.visibilityState === "visible")
        try {
          const res = await api.getTenantOverview({ window });
          if (live) {
            setOverview(res.overview);
            setError(undefined);
          }
        } catch (err) {
          if (live) setError(problemOf(err).message);
        }
      if (live) timer = setTimeout(read, everyMs);
    };
    void read();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [tenant, window, everyMs]);
  return { overview, error };
}

// Runs per bucket stacked by status, events as a line over them.
function ActivityChart({ buckets }: { buckets: OverviewBucket[] }) {
  const W = 720;
  const H = 180;
  const max = Math.max(1, ...buckets.map((b) => Math.max(total(b.runs), b.events)));
  const w = W / buckets.length;
  const y = (n: number) => H - (n / max) * H;
  const line = buckets.map((b, i) => `${i ? "L" : "M"}${(i + 0.5) * w},${y(b.events)}`).join(" ");
  const label = (b: OverviewBucket) =>
    `${new Date(millis(b.startTime)).toLocaleString()}: ${b.events} events, ${total(b.runs)} runs` +
    STACK.filter(([k]) => b.runs?.[k]).map(([k, name]) => `, ${b.runs![k]} ${name}`).join("");
  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${W} ${H}`} preserveAspectRatio="none" role="img" aria-label="Runs by status and events received per interval">
        {buckets.map((b, i) => {
          let base = H;
          return (
            <g key={i}>
              <title>{label(b)}</title>
              <rect x={i * w} y={0} width={w} height={H} className="hit" />
              {STACK.map(([k, name]) => {
                const n = b.runs?.[k] ?? 0;
                if (!n) return null;
                const h = (n / max) * H;
                base -= h;
                return <rect key={k} x={i * w + w * 0.1} y={base} width={w * 0.8} height={h} className={`bar-${name.replace(" ", "-")}`} />;
              })}
            </g>
          );
        })}
        <path d={line} className="events-line" fill="none" vectorEffect="non-scaling-stroke" />
      </svg>
      <figcaption>
        <span className="key events-key">events</span>
        {STACK.map(([, name]) => (
          <span key={name} className={`key bar-${name.replace(" ", "-")}-key`}>
            {name}
          </span>
        ))}
        <span className="muted"> · most per interval: {max}</span>
      </figcaption>
    </figure>
  );
}

// A horizontal bar per row, scaled to the largest.
function Bars({ rows }: { rows: { key: string; label: ReactNode; n: number; note?: string }[] }) {
  const max = Math.max(1, ...rows.map((r) => r.n));
  if (!rows.length) return <p className="muted">None in this window.</p>;
  return (
    <table className="bars">
      <tbody>
        {rows.map((r) => (
          <tr key={r.key}>
            <th scope="row">{r.label}</th>
            <td className="bar-cell">
              <svg viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">
                <rect width={(r.n / max) * 100} height={10} className="bar-failed" />
              </svg>
            </td>
            <td className="num">
              {r.n}
              {r.note ? <span className="muted"> {r.note}</span> : null}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function OverviewPage() {
  const { base } = useTenant();
  const { loc, navigate } = useRouter();
  const chosen = WINDOWS.find(([key]) => key === loc.search.get("window")) ?? WINDOWS[0]!;
  const { overview: o, error } = useOverview(chosen[1], chosen[3]);
  const tiles: [string, string][] = o
    ? [
        ["Events received", String(o.events)],
        ["Runs", String(total(o.runs))],
        ["Failure rate", o.endedRuns ? `${(o.failureRate * 100).toFixed(1)} %` : "—"],
        ["Duration p50 / p95", o.endedRuns ? `${duration(o.durationP50)} / ${duration(o.durationP95)}` : "—"],
        ["Queued now", String(o.queuedRuns)],
        ["Oldest queued", o.oldestQueuedAge ? duration(o.oldestQueuedAge) : "—"],
      ]
    : [];
  return (
    <>
      <Heading>Overview</Heading>
      <div className="segmented" role="group" aria-label="Window">
        {WINDOWS.map(([key, , label]) => (
          <button key={key} type="button" aria-pressed={key === chosen[0]} onClick={() => navigate(`${base}/overview?window=${key}`, true)}>
            {label}
          </button>
        ))}
      </div>
      {error && <ErrorBanner message={error} />}
      {!o ? (
        <p role="status">Loading…</p>
      ) : (
        <>
          <dl className="tiles">
            {tiles.map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
          <ActivityChart buckets={o.buckets} />
          <div className="columns">
            <section>
              <h2>Agents failing most</h2>
              <Bars
                rows={o.failingAgents.map((a) => ({
                  key: a.agentId,
                  label: <Link to={`${base}/agents/${a.agentId}`}>{a.agentName || a.agentId}</Link>,
                  n: a.failures,
                  note: `of ${a.runs}`,
                }))}
              />
            </section>
            <section>
              <h2>Triggers failing most</h2>
              <Bars
                rows={o.failingTriggers.map((t) => ({
                  key: t.triggerId,
                  label: <Link to={`${base}/triggers/${t.triggerId}`}>{t.agentName ? `→ ${t.agentName}` : t.triggerId}</Link>,
                  n: t.failures,
                  note: `of ${t.runs}`,
                }))}
              />
            </section>
            <section>
              <h2>Failures by kind</h2>
              <Bars rows={o.failureKinds.map((k) => ({ key: k.kind, label: <code>{k.kind}</code>, n: k.count }))} />
            </section>
          </div>
        </>
      )}
    </>
  );
}
