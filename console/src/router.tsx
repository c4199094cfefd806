// A router of its own: the console has a dozen flat routes, which a library
// would cost more bytes than this file. Paths live under /console/.
import { createContext, useContext, useEffect, useState, type AnchorHTMLAttributes, type MouseEvent, type ReactNode } from "react";

export const BASE = "/console";

interface Location {
  path: string; // without BASE, e.g. "/t/acme/runs/run_1"
  search: URLSearchParams;
}

const current = (): Location => ({
  path: location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) || "/" : "/",
  search: new URLSearchParams(location.search),
});

const RouterContext = createContext<{ loc: Location; navigate: (to: string, replace?: boolean) => void }>({
  loc: { path: "/", search: new URLSearchParams() },
  navigate: () => {},
});

export function Router({ children }: { children: ReactNode }) {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const onPop = () => setLoc(current());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);
  const navigate = (to: string, replace = false) => {
    const url = BASE + to;
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    setLoc(current());
    // A new page: move focus to its heading for keyboard and screen reader users.
    requestAnimationFrame(() => document.querySelector<HTMLElement>("main h1")?.focus());
  };
  return <RouterContext.Provider value={{ loc, navigate }}>{children}</RouterContext.Provider>;
}

export const useRouter = () => useContext(RouterContext);

// Matches "/t/:tenant/runs/:id" against a path; named segments come back.
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const p = pattern.split("/");
  const s = path.replace(/\/+$/, "").split("/");
  if (p.length !== s.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(":")) params[p[i]!.slice(1)] = decodeURIComponent(s[i]!);
    else if (p[i] !== s[i]) return undefined;
  }
  return params;
}

export function Link({ to, children, ...rest }: { to: string; children: ReactNode } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const { navigate } = useRouter();
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return (
    <a href={BASE + to} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
