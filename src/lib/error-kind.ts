// The stable kind a run or step error names (`skill_timeout`,
// `expression_timeout`, `model_unauthorized`, …): errors are carried as text
// that starts with the kind, or names it after the step it failed in
// ("steps[0] (lookup): skill_timeout: …"). Undefined when none is named.
const KIND = /(?:^|: )([a-z]+(?:_[a-z]+)+)(?::| \()/;

export function errorKind(message: string): string | undefined {
  return KIND.exec(message)?.[1];
}
