import { useEffect, useState, type ReactNode } from "react";
import { Role } from "../../gen/platform/v1/common_pb.js";
import type { Membership } from "../../gen/platform/v1/tenant_pb.js";
import { api, problemOf } from "./api.js";
import { currentSession } from "./auth.js";
import { ErrorBanner } from "./components/form.js";
import { Link, match, useRouter } from "./router.js";
import { NamesProvider } from "./names.js";
import { tenantContext, TenantProvider, useTenant } from "./tenant.js";
import { EventPage, EventsPage } from "./pages/events.js";
import { OverviewPage } from "./pages/overview.js";
import { RunPage, RunsPage } from "./pages/runs.js";
import { AgentEditPage, AgentPage, AgentsPage } from "./pages/agents.js";
import { TriggerEditPage, TriggerPage, TriggersPage } from "./pages/triggers.js";
import { SkillEditPage, SkillPage, SkillsPage } from "./pages/skills.js";
import { SourceEditPage, SourcePage, SourcesPage } from "./pages/sources.js";

const SECTIONS: [string, string][] = [
  ["overview", "Overview"],
  ["events", "Events"],
  ["runs", "Runs"],
  ["agents", "Agents"],
  ["triggers", "Triggers"],
  ["skills", "Skills"],
  ["sources", "Webhook sources"],
];

// Each route's page under /t/:tenant. "new" and ":id/edit" are the forms.
const ROUTES: [string, (p: Record<string, string>) => ReactNode][] = [
  ["", () => <OverviewPage />],
  ["/overview", () => <OverviewPage />],
  ["/events", () => <EventsPage />],
  ["/events/:id", (p) => <EventPage id={p.id!} />],
  ["/runs", () => <RunsPage />],
  ["/runs/:id", (p) => <RunPage id={p.id!} />],
  ["/agents", () => <AgentsPage />],
  ["/agents/new", () => <AgentEditPage />],
  ["/agents/:id", (p) => <AgentPage id={p.id!} />],
  ["/agents/:id/edit", (p) => <AgentEditPage id={p.id!} />],
  ["/triggers", () => <TriggersPage />],
  ["/triggers/new", () => <TriggerEditPage />],
  ["/triggers/:id", (p) => <TriggerPage id={p.id!} />],
  ["/triggers/:id/edit", (p) => <TriggerEditPage id={p.id!} />],
  ["/skills", () => <SkillsPage />],
  ["/skills/new", () => <SkillEditPage />],
  ["/skills/:id", (p) => <SkillPage id={p.id!} />],
  ["/skills/:id/edit", (p) => <SkillEditPage id={p.id!} />],
  ["/sources", () => <SourcesPage />],
  ["/sources/new", () => <SourceEditPage />],
  ["/sources/:id", (p) => <SourcePage id={p.id!} />],
  ["/sources/:id/edit", (p) => <SourceEditPage id={p.id!} />],
];

function TenantPage({ rest }: { rest: string }) {
  for (const [pattern, render] of ROUTES) {
    const params = match(pattern, rest);
    if (params) return <>{render(params)}</>;
  }
  return (
    <>
      <h1 tabIndex={-1}>Not found</h1>
      <p>No page at this address.</p>
    </>
  );
}

function Nav({ section }: { section: string }) {
  const { base } = useTenant();
  return (
    <nav aria-label="Sections">
      <ul>
        {SECTIONS.map(([path, label]) => (
          <li key={path}>
            <Link to={`${base}/${path}`} aria-current={section === path ? "page" : undefined}>
              {label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function TenantSwitcher({ memberships, current }: { memberships: Membership[]; current: string }) {
  const { navigate, loc } = useRouter();
  if (memberships.length < 2) return <span className="tenant-name">{current}</span>;
  return (
    <label className="tenant-switcher">
      Tenant{" "}
      <select
        value={current}
        onChange={(e) => {
          // Same section in the other tenant; records do not carry over.
          const section = /^\/t\/[^/]+\/([^/]+)/.exec(loc.path)?.[1] ?? "overview";
          navigate(`/t/${encodeURIComponent(e.target.value)}/${section}`);
        }}
      >
        {memberships.map((m) => (
          <option key={m.tenant} value={m.tenant}>
            {m.displayName || m.tenant}
            {m.role === Role.VIEWER ? " (viewer)" : ""}
          </option>
        ))}
      </select>
    </label>
  );
}

async function allMemberships(): Promise<Membership[]> {
  const out: Membership[] = [];
  let pageToken = "";
  do {
    const res = await api().listMemberships({ pageSize: 100, pageToken });
    out.push(...res.memberships);
    pageToken = res.nextPageToken;
  } while (pageToken && out.length < 1000);
  return out;
}

export function App({ onSignOut }: { onSignOut: () => void }) {
  const { loc, navigate } = useRouter();
  const [memberships, setMemberships] = useState<Membership[]>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    allMemberships().then(setMemberships, (err: unknown) => setError(problemOf(err).message));
  }, []);
  const m = /^\/t\/([^/]+)(\/.*)?$/.exec(loc.path);
  const slug = m ? decodeURIComponent(m[1]!) : undefined;
  const membership = memberships?.find((x) => x.tenant === slug);
  useEffect(() => {
    if (memberships?.length && !slug) navigate(`/t/${encodeURIComponent(memberships[0]!.tenant)}/overview`, true);
  }, [memberships, slug]);

  const header = (
    <header className="top">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <span className="brand">agentplane</span>
      {memberships && slug && <TenantSwitcher memberships={memberships} current={slug} />}
      {membership && membership.role !== Role.ADMIN && (
        <span className="role">{membership.role === Role.VIEWER ? "viewer" : "not a member"}: read only</span>
      )}
      <span className="whoami">{currentSession()?.subject}</span>
      <button type="button" className="sign-out" onClick={onSignOut}>
        Sign out
      </button>
    </header>
  );
  let body: ReactNode;
  if (error) body = <ErrorBanner message={`Your tenants could not be listed: ${error}`} />;
  else if (!memberships) body = <p role="status">Loading…</p>;
  else if (!memberships.length) body = <p>This account is not a member of any tenant. An admin can add it (`agentplane member add`).</p>;
  else if (!membership)
    body = slug ? <ErrorBanner message={`You are not a member of the tenant "${slug}".`} /> : <p role="status">Loading…</p>;
  if (body)
    return (
      <>
        {header}
        <main id="main">{body}</main>
      </>
    );
  const ctx = tenantContext(membership!);
  const rest = m![2] ?? "";
  return (
    <TenantProvider value={ctx}>
      <NamesProvider key={slug}>
        {header}
        <div className="layout">
          <Nav section={/^\/([^/]+)/.exec(rest)?.[1] ?? "overview"} />
          <main id="main">
            <TenantPage key={slug} rest={rest} />
          </main>
        </div>
      </NamesProvider>
    </TenantProvider>
  );
}
