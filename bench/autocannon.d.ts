// Minimal typing for the parts of autocannon 9 the benchmarks use; the
// package ships no TypeScript types.
declare module "autocannon" {
  export interface Options {
    url: string;
    method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
    pipelining?: number;
    timeout?: number;
    // Load generation in this many worker threads (0: on the calling thread).
    workers?: number;
    // Requests per second over all connections (unset: as fast as possible).
    overallRate?: number;
    // Replaces every `[<id>]` in the request (headers and body) with a new id.
    idReplacement?: boolean;
    // Each connection cycles through these, over the defaults above.
    // `setupRequest` rewrites each request: a function, or with workers the
    // path of a CommonJS module exporting one.
    requests?: {
      method?: Options["method"];
      headers?: Record<string, string>;
      body?: string;
      setupRequest?: string | ((request: object) => object);
    }[];
  }

  // The percentile fields hdr-histogram-percentiles-obj adds (p2_5 … p99_999).
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    // Set on requests and throughput only.
    total?: number;
    p50: number;
    p90: number;
    p99: number;
    p99_9: number;
  }

  export interface Result {
    url: string;
    connections: number;
    duration: number;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    "2xx": number;
    statusCodeStats: Record<string, { count: number }>;
    // Milliseconds.
    latency: Histogram & { totalCount: number };
    // Per-second samples of completed requests.
    requests: Histogram & { sent: number };
    // Per-second samples of bytes received.
    throughput: Histogram;
  }

  // Without a callback it returns a thenable tracker (an EventEmitter).
  export default function autocannon(options: Options): PromiseLike<Result>;
}
