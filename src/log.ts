import pino, { type Logger } from "pino";

// Credentials never reach the logs: request headers that carry them and any
// field named like a secret are censored wherever they appear.
export const REDACT_PATHS = [
  "req.headers.authorization",
  'req.headers["x-webhook-token"]',
  "req.headers.cookie",
  "*.token",
  "*.client_secret",
  "*.clientSecret",
  "*.api_key",
  "*.apiKey",
  "*.password",
];

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: "[redacted]" } });
}
