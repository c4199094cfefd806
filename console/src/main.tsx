// Entry: read the server's console settings, finish or start the login, then
// render the app. Nothing is fetched from anywhere but this server and the
// configured issuer.
import type { ReactNode } from "react";
import { createRoot } from "react-dom/client";
import { CALLBACK_PATH, completeLogin, currentSession, endSessionUrl, forgetSession, startLogin, type ConsoleConfig } from "./auth.js";
import { whenUnauthenticated } from "./api.js";
import { App } from "./app.js";
import { BASE, Router } from "./router.js";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);

function Message({ title, children }: { title: string; children: ReactNode }) {
  return (
    <main className="message">
      <h1>{title}</h1>
      {children}
    </main>
  );
}

function NotConfigured() {
  return (
    <Message title="The console needs an OAuth client">
      <p>
        Set <code>AGENTPLANE_CONSOLE_CLIENT_ID</code> to a public client (authorization code with PKCE) registered at your identity
        provider, with the redirect URI <code>{location.origin + CALLBACK_PATH}</code>, and restart the server.
      </p>
      <p>
        The issuer defaults to <code>AGENTPLANE_JWT_ISSUER</code> (set <code>AGENTPLANE_CONSOLE_ISSUER</code> otherwise), the audience
        to the API's (<code>AGENTPLANE_CONSOLE_AUDIENCE</code>), the scopes to <code>openid platform:read platform:write</code>{" "}
        (<code>AGENTPLANE_CONSOLE_SCOPES</code>). <code>agentplane dev</code> configures all of it.
      </p>
    </Message>
  );
}

function LoginFailed({ config, message }: { config: ConsoleConfig; message: string }) {
  return (
    <Message title="Sign-in failed">
      <p role="alert">{message}</p>
      <button type="button" onClick={() => void startLogin(config, BASE + "/")}>
        Sign in again
      </button>
    </Message>
  );
}

// Signing out forgets the token (it lived in this page's memory only) and
// shows a page that does not sign in again by itself. The identity
// provider's own session is its own: a link ends it where the provider
// offers one (RP-initiated logout).
const SIGNED_OUT_PATH = `${BASE}/signed-out`;

function SignedOut({ config, endSession }: { config: ConsoleConfig; endSession?: string }) {
  return (
    <Message title="You are signed out">
      <p>The console forgot its token. Nothing of the session is kept in this browser.</p>
      <p className="actions">
        <button type="button" onClick={() => void startLogin(config, BASE + "/")}>
          Sign in again
        </button>
        {endSession && (
          <a className="button secondary" href={endSession}>
            Also sign out at the identity provider
          </a>
        )}
      </p>
    </Message>
  );
}

async function signOut(config: ConsoleConfig) {
  forgetSession();
  history.replaceState(null, "", SIGNED_OUT_PATH);
  root.render(<SignedOut config={config} endSession={await endSessionUrl(config).catch(() => undefined)} />);
}

async function boot() {
  const res = await fetch(`${BASE}/config.json`, { cache: "no-store" });
  const config = (await res.json()) as ConsoleConfig;
  if (!config.client_id || !config.issuer) return root.render(<NotConfigured />);
  const here = new URL(location.href);
  if (here.pathname === CALLBACK_PATH) {
    try {
      const returnTo = await completeLogin(config, here);
      history.replaceState(null, "", returnTo.startsWith(BASE) ? returnTo : BASE + "/");
    } catch (err) {
      history.replaceState(null, "", BASE + "/");
      return root.render(<LoginFailed config={config} message={(err as Error).message} />);
    }
  }
  if (here.pathname === SIGNED_OUT_PATH) return root.render(<SignedOut config={config} />);
  if (!currentSession()) return startLogin(config, location.pathname + location.search);
  // A refused or expired token: back through the issuer (whose own session
  // usually answers at once), to the same page.
  whenUnauthenticated(() => {
    forgetSession();
    void startLogin(config, location.pathname + location.search);
  });
  root.render(
    <Router>
      <App onSignOut={() => void signOut(config)} />
    </Router>,
  );
}

boot().catch((err: unknown) => root.render(<Message title="The console could not start"><p role="alert">{(err as Error).message}</p></Message>));
