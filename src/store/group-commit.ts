// How writes batch into commits.
export interface GroupCommitOptions {
  // How long the first write of a batch waits for others; 0 commits what
  // arrived in the same event-loop turn.
  windowMs: number;
  maxBatch: number;
}

// A write waiting for the commit that holds it.
export interface Pending<Write, Result> {
  write: Write;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

// Writes that arrive together share one commit: the store's one batching
// loop, for ingest and run writes on either engine. The first write of a
// batch waits for the window (with 0, for the rest of the event-loop turn),
// or not at all once the batch is full. One commit is under way at a time;
// writes that arrive meanwhile form the next batch, committed as soon as it
// ends, so batches grow with load and an idle store commits each write at
// once.
//
// `commit` settles each write of the batch it is given with its own result or
// error, after the commit that holds it; it may be synchronous. When it
// throws, every write it left unsettled fails with `failed(error)`.
export function batchCommits<Write, Result>(
  commit: (batch: Pending<Write, Result>[]) => void | Promise<void>,
  options: GroupCommitOptions,
  failed: (error: unknown) => unknown = (error) => error,
): (write: Write) => Promise<Result> {
  const pending: Pending<Write, Result>[] = [];
  // Cancels the flush that waits for the first pending write's window.
  let cancelWait: (() => void) | undefined;
  let committing = false;

  function wait(): void {
    if (options.windowMs > 0) {
      const timer = setTimeout(() => void flush(), options.windowMs);
      cancelWait = () => clearTimeout(timer);
    } else {
      const immediate = setImmediate(() => void flush());
      cancelWait = () => clearImmediate(immediate);
    }
  }

  async function flush(): Promise<void> {
    cancelWait?.();
    cancelWait = undefined;
    committing = true;
    while (pending.length) {
      const batch = pending.splice(0, options.maxBatch);
      try {
        // A synchronous commit is not awaited: what its settled writes'
        // continuations write next waits for the next turn, as a new batch.
        const done = commit(batch);
        if (done) await done;
      } catch (err) {
        const error = failed(err);
        for (const p of batch) p.reject(error);
      }
    }
    committing = false;
  }

  return (write) =>
    new Promise<Result>((resolve, reject) => {
      pending.push({ write, resolve, reject });
      if (committing) return;
      if (pending.length >= options.maxBatch) void flush();
      else if (!cancelWait) wait();
    });
}

// Run writes: all of a batch in one transaction, or nothing. `commit` answers
// one result per write, in order; when it fails, each write is committed
// again on its own, so that one bad write fails alone.
export function groupCommit<Write, Result>(commit: (writes: Write[]) => Promise<Result[]>, maxBatch: number): (write: Write) => Promise<Result> {
  return batchCommits<Write, Result>(
    async (batch) => {
      let results: Result[];
      try {
        results = await commit(batch.map((p) => p.write));
      } catch (err) {
        if (batch.length === 1) throw err;
        for (const p of batch)
          await commit([p.write]).then(
            ([r]) => p.resolve(r!),
            (e: unknown) => p.reject(e),
          );
        return;
      }
      batch.forEach((p, i) => p.resolve(results[i]!));
    },
    { windowMs: 0, maxBatch },
  );
}
