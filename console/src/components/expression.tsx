// The JSONata fields (a trigger's filter, a source's mapping, a step's
// arguments): a textarea over its own highlighted copy, an error marked where
// it is, and a "Try it" panel that has the server evaluate the expression
// (TestExpression: the same sandbox, budget and rules as at run time) on a
// recent event of the tenant or on pasted JSON.
import { useRef, useState, type ReactNode } from "react";
import { ExpressionKind, type ExpressionError } from "../../../gen/platform/v1/expression_pb.js";
import type { Event } from "../../../gen/platform/v1/event_pb.js";
import { ago, jsonValue, pretty, valueJson } from "../format.js";
import { useLoad } from "../pages/common.js";
import { useTenant } from "../tenant.js";
import { Json } from "./bits.js";
import { lineColumn, tokenize } from "./jsonata-tokens.js";
import { useAction } from "./form.js";

export interface Marked {
  position: number;
  message: string;
}

// "invalid JSONata at 12: …", as the service words a refused field.
export function positionIn(message: string | undefined): Marked | undefined {
  const m = message && /invalid JSONata at (\d+): (.*)/s.exec(message);
  return m ? { position: Number(m[1]), message: m[2]! } : undefined;
}

function Highlighted({ src, mark }: { src: string; mark?: number }) {
  const { tokens } = tokenize(src);
  const out: ReactNode[] = [];
  for (const t of tokens) {
    if (mark !== undefined && mark >= t.start && mark < t.start + t.text.length) {
      const at = mark - t.start;
      out.push(
        <span key={t.start} className={`tok-${t.kind}`}>
          {t.text.slice(0, at)}
          <mark className="tok-error">{t.text[at]}</mark>
          {t.text.slice(at + 1)}
        </span>,
      );
    } else out.push(<span key={t.start} className={`tok-${t.kind}`}>{t.text}</span>);
  }
  if (mark !== undefined && mark >= src.length) out.push(<mark key="end" className="tok-error"> </mark>);
  // A final newline would otherwise collapse and the copy lose a line.
  return <>{out}{"\n"}</>;
}

export function ExpressionEditor(props: {
  control: { id: string; "aria-invalid"?: true; "aria-describedby"?: string };
  value: string;
  onChange: (value: string) => void;
  rows?: number;
  // A problem the server reported (at save or on trial), at its position.
  marked?: Marked;
}) {
  const pre = useRef<HTMLPreElement>(null);
  const local = tokenize(props.value).problem;
  // The server's word first; the tokenizer's while nothing was tried since the edit.
  const problem = props.marked ?? local;
  const mark = problem ? Math.max(0, Math.min(props.value.length, props.marked ? problem.position - 1 : problem.position)) : undefined;
  const where = problem && lineColumn(props.value, mark ?? 0);
  const problemId = `${props.control.id}-syntax`;
  return (
    <>
      <div className="expr">
        <pre ref={pre} className="expr-highlight" aria-hidden="true">
          <Highlighted src={props.value} mark={mark} />
        </pre>
        <textarea
          {...props.control}
          aria-describedby={[props.control["aria-describedby"], problem ? problemId : ""].filter(Boolean).join(" ") || undefined}
          className="expr-input"
          rows={props.rows ?? 2}
          spellCheck={false}
          autoCapitalize="off"
          autoCorrect="off"
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
          onScroll={(e) => {
            if (pre.current) {
              pre.current.scrollTop = e.currentTarget.scrollTop;
              pre.current.scrollLeft = e.currentTarget.scrollLeft;
            }
          }}
        />
      </div>
      {problem && where && (
        <p id={problemId} className="expr-problem" data-position={mark}>
          Line {where.line}, column {where.column}: {problem.message}
        </p>
      )}
    </>
  );
}

const KIND_WORDS: Record<Exclude<ExpressionKind, ExpressionKind.UNSPECIFIED>, { input: string; result: string }> = {
  [ExpressionKind.FILTER]: { input: "Payload (JSON object)", result: "Matches" },
  [ExpressionKind.MAPPING]: { input: "Delivery body (JSON)", result: "Event" },
  [ExpressionKind.STEP_ARGUMENTS]: { input: "Run input (JSON)", result: "Arguments" },
};

