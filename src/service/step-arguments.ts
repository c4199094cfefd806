import { Ajv2020, type ErrorObject } from "ajv/dist/2020.js";
import jsonata from "jsonata";
import { RE2JS } from "re2js";
import type { Outcome } from "../integrations/expressions/sandbox.js";
import { invalidArgument } from "./errors.js";

// Save-time check of a plan step's arguments against the tool's stored input
// schema. It refuses only what no event can make work; anything that depends
// on the event, the input or earlier steps is left to the run:
//  - arguments that are a constant non-object (`"hi"`, `[1]`), or an array
//    constructor: the runtime needs an object;
//  - a top-level object constructor whose keys are all literal and lacks a key
//    the schema's `required` lists (an empty expression is `{}`);
//  - a literal key whose value is a constant (literals, and operators, array
//    and object constructors over constants) that fails the key's schema
//    (`type`, `enum`, `minimum`, nested `required`, …), taking the value from
//    the expression evaluated on a sample context in the expression sandbox.
// Not checked: keys the schema does not declare (servers commonly ignore
// them), non-literal keys, values that read the context or call functions.

type Node = Record<string, unknown> & { type: string; value?: unknown };

// Node fields that can appear in a constant subtree; any other (predicate,
// stages, group, focus, …) makes the node depend on evaluation.
const PLAIN_KEYS = new Set(["type", "value", "position", "lhs", "rhs", "expression", "expressions", "condition", "then", "else"]);
const OPERATORS = new Set(["+", "-", "*", "/", "%", "&", "=", "!=", "<", "<=", ">", ">=", "and", "or", "in"]);

const plain = (node: unknown): node is Node =>
  !!node && typeof node === "object" && typeof (node as Node).type === "string" && Object.keys(node).every((k) => PLAIN_KEYS.has(k));

// True when the subtree reads nothing from the context and calls nothing.
function constant(node: unknown): boolean {
  if (!plain(node)) return false;
  switch (node.type) {
    case "string":
    case "number":
    case "value":
      return true;
    case "block":
      return (node.expressions as unknown[]).every(constant);
    case "condition":
      return constant(node.condition) && constant(node.then) && (node.else === undefined || constant(node.else));
    case "binary":
      return OPERATORS.has(node.value as string) && constant(node.lhs) && constant(node.rhs);
    case "unary":
      if (node.value === "-") return constant(node.expression);
      if (node.value === "[") return (node.expressions as unknown[]).every(constant);
      if (node.value === "{") return (node.lhs as [unknown, unknown][]).every(([k, v]) => constant(k) && constant(v));
      return false;
    default:
      return false;
  }
}

const kindOf = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

// Tool schemas come from the tenant's MCP server: patterns run on RE2 (linear
// time), unknown formats and keywords are ignored rather than refused.
const re2 = Object.assign((pattern: string, flags: string) => {
  const re = RE2JS.compile(pattern, flags.includes("i") ? RE2JS.CASE_INSENSITIVE : 0);
  return { test: (s: string) => re.matcher(s).find() };
}, { code: "re2" });
const ajv = new Ajv2020({ strict: false, validateFormats: false, logger: false, allErrors: false, code: { regExp: re2 } });
// Larger schemas are not checked: compiling one costs in proportion.
const MAX_SCHEMA_CHARS = 64 * 1024;

// What is wrong with `value` under a property's schema, if anything; a
// schema that does not compile is not checked. Compiling, validating and
// clearing happen in one synchronous turn, so the shared instance never
// keeps a tenant's schema (or its `$id`s) after it.
function violation(schema: Record<string, unknown>, root: Record<string, unknown>, value: unknown): string | undefined {
  // `$defs`/`definitions` of the root travel with a property's schema, so
  // its local `$ref`s resolve; a `$schema` naming another draft is dropped.
  const rest: Record<string, unknown> = {
    ...(root.$defs !== undefined && { $defs: root.$defs }),
    ...(root.definitions !== undefined && { definitions: root.definitions }),
    ...schema,
  };
  delete rest.$schema;
  delete rest.$id;
  try {
    const validate = ajv.compile(rest);
    return validate(value) ? undefined : describe(validate.errors);
  } catch {
    return undefined;
  } finally {
    ajv.removeSchema();
  }
}

const describe = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => `${e.instancePath ? `${e.instancePath} ` : ""}${e.message ?? "is invalid"}`).join("; ");

export interface StepArgumentsCheck {
  field: string;
  tool: string;
  expression: string;
  inputSchema: Record<string, unknown>;
  // Evaluates the expression on a sample context (the expression sandbox).
  evaluate(): Promise<Outcome>;
}

export async function checkStepArguments({ field, tool, expression, inputSchema, evaluate }: StepArgumentsCheck): Promise<void> {
  if (JSON.stringify(inputSchema).length > MAX_SCHEMA_CHARS) return;
  const ast = expression.trim() ? (jsonata(expression).ast() as unknown as Node) : ({ type: "unary", value: "{", lhs: [] } as Node);
  const isObject = plain(ast) && ast.type === "unary" && ast.value === "{";
  if (plain(ast) && ast.type === "unary" && ast.value === "[")
    throw invalidArgument(field, `tool "${tool}" takes an object; an array constructor always evaluates to an array`);
  const isConstant = constant(ast);
  const pairs = isObject ? (ast.lhs as [Node, Node][]) : [];
  // Tenant code runs only when a value it gives can be judged.
  const judged = pairs.filter(([k, v]) => plain(k) && k.type === "string" && constant(v));
  let sample: unknown;
  if (isConstant || judged.length) {
    const outcome = expression.trim() ? await evaluate() : { ok: true as const, value: {} };
    sample = outcome.ok ? outcome.value : undefined;
  }
  if (isConstant && sample !== undefined && kindOf(sample) !== "object")
    throw invalidArgument(field, `tool "${tool}" takes an object; these arguments always evaluate to ${kindOf(sample)} ${JSON.stringify(sample)}`);
  if (!isObject) return;

  const literalKeys = pairs.every(([k]) => plain(k) && k.type === "string");
  const keys = new Set(pairs.map(([k]) => k.value as string));
  const required = Array.isArray(inputSchema.required) ? (inputSchema.required as unknown[]).filter((r) => typeof r === "string") : [];
  const missing = literalKeys ? required.filter((r) => !keys.has(r)) : [];
  if (missing.length)
    throw invalidArgument(field, `tool "${tool}" requires ${missing.map((m) => `"${m}"`).join(", ")}, which these arguments never set`);

  const properties = (inputSchema.properties ?? {}) as Record<string, unknown>;
  const values = sample && kindOf(sample) === "object" ? (sample as Record<string, unknown>) : undefined;
  if (!values) return;
  for (const [k] of judged) {
    const key = k.value as string;
    const schema = Object.hasOwn(properties, key) ? properties[key] : undefined;
    if (!schema || typeof schema !== "object" || !Object.hasOwn(values, key)) continue;
    const wrong = violation(schema as Record<string, unknown>, inputSchema, values[key]);
    if (wrong) throw invalidArgument(field, `tool "${tool}": "${key}" ${wrong}, and these arguments always set it to ${JSON.stringify(values[key])}`);
  }
}
