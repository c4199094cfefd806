// Form pieces: a labelled control with the API's own message beside it.
import { useId, useState, type ReactNode } from "react";
import { problemOf, type ProblemMessage } from "../api.js";

// Where a problem shows: at the rendered field whose path is the longest
// prefix of the problem's field path (`agent.steps[0].tool` → that input,
// `agent.steps` → the steps fieldset); anything else above the form.
export function placeProblem(problem: ProblemMessage | undefined, fields: string[]) {
  const target = problem?.field
    ? fields
        .filter((f) => problem.field === f || problem.field!.startsWith(f + ".") || problem.field!.startsWith(f + "["))
        .sort((a, b) => b.length - a.length)[0]
    : undefined;
  return {
    at: (field: string) => (problem && target === field ? problem.message : undefined),
    general: problem && target === undefined ? (problem.field ? `${problem.field}: ${problem.message}` : problem.message) : undefined,
  };
}

export function Field(props: {
  label: string;
  error?: string;
  hint?: ReactNode;
  children: (control: { id: string; "aria-invalid"?: true; "aria-describedby"?: string }) => ReactNode;
}) {
  const id = useId();
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const describedBy = [props.error ? errorId : "", props.hint ? hintId : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div className={props.error ? "field invalid" : "field"}>
      <label htmlFor={id}>{props.label}</label>
      {props.children({ id, ...(props.error ? { "aria-invalid": true } : {}), ...(describedBy ? { "aria-describedby": describedBy } : {}) })}
      {props.hint && (
        <small id={hintId} className="hint">
          {props.hint}
        </small>
      )}
      {props.error && (
        <p id={errorId} className="field-error" role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

// A form whose submit runs `submit` as `action`; the browser's own validation
// is off so that the API's messages show instead.
export function ActionForm(props: { action: ReturnType<typeof useAction>; submit: () => Promise<unknown>; children: ReactNode }) {
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void props.action.run(props.submit);
      }}
    >
      {props.children}
    </form>
  );
}

export function ErrorBanner({ message }: { message?: string }) {
  if (!message) return null;
  return (
    <p className="banner error" role="alert">
      {message}
    </p>
  );
}

// Runs an API call from a button or form: busy state and the problem it
// answered with.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<ProblemMessage>();
  const run = async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setProblem(undefined);
    try {
      return await action();
    } catch (err) {
      setProblem(problemOf(err));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, problem, setProblem, run };
}