// Tries `expression` as `kind` on one of the source's recent events (any
// source's when none is given) or on pasted JSON; reports a problem with a
// position back to the editor through `onMarked`.
export function TryIt(props: {
  kind: Exclude<ExpressionKind, ExpressionKind.UNSPECIFIED>;
  expression: string;
  sourceId?: string;
  onMarked: (m: Marked | undefined) => void;
}) {
  const { api, tenant } = useTenant();
  const events = useLoad(async () => (await api.listEvents({ sourceId: props.sourceId ?? "", pageSize: 20 })).events, [tenant, props.sourceId]);
  const [choice, setChoice] = useState<string>("");
  const [pasted, setPasted] = useState("{}");
  const [eventType, setEventType] = useState("");
  const [open, setOpen] = useState(false);
  const trial = useAction();
  const [answer, setAnswer] = useState<{ error?: ExpressionError; result?: unknown; matched: boolean; budgetMs: number }>();
  const recent: Event[] = events.value ?? [];
  const eventId = choice || (choice === "" && recent[0] ? recent[0].id : "");
  const usePaste = choice === "paste" || !recent.length;
  const words = KIND_WORDS[props.kind];

  const run = () =>
    trial.run(async () => {
      let input: { case: "eventId"; value: string } | { case: "document"; value: ReturnType<typeof jsonValue> };
      if (usePaste) {
        let doc: unknown;
        try {
          doc = JSON.parse(pasted);
        } catch (err) {
          throw new Error(`the pasted document is not JSON: ${(err as Error).message}`, { cause: err });
        }
        input = { case: "document", value: jsonValue(doc as never) };
      } else input = { case: "eventId", value: eventId };
      const res = await api.testExpression({ kind: props.kind, expression: props.expression, input, eventType });
      const budgetMs = res.budget ? Number(res.budget.seconds) * 1000 + res.budget.nanos / 1e6 : 0;
      setAnswer({ error: res.error, result: valueJson(res.result), matched: res.matched, budgetMs });
      props.onMarked(res.error?.position !== undefined ? { position: res.error.position, message: res.error.message } : undefined);
    });

  if (!open)
    return (
      <button type="button" className="try-open" onClick={() => setOpen(true)}>
        Try it
      </button>
    );
  return (
    <section className="try" aria-label="Try it">
      <div className="try-input">
        {recent.length > 0 && (
          <label>
            On{" "}
            <select value={choice} onChange={(e) => setChoice(e.target.value)} aria-label="Try it on">
              {recent.map((e, i) => (
                <option key={e.id} value={i === 0 ? "" : e.id}>
                  {e.eventType} · {ago(e.receiveTime)}
                </option>
              ))}
              <option value="paste">pasted JSON</option>
            </select>
          </label>
        )}
        {usePaste && (
          <>
            <label className="field">
              {words.input}
              <textarea rows={3} value={pasted} onChange={(e) => setPasted(e.target.value)} spellCheck={false} />
            </label>
            {props.kind !== ExpressionKind.STEP_ARGUMENTS && (
              <label className="field">
                Event type
                <input value={eventType} onChange={(e) => setEventType(e.target.value)} placeholder="order.created" />
              </label>
            )}
          </>
        )}
        <button type="button" disabled={trial.busy || !props.expression.trim()} onClick={() => void run()}>
          {trial.busy ? "Trying…" : "Run the expression"}
        </button>
      </div>
      {trial.problem && (
        <p className="try-error" role="alert">
          {trial.problem.message}
        </p>
      )}
      {answer && !trial.busy && (
        <div className="try-answer" role="status">
          {answer.error ? (
            <p className="try-error" data-kind={answer.error.kind}>
              <strong>{answer.error.kind}</strong>: {answer.error.message}
            </p>
          ) : props.kind === ExpressionKind.FILTER ? (
            <p data-matched={String(answer.matched)}>
              <strong>{answer.matched ? "Matches" : "Does not match"}</strong>: the filter gave <code>{pretty(answer.result as never)}</code>
            </p>
          ) : (
            <>
              <p>
                <strong>{words.result}</strong>
              </p>
              <Json value={answer.result as never} label={`${words.result} from the expression`} />
            </>
          )}
          <small className="muted">Evaluated by the server under the {answer.budgetMs} ms budget it has at run time.</small>
        </div>
      )}
    </section>
  );
}
