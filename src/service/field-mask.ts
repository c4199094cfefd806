import { clone, isFieldSet, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { invalidArgument } from "./errors.js";

// AIP-134 update: copies the masked top-level fields of `patch` onto a copy
// of `current`. An empty mask means every updatable field that `patch` sets.
export function applyUpdateMask<Desc extends DescMessage>(
  schema: Desc,
  current: MessageShape<Desc>,
  patch: MessageShape<Desc>,
  mask: FieldMask | undefined,
  updatable: readonly string[],
): { merged: MessageShape<Desc>; paths: string[] } {
  const fields = new Map(schema.fields.map((f) => [f.name, f]));
  let paths = mask?.paths ?? [];
  if (paths.length === 0) paths = updatable.filter((name) => isFieldSet(patch, fields.get(name)!));
  if (paths.length === 0) throw invalidArgument("update_mask", `names no field to update; updatable: ${updatable.join(", ")}`);
  const merged = clone(schema, current);
  const target = merged as Record<string, unknown>;
  const source = patch as Record<string, unknown>;
  for (const path of paths) {
    if (!updatable.includes(path))
      throw invalidArgument("update_mask", `"${path}" is not updatable; updatable: ${updatable.join(", ")}`);
    const field = fields.get(path)!;
    // A oneof member lives under its oneof's property.
    const key = field.oneof ? field.oneof.localName : field.localName;
    target[key] = source[key];
  }
  return { merged, paths };
}
