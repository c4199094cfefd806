// A small JSONata tokenizer for the editor's colors and its live checks:
// strings, numbers, comments, `$variables`, backquoted names, keywords,
// operators, brackets. It does not parse: the server's compile (TestExpression,
// and the save) is the judge; this catches what a typist leaves open
// (a string, a comment, a bracket) at the place it starts.

export type TokenKind = "string" | "number" | "comment" | "variable" | "name" | "keyword" | "operator" | "bracket" | "space" | "text";

export interface Token {
  kind: TokenKind;
  start: number;
  text: string;
}

export interface TokenProblem {
  position: number;
  message: string;
}

const KEYWORDS = new Set(["and", "or", "in", "true", "false", "null", "function"]);
const OPERATORS = [":=", "!=", ">=", "<=", "~>", "..", "?:", "??", "**", "+", "-", "*", "/", "%", "=", "<", ">", "&", "?", ":", ".", ",", ";", "^", "#", "@", "|", "!"];
const OPEN: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
const CLOSE = new Set([")", "]", "}"]);

export function tokenize(src: string): { tokens: Token[]; problem?: TokenProblem } {
  const tokens: Token[] = [];
  const stack: { ch: string; at: number }[] = [];
  let problem: TokenProblem | undefined;
  let i = 0;
  const push = (kind: TokenKind, start: number) => tokens.push({ kind, start, text: src.slice(start, i) });
  while (i < src.length) {
    const start = i;
    const c = src[i]!;
    if (/\s/.test(c)) {
      while (i < src.length && /\s/.test(src[i]!)) i++;
      push("space", start);
    } else if (c === "/" && src[i + 1] === "*") {
      const end = src.indexOf("*/", i + 2);
      i = end < 0 ? src.length : end + 2;
      if (end < 0) problem ??= { position: start, message: "comment not closed (*/)" };
      push("comment", start);
    } else if (c === '"' || c === "'" || c === "`") {
      i++;
      while (i < src.length && src[i] !== c) i += src[i] === "\\" && c !== "`" ? 2 : 1;
      if (i >= src.length) problem ??= { position: start, message: c === "`" ? "backquoted name not closed" : "string not closed" };
      i = Math.min(i + 1, src.length);
      push(c === "`" ? "name" : "string", start);
    } else if (/[0-9]/.test(c)) {
      while (i < src.length && /[0-9.eE]/.test(src[i]!) && !(src[i] === "." && src[i + 1] === ".")) i++;
      push("number", start);
    } else if (c === "$") {
      i++;
      while (i < src.length && /[\w$]/.test(src[i]!)) i++;
      push("variable", start);
    } else if (/[A-Za-z_]/.test(c)) {
      while (i < src.length && /\w/.test(src[i]!)) i++;
      push(KEYWORDS.has(src.slice(start, i)) ? "keyword" : "name", start);
    } else if (OPEN[c] || CLOSE.has(c)) {
      i++;
      if (OPEN[c]) stack.push({ ch: c, at: start });
      else {
        const open = stack.pop();
        if (!open || OPEN[open.ch] !== c) problem ??= { position: start, message: open ? `"${c}" closes "${open.ch}" opened at ${open.at + 1}` : `"${c}" closes nothing` };
      }
      push("bracket", start);
    } else {
      const op = OPERATORS.find((o) => src.startsWith(o, i));
      i += op ? op.length : 1;
      push(op ? "operator" : "text", start);
    }
  }
  const open = stack.pop();
  if (open) problem ??= { position: open.at, message: `"${open.ch}" is not closed` };
  return { tokens, problem };
}

// Line and column (1-based) of a character offset.
export function lineColumn(src: string, position: number): { line: number; column: number } {
  const before = src.slice(0, position).split("\n");
  return { line: before.length, column: before.at(-1)!.length + 1 };
}
