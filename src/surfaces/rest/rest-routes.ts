// The REST mirror's routes, derived from the service descriptor by the naming
// convention written on PlatformService in the proto: no hand-kept list.
import type { DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";

export type HttpVerb = "GET" | "POST" | "PATCH" | "DELETE";

export interface RestRoute {
  method: DescMethod;
  verb: HttpVerb;
  path: string;
  // Request field set from the `:id` path segment (`id`, or `<resource>.id`).
  idField?: string[];
  successStatus: 200 | 201;
  // The resource the route acts on (the element type of its List method);
  // none for a method on the selected tenant as a whole.
  resource?: DescMessage;
}

const kebab = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

interface Resource {
  singular: string;
  plural: string;
  message: DescMessage;
}

// Resources are what `List<Plural>` methods return: the message type of the
// response's repeated field.
function resourcesOf(service: DescService): Resource[] {
  const resources: Resource[] = [];
  for (const m of service.methods) {
    if (!m.name.startsWith("List")) continue;
    const list = m.output.fields.find((f): f is DescField & { fieldKind: "list"; listKind: "message" } =>
      f.fieldKind === "list" && f.listKind === "message");
    if (list) resources.push({ singular: list.message.name, plural: m.name.slice(4), message: list.message });
  }
  // Longest first, so "WebhookSource" wins over a shorter prefix.
  return resources.sort((a, b) => b.singular.length - a.singular.length);
}

const STANDARD: Record<string, { verb: HttpVerb; withId: boolean; status?: 201 }> = {
  Get: { verb: "GET", withId: true },
  Create: { verb: "POST", withId: false, status: 201 },
  Add: { verb: "POST", withId: false, status: 201 },
  Update: { verb: "PATCH", withId: true },
  Delete: { verb: "DELETE", withId: true },
  Remove: { verb: "DELETE", withId: true },
};

export function deriveRestRoutes(service: DescService, prefix = "/api/v1"): RestRoute[] {
  const resources = resourcesOf(service);
  const routes: RestRoute[] = [];
  // Streams have no REST form; their unary siblings (Get, List) do.
  for (const method of service.methods.filter((m) => m.methodKind === "unary")) {
    const listed = resources.find((r) => method.name === `List${r.plural}`);
    if (listed) {
      routes.push({ method, verb: "GET", path: `${prefix}/${kebab(listed.plural)}`, successStatus: 200, resource: listed.message });
      continue;
    }
    // A request naming no record (no `id`, no resource) acts on the selected
    // tenant as a whole: a read is GET of what it gets, anything else POST of
    // the method's name.
    const namesRecord = method.input.fields.some((f) => f.name === "id" || resources.some((r) => r.message === f.message));
    if (!namesRecord) {
      const read = method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS && method.name.startsWith("Get");
      const name = read ? method.name.slice(3) : method.name;
      routes.push({ method, verb: read ? "GET" : "POST", path: `${prefix}/${kebab(name)}`, successStatus: 200 });
      continue;
    }
    const verbEnd = method.name.slice(1).search(/[A-Z]/) + 1;
    const verb = method.name.slice(0, verbEnd);
    const rest = method.name.slice(verbEnd);
    const resource = resources.find((r) => rest.startsWith(r.singular));
    if (!resource) throw new Error(`${method.name} names no listed resource; see the convention in platform_service.proto`);
    const base = `${prefix}/${kebab(resource.plural)}`;
    const suffix = rest.slice(resource.singular.length);
    const resourceField = method.input.fields.find((f) => f.message === resource.message);
    const idField = method.input.fields.some((f) => f.name === "id") ? ["id"] : resourceField ? [resourceField.name, "id"] : undefined;
    const standard = suffix === "" ? STANDARD[verb] : undefined;
    if (standard) {
      routes.push({
        method,
        verb: standard.verb,
        path: standard.withId ? `${base}/:id` : base,
        idField: standard.withId ? idField : undefined,
        successStatus: standard.status ?? 200,
        resource: resource.message,
      });
    } else {
      routes.push({ method, verb: "POST", path: `${base}/:id/${kebab(verb + suffix)}`, idField, successStatus: 200, resource: resource.message });
    }
  }
  return routes;
}
