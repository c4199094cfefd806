// `Object.prototype.__proto__` is a legacy accessor: `obj["__proto__"] = v` on
// an ordinary object replaces its prototype instead of storing a key. Code
// that copies JSON objects key by key therefore drops a `"__proto__"` key a
// tenant sent — protobuf-es does so in every google.protobuf.Struct and Value
// conversion (JSON, binary, reflection), so an event payload lost the key on
// every read — and any such copy of untrusted keys is a prototype-pollution
// risk. Removing the accessor, as `node --disable-proto=delete` does (and Deno
// by default), makes `"__proto__"` an ordinary key for every library in the
// process; `Object.getPrototypeOf`/`setPrototypeOf` and the `{ __proto__: x }`
// literal syntax are unaffected.
export function removeProtoAccessor(): void {
  delete (Object.prototype as { __proto__?: unknown }).__proto__;
}
