// Names for the ids records carry: an agent, skill, trigger or source by its
// name, an event by its type. Read once per tenant and again on every page
// change (a record created or renamed on the page before shows by name);
// event types are fetched for the events a page names, once each.
import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from "react";
import type { Agent } from "../../gen/platform/v1/agent_pb.js";
import type { Skill } from "../../gen/platform/v1/skill_pb.js";
import type { Trigger } from "../../gen/platform/v1/trigger_pb.js";
import type { WebhookSource } from "../../gen/platform/v1/webhook_source_pb.js";
import { useRouter } from "./router.js";
import { useTenant } from "./tenant.js";

export interface Names {
  agents: Agent[];
  skills: Skill[];
  triggers: Trigger[];
  sources: WebhookSource[];
  loaded: boolean;
  agent(id: string): string;
  skill(id: string): string;
  source(id: string): string;
  trigger(id: string): Trigger | undefined;
  // The event's type once known; undefined while it is read.
  eventType(id: string): string | undefined;
}

const Ctx = createContext<Names | undefined>(undefined);

const nameIn = (list: { id: string; name: string }[], id: string) => list.find((r) => r.id === id)?.name ?? id;

export function NamesProvider({ children }: { children: ReactNode }) {
  const { api, tenant } = useTenant();
  const { loc } = useRouter();
  const [lists, setLists] = useState<Pick<Names, "agents" | "skills" | "triggers" | "sources" | "loaded">>({
    agents: [],
    skills: [],
    triggers: [],
    sources: [],
    loaded: false,
  });
  const types = useRef(new Map<string, string | undefined>());
  const [, setTypesVersion] = useState(0);
  useEffect(() => {
    let live = true;
    Promise.all([
      api.listAgents({ pageSize: 100 }),
      api.listSkills({ pageSize: 100 }),
      api.listTriggers({ pageSize: 100 }),
      api.listWebhookSources({ pageSize: 100 }),
    ]).then(
      ([a, s, t, w]) => live && setLists({ agents: a.agents, skills: s.skills, triggers: t.triggers, sources: w.webhookSources, loaded: true }),
      // Ids stand in for names: the page's own read reports the error.
      () => live && setLists((l) => ({ ...l, loaded: true })),
    );
    return () => {
      live = false;
    };
  }, [tenant, loc.path]);
  const eventType = (id: string) => {
    if (types.current.has(id)) return types.current.get(id);
    types.current.set(id, undefined);
    api.getEvent({ id }).then(
      (res) => {
        types.current.set(id, res.event?.eventType ?? "event");
        setTypesVersion((v) => v + 1);
      },
      () => {
        types.current.set(id, "event");
        setTypesVersion((v) => v + 1);
      },
    );
    return undefined;
  };
  const names: Names = {
    ...lists,
    agent: (id) => nameIn(lists.agents, id),
    skill: (id) => nameIn(lists.skills, id),
    source: (id) => nameIn(lists.sources, id),
    trigger: (id) => lists.triggers.find((t) => t.id === id),
    eventType,
  };
  return <Ctx.Provider value={names}>{children}</Ctx.Provider>;
}

export function useNames(): Names {
  const names = useContext(Ctx);
  if (!names) throw new Error("useNames outside a tenant");
  return names;
}

// A trigger as one line: what fires it and from where.
export function describeTrigger(t: Trigger, sourceName: (id: string) => string): string {
  switch (t.kind.case) {
    case "webhook":
      return `webhook ${t.kind.value.eventTypePattern} from ${t.kind.value.sourceId ? sourceName(t.kind.value.sourceId) : "any source"}${t.kind.value.filter ? " (filtered)" : ""}`;
    case "schedule":
      return `schedule ${t.kind.value.cron} ${t.kind.value.timezone || "UTC"}`;
    case "manual":
      return "manual";
    default:
      return "trigger";
  }
}
