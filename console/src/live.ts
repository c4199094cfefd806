// Live data: a server stream of changes (WatchEvents, WatchRuns, WatchRun)
// with the List/Get method as the snapshot and as the fallback when a stream
// is not available (a server without it, a proxy that buffers responses).
import { useEffect, useRef, useState } from "react";
import { isUnimplemented, problemOf } from "./api.js";

export type Liveness = "connecting" | "live" | "polling";

const POLL_MS = 2000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });

type Follow<O> = (
  o: () => O,
  signal: AbortSignal,
  state: { setLiveness: (l: Liveness) => void; setError: (e: string | undefined) => void },
) => void;

// What both hooks share: liveness and error, the latest options, and `follow`
// started afresh whenever the key changes, stopped when the page goes.
function useFollow<O extends { key: string }>(opts: O, follow: Follow<O>) {
  const [liveness, setLiveness] = useState<Liveness>("connecting");
  const [error, setError] = useState<string>();
  const optsRef = useRef(opts);
  optsRef.current = opts;

  useEffect(() => {
    const ctl = new AbortController();
    follow(() => optsRef.current, ctl.signal, { setLiveness, setError });
    return () => ctl.abort();
  }, [opts.key]);

  return { liveness, error };
}

export interface LiveListOptions<T> {
  // Changes when the query changes (tenant, filters): the list starts over.
  key: string;
  list: () => Promise<T[]>;
  // `onOpen`: called once the server answered the stream's request (its
  // headers), before any message: the page is live from then on.
  watch: (signal: AbortSignal, onOpen: () => void) => AsyncIterable<T | undefined>;
  id: (item: T) => string;
  // Sort key, newest first; also decides which of two copies of an item wins.
  version: (item: T) => number;
  order: (item: T) => number;
  // Items a change moved out of the query (a run that left the filtered status).
  keep?: (item: T) => boolean;
  limit?: number;
}

export function useLiveList<T>(opts: LiveListOptions<T>) {
  const [items, setItems] = useState<T[]>([]);
  const { liveness, error } = useFollow(opts, (o, signal, { setLiveness, setError }) => {
    setItems([]);
    const merge = (incoming: T[]) =>
      setItems((prev) => {
        const { id, version, order, keep, limit = 200 } = o();
        const byId = new Map(prev.map((i) => [id(i), i]));
        for (const item of incoming) {
          const old = byId.get(id(item));
          if (!old || version(item) >= version(old)) byId.set(id(item), item);
        }
        return [...byId.values()]
          .filter((i) => !keep || keep(i))
          .sort((a, b) => order(b) - order(a))
          .slice(0, limit);
      });
    const snapshot = async () => {
      try {
        merge(await o().list());
        setError(undefined);
      } catch (err) {
        if (!signal.aborted) setError(problemOf(err).message);
      }
    };
    void (async () => {
      while (!signal.aborted) {
        setLiveness("connecting");
        try {
          const it = o().watch(signal, () => !signal.aborted && setLiveness("live"))[Symbol.asyncIterator]();
          // Subscribe first, then read the snapshot, so no change falls between.
          const first = it.next();
          // Its failure is handled below, once the snapshot is read.
          first.catch(() => {});
          await snapshot();
          let next = await first;
          setLiveness("live");
          while (!next.done) {
            if (next.value !== undefined) merge([next.value]);
            next = await it.next();
          }
          // The server ended an idle stream: subscribe again.
        } catch (err) {
          if (signal.aborted) return;
          if (isUnimplemented(err)) {
            setLiveness("polling");
            while (!signal.aborted) {
              await snapshot();
              await sleep(POLL_MS, signal);
            }
            return;
          }
          setError(problemOf(err).message);
          setLiveness("polling");
          await snapshot();
          await sleep(POLL_MS, signal);
        }
      }
    })();
  });

  return { items, liveness, error };
}

// One record followed until `done` says it will not change again.
export function useLiveRecord<T>(opts: {
  key: string;
  get: () => Promise<T | undefined>;
  watch: (signal: AbortSignal, onOpen: () => void) => AsyncIterable<T | undefined>;
  done: (item: T) => boolean;
}) {
  const [item, setItem] = useState<T>();
  const { liveness, error } = useFollow(opts, (o, signal, { setLiveness, setError }) => {
    setItem(undefined);
    let last: T | undefined;
    const show = (value: T | undefined) => {
      last = value;
      setItem(value);
      setError(undefined);
    };
    const poll = async () => {
      while (!signal.aborted && !(last && o().done(last))) {
        try {
          show(await o().get());
        } catch (err) {
          if (!signal.aborted) setError(problemOf(err).message);
        }
        await sleep(POLL_MS / 2, signal);
      }
    };
    void (async () => {
      while (!signal.aborted && !(last && o().done(last))) {
        setLiveness("connecting");
        try {
          for await (const value of o().watch(signal, () => !signal.aborted && setLiveness("live"))) {
            setLiveness("live");
            if (value !== undefined) show(value);
          }
          if (!last) show(await o().get());
        } catch (err) {
          if (signal.aborted) return;
          setLiveness("polling");
          if (isUnimplemented(err)) return poll();
          setError(problemOf(err).message);
          await sleep(POLL_MS, signal);
        }
      }
    })();
  });

  return { item, setItem, liveness, error };
}
