import type postgres from "postgres";

type Parameter = postgres.ParameterOrJSON<never>;

// SQL text with named parameters (`:now`), numbered for the protocol in the
// order they first appear; `::type` casts are left alone. A statement's
// parameters then come from one object, whichever of its values it uses
// (PostgreSQL refuses a parameter the text does not use).
export interface Statement<P> {
  text: string;
  params(values: P): Parameter[];
}

export function statement<P extends object>(text: string): Statement<P> {
  const names: string[] = [];
  const numbered = text.replace(/(?<!:):([a-z]\w*)/gi, (_, name: string) => {
    const at = names.indexOf(name);
    return `$${at < 0 ? names.push(name) : at + 1}`;
  });
  return { text: numbered, params: (values) => names.map((name) => (values as Record<string, Parameter>)[name]!) };
}
