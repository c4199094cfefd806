import type { JsonValue } from "@bufbuild/protobuf";
import type { ReactNode } from "react";
import type { Liveness } from "../live.js";
import { pretty } from "../format.js";

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
