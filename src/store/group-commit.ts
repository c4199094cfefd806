// How ingest batches form, on either engine.
export interface GroupCommitOptions {
  // How long the first ingest of a batch waits for others; 0 commits what
  // arrived in the same event-loop turn. Ingests that arrive while a commit
  // is in flight form the next batch, so batches grow with load.
  windowMs: number;
  maxBatch: number;
}

// Writes that arrive together share one commit. The first write of a batch
// waits for the rest of the event-loop turn (setImmediate); writes arriving
// while a commit is under way form the next batch, so batches grow with load
// and an idle store commits each write at once. Each caller's promise settles
// with its own result, after the commit that holds its write.
//
// `commit` takes the batch in arrival order and answers one result per write
// in that order, all in one transaction or nothing. When it fails, each write
// is committed again on its own, so that one bad write fails alone.
export function groupCommit<Write, Result>(commit: (writes: Write[]) => Promise<Result[]>, maxBatch: number): (write: Write) => Promise<Result> {
  const pending: { write: Write; resolve: (r: Result) => void; reject: (e: unknown) => void }[] = [];
  // A flush is scheduled or committing: it takes whatever is pending.
  let flushing = false;

  async function flush(): Promise<void> {
    while (pending.length) {
      const batch = pending.splice(0, maxBatch);
      let results: Result[];
      try {
        results = await commit(batch.map((p) => p.write));
      } catch (err) {
        if (batch.length === 1) batch[0]!.reject(err);
        else
          for (const p of batch)
            await commit([p.write]).then(
              ([r]) => p.resolve(r!),
              (e: unknown) => p.reject(e),
            );
        continue;
      }
      batch.forEach((p, i) => p.resolve(results[i]!));
    }
    flushing = false;
  }

  return (write) =>
    new Promise<Result>((resolve, reject) => {
      pending.push({ write, resolve, reject });
      if (flushing) return;
      flushing = true;
      setImmediate(() => void flush());
    });
}
