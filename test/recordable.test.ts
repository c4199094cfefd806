// What a run records of a value (runtime/recordable.ts): escaped losslessly,
// capped with a marker, never a throw.
import { recordable, recordableError } from "../src/runtime/recordable.js";

// The inverse of the escape, as a reader of a run would write it.
const unescape = (text: string) => text.replace(/\\(\\|u([0-9a-f]{4}))/g, (_, c: string, hex?: string) => (hex ? String.fromCharCode(parseInt(hex, 16)) : c));

describe("recordable", () => {
  it("leaves a value without NUL or unpaired surrogates as it is, surrogate pairs and escaped-looking text included", () => {
    const value = { a: "plain", emoji: "\u{1F600}", text: "\\u0000 is how JSON writes NUL", n: [1, null, true] };
    const recorded = recordable(value, 1024);
    expect(recorded.value).toEqual(value);
    expect(recorded.bytes).toBe(Buffer.byteLength(JSON.stringify(value)));
    expect(recorded.marker).toBe(false);
  });

  it("escapes strings and keys holding them, losslessly", () => {
    const original = "a\u0000b\ud800c\\u0000\udc00";
    const { value } = recordable({ s: original, list: ["ok", "\u0000"], ["k\u0000"]: 1 }, 1024);
    expect(value).toEqual({ s: { $escaped: "a\\u0000b\\ud800c\\\\u0000\\udc00" }, list: ["ok", { $escaped: "\\u0000" }], "$escaped:k\\u0000": 1 });
    expect(unescape(((value as { s: { $escaped: string } }).s).$escaped)).toBe(original);
    // No escape PostgreSQL's jsonb refuses: only escaped backslashes before "u0000".
    expect(JSON.stringify(value)).not.toMatch(/(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f])/i);
  });

  it("records a value past its cap as a truncation marker whose preview ends on a whole character", () => {
    // `{"text":"` and 502 x: the emoji's two halves are characters 512 and 513 of the JSON.
    const value = { text: `${"x".repeat(502)}\u{1F600}${"y".repeat(2000)}` };
    const { value: marker, bytes, marker: isMarker } = recordable(value, 1000);
    expect(isMarker).toBe(true);
    const json = JSON.stringify(value);
    expect(marker).toEqual({ $truncated: { bytes: Buffer.byteLength(json), limit: 1000, preview: json.slice(0, 511) } });
    expect(bytes).toBe(Buffer.byteLength(JSON.stringify(marker)));
  });

  it("records a value JSON cannot write as unrecordable, without throwing", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(recordable(deep, 1024).value).toEqual({ $unrecordable: expect.stringContaining("cannot be written as JSON") });
    expect(recordable(deep, 1024).marker).toBe(true);
    expect(recordable(undefined, 1024)).toEqual({ value: undefined, bytes: 0, marker: false });
  });

  it("scrubs and cuts an error text", () => {
    expect(recordableError("bad\u0000\ud800 text", 100)).toBe("bad\ufffd\ufffd text");
    expect(recordableError("x".repeat(150), 100)).toBe(`${"x".repeat(100)}… (50 more characters)`);
  });
});
