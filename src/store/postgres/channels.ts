// NOTIFY channels every replica LISTENs on (see the store's signals).
export const CHANNELS = {
  // Runs became claimable: payload empty.
  runsQueued: "agentplane_runs_queued",
  // A run was cancelled: payload the run id.
  runCancelled: "agentplane_run_cancelled",
  // Rows of a cached table changed: payload the table name. Sent by table
  // triggers, so every writer (another version, psql) is covered.
  changed: "agentplane_changed",
  // Runs of a tenant were created or changed: payload the tenant id, empty
  // when not known. Sent after the commit (change-notifier.ts).
  runsChanged: "agentplane_runs_changed",
  // Events of a tenant were stored: payload the tenant id. Sent after the commit.
  eventsAdded: "agentplane_events_added",
} as const;
