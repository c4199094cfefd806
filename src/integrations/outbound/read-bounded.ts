// A body read no further than `limit` bytes: undefined (and the rest
// cancelled) when it is longer. Metadata documents, token answers and error
// bodies are a few kilobytes; anything near the limit is not one of them, and
// reading it whole would let a customer's server hold memory for nothing.
export async function readBounded(res: Response, limit: number): Promise<string | undefined> {
  if (Number(res.headers.get("content-length") ?? 0) > limit) {
    await res.body?.cancel().catch(() => {});
    return undefined;
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}
