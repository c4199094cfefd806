import type { JsonValue } from "@bufbuild/protobuf";
import { useState, type ReactNode } from "react";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Liveness } from "../live.js";
import { ago, pretty, time } from "../format.js";

export function Status({ name }: { name: string }) {
  return <span className={`status status-${name.replace(/ /g, "-")}`}>{name}</span>;
}

const LIVENESS_TEXT: Record<Liveness, string> = {
  connecting: "connecting…",
  live: "live",
  polling: "refreshing every few seconds",
};

export function LiveIndicator({ liveness }: { liveness: Liveness }) {
  return (
    <span className={`liveness liveness-${liveness}`} role="status" data-liveness={liveness}>
      {LIVENESS_TEXT[liveness]}
    </span>
  );
}

export function Json({ value, label }: { value: JsonValue | undefined; label?: string }) {
  return (
    <pre className="json" tabIndex={0} aria-label={label}>
      {pretty(value)}
    </pre>
  );
}

// A definition list of label/value pairs.
export function Facts({ rows }: { rows: [string, ReactNode][] }) {
  return (
    <dl className="facts">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

// An id in a table or beside a name: shown short, copied whole.
export function CopyId({ id }: { id: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <span className="copy-id">
      <code title={id}>{id}</code>
      <button
        type="button"
        className="icon"
        aria-label={`Copy ${id}`}
        onClick={() =>
          void navigator.clipboard?.writeText(id).then(() => {
            setCopied(true);
            setTimeout(() => setCopied(false), 1500);
          })
        }
      >
        {copied ? "copied" : "copy"}
      </button>
    </span>
  );
}

// A relative time whose exact value shows on hover and to screen readers.
export function When({ ts }: { ts: Timestamp | undefined }) {
  return ts ? (
    <time dateTime={timestampDate(ts).toISOString()} title={time(ts)}>
      {ago(ts)}
    </time>
  ) : (
    <>—</>
  );
}
