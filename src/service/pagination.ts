import { invalidArgument } from "./errors.js";

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;

export interface PageRequest {
  pageSize: number;
  pageToken: string;
}

// The token is opaque to callers: base64url of the last id of the page.
export function pageQuery(req: PageRequest): { limit: number; beforeId?: string } {
  if (req.pageSize < 0) throw invalidArgument("page_size", "must not be negative");
  const size = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(req.pageSize, MAX_PAGE_SIZE);
  let beforeId: string | undefined;
  if (req.pageToken) {
    beforeId = Buffer.from(req.pageToken, "base64url").toString("utf8");
    if (!/^[a-z]{3}_[0-9a-f-]{36}$/.test(beforeId)) throw invalidArgument("page_token", "is not a token this API issued");
  }
  // One extra row tells whether another page exists.
  return { limit: size + 1, beforeId };
}

export function page<T extends { id: string }>(rows: T[], limit: number): { items: T[]; nextPageToken: string } {
  const size = limit - 1;
  if (rows.length <= size) return { items: rows, nextPageToken: "" };
  const items = rows.slice(0, size);
  return { items, nextPageToken: Buffer.from(items[items.length - 1]!.id).toString("base64url") };
}
