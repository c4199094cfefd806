// Groups (run, event) pairs, already in the order wanted, by event.
export function byEvent(rows: { id: string; eventId: string }[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const { id, eventId } of rows) {
    const ids = map.get(eventId);
    if (ids) ids.push(id);
    else map.set(eventId, [id]);
  }
  return map;
}
