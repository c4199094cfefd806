import { useEffect, useState, type ReactNode } from "react";
import { problemOf } from "../api.js";

// A one-shot read (Get*/List*) with its error; `reload` reads again.
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [value, setValue] = useState<T>();
  const [error, setError] = useState<string>();
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (v) => live && (setValue(v), setError(undefined)),
      (err: unknown) => live && setError(problemOf(err).message),
    );
    return () => {
      live = false;
    };
  }, [...deps, version]);
  return { value, setValue, error, reload: () => setVersion((v) => v + 1) };
}

export function Heading({ children }: { children: ReactNode }) {
  return <h1 tabIndex={-1}>{children}</h1>;
}
