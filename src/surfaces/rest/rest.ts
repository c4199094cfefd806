import { ScalarType, create, fromJson, type DescEnum, type DescField, type DescMethod, type JsonObject } from "@bufbuild/protobuf";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { invalidArgument } from "../../service/errors.js";
import type { Platform } from "../../service/platform.js";
import { callerFromHeaders, nodeHeaderGetter } from "../http/caller.js";
import { bodyRefusal, httpError } from "../http/errors.js";
import { openApiDocument } from "./openapi.js";
import { restJson } from "./rest-json.js";
import { deriveRestRoutes, type RestRoute } from "./rest-routes.js";

const lowerCamel = (path: string) => path.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

// Query strings carry only strings; proto JSON wants real booleans, and
// field masks in lowerCamelCase (REST users write `update_mask=display_name`).
// Enums take their short name in any case (`status=failed`) as well as the
// proto name. Numbers and timestamps parse from strings as they are.
function queryValue(field: DescField, raw: string): unknown {
  if (field.fieldKind === "scalar" && field.scalar === ScalarType.BOOL) return raw === "true" ? true : raw === "false" ? false : raw;
  if (field.fieldKind === "enum") return enumName(field, field.enum, raw);
  if (field.fieldKind === "message" && field.message.typeName === "google.protobuf.FieldMask")
    return raw.split(",").map(lowerCamel).join(",");
  return raw;
}

function enumName(field: DescField, desc: DescEnum, raw: string): string {
  const wanted = raw.toLowerCase();
  // `localName` is the name without the enum's shared prefix (`FAILED`).
  const value = desc.values.find((v) => v.name.toLowerCase() === wanted || v.localName.toLowerCase() === wanted);
  if (value) return value.name;
  const names = desc.values.filter((v) => v.number !== 0).map((v) => v.localName.toLowerCase());
  throw invalidArgument(field.name, `"${raw}" is not one of ${names.join(", ")}`);
}

function requestJson(route: RestRoute, req: FastifyRequest): JsonObject {
  const input = route.method.input;
  const body = req.body ?? {};
  if (typeof body !== "object" || Array.isArray(body)) throw invalidArgument("body", "must be a JSON object");
  const json: JsonObject = { ...(body as JsonObject) };
  for (const [key, raw] of Object.entries(req.query as Record<string, string>)) {
    const field = input.fields.find((f) => f.name === key || f.jsonName === key);
    if (!field) throw invalidArgument(key, `unknown query parameter for ${route.method.name}`);
    json[field.jsonName] = queryValue(field, raw) as never; // a JSON scalar
  }
  if (route.idField) {
    const id = (req.params as { id: string }).id;
    const [first, second] = route.idField;
    if (second === undefined) json[first!] = id;
    else {
      const holder = input.fields.find((f) => f.name === first)!;
      const nested = (json[holder.jsonName] ?? json[first!] ?? {}) as JsonObject;
      delete json[first!];
      json[holder.jsonName] = { ...nested, [second]: id };
    }
  }
  return json;
}

function parseRequest(method: DescMethod, json: JsonObject) {
  try {
    return fromJson(method.input, json);
  } catch (err) {
    throw invalidArgument("body", (err as Error).message);
  }
}

// The REST mirror: each derived route parses the request into the method's
// input message and calls the same platform implementation as Connect.
export async function restSurface(app: FastifyInstance, opts: { platform: Platform; version: string }): Promise<void> {
  const { platform } = opts;
  // `Content-Type: application/json` with no body (curl -X DELETE -H … as
  // many clients send it) is a request without a body, not bad JSON.
  const json = app.getDefaultJsonParser("error", "error");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) =>
    body === "" ? done(null, undefined) : json(req, body as string, done),
  );
  app.setErrorHandler((err, _req, reply) => {
    // Fastify's own refusals (bad JSON, wrong content type, too large) keep
    // their status and words but use the Connect error shape.
    const refused = bodyRefusal(err);
    if (refused) return reply.status(refused.status).send({ code: codeToString(refused.code), message: refused.message });
    return answer(reply, err);
  });
  const answer = (reply: FastifyReply, err: unknown) => {
    const { status, body, headers, unexpected } = httpError(err);
    if (unexpected) app.log.error({ err }, "unhandled REST error");
    return reply.status(status).headers(headers).send(body);
  };
  // The routes' own reference, served without a token: it holds no tenant
  // data. Derived on the first request, not at start (60 ms of CPU for every
  // server, most of which never serve it).
  let openApi: string | undefined;
  app.get("/api/v1/openapi.json", (_req, reply) =>
    reply.type("application/json; charset=utf-8").send((openApi ??= JSON.stringify(openApiDocument(platform.service, opts.version)))),
  );
  for (const route of deriveRestRoutes(platform.service)) {
    app.route({
      method: route.verb,
      url: route.path,
      handler: async (req, reply) => {
        try {
          const message = parseRequest(route.method, requestJson(route, req));
          const result = await platform.invoke(route.method, message, callerFromHeaders(nodeHeaderGetter(req.headers), undefined, req), "api");
          const output = restJson(route.method.output, create(route.method.output, result as never)); // `result` is the handler's init shape for this output
          return reply.status(route.successStatus).send(output);
        } catch (err) {
          return answer(reply, err);
        }
      },
    });
  }
}
