import type { Readable } from "node:stream";

// A Node stream as the web stream a Response body is, counted: past `limit`
// bytes it errors with `tooLarge()` and the Node stream is destroyed (its
// socket with it). Not `Readable.toWeb`: on Node 20 it throws "Controller is
// already closed" from an event handler when a response's body is cancelled
// as it ends, an uncaught error.
export function webBody(stream: Readable, limit: number, tooLarge: () => Error): ReadableStream<Uint8Array> {
  let done = false;
  let seen = 0;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const fail = (err: unknown) => {
          if (done) return;
          done = true;
          controller.error(err);
        };
        stream.on("data", (chunk: Buffer) => {
          if (done) return;
          seen += chunk.length;
          if (seen > limit) {
            const err = tooLarge();
            fail(err);
            stream.destroy(err);
            return;
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
          if ((controller.desiredSize ?? 0) <= 0) stream.pause();
        });
        stream.once("end", () => {
          if (done) return;
          done = true;
          controller.close();
        });
        stream.on("error", fail);
        // Closed with neither an end nor an error: the answer was cut short.
        stream.once("close", () => fail(new TypeError("terminated")));
      },
      pull() {
        stream.resume();
      },
      cancel() {
        done = true;
        stream.destroy();
      },
    },
    // Chunks as they come, one waiting at most before the source is paused.
    { highWaterMark: 1 },
  );
}
