import type { PendingQuery, Row, RowList } from "postgres";

// postgres.js holds a query while its connection reconnects, so while the
// database refuses connections a caller could wait until it is back instead
// of hearing "unavailable". A query still pending at the deadline is
// cancelled: not sent yet, it is dropped (it never runs later); running, the
// server is asked to stop it. Either way it rejects with 57014, which the
// store reports as unavailable, and what it wrote is all or nothing as ever.
export async function within<T extends readonly Row[]>(query: PendingQuery<T>, ms: number): Promise<RowList<T>> {
  const timer = setTimeout(() => query.cancel(), ms);
  try {
    return await query;
  } finally {
    clearTimeout(timer);
  }
}
