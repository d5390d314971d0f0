// The lnet-router dashboard: one page served by the router itself. The token is entered once
// and kept in this tab's sessionStorage only; a reader token sees no action buttons.

import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ConfirmHost } from "./components";
import "./style.css";
import { changed, login, logout, savedToken, state, useStore } from "./store";
import { Events } from "./views/events";
import { Health } from "./views/health";
import { Overview, problems } from "./views/overview";
import { Peers } from "./views/peers";
import { Recovery } from "./views/recovery";
import { Routes } from "./views/routes";

const VIEWS = [
  ["overview", "Overview"],
  ["health", "Health over time"],
  ["recovery", "Recovery queues"],
  ["routes", "Routes"],
  ["peers", "Peers"],
  ["events", "Events"],
] as const;

type ViewName = (typeof VIEWS)[number][0];

function currentView(): ViewName {
  const h = location.hash.replace(/^#\/?/, "");
  return (VIEWS.find(([k]) => k === h)?.[0] ?? "overview") as ViewName;
}

function Login() {
  const s = useStore();
  const [token, setToken] = useState("");
  return (
    <div class="login">
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          if (token.trim()) void login(token.trim());
        }}
      >
        <h1>lnet-router</h1>
        <p>
          Enter an API token of this router. It is kept in this browser tab only (sessionStorage) and sent to this router
          alone.
        </p>
        <input
          type="password"
          name="token"
          autocomplete="off"
          placeholder="Bearer token"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          data-token-input
          autofocus
        />
        <button type="submit" disabled={s.connecting} data-login>
          {s.connecting ? "Connecting…" : "Open dashboard"}
        </button>
        {s.authError && (
          <p class="error" data-auth-error>
            {s.authError}
          </p>
        )}
      </form>
    </div>
  );
}

function App() {
  const s = useStore();
  const [view, setView] = useState<ViewName>(currentView());
  useEffect(() => {
    const on = () => setView(currentView());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  useEffect(() => {
    // keeps "n s ago" and the charts' right edge moving between events
    const t = setInterval(() => state.token && changed(), 1000);
    return () => clearInterval(t);
  }, []);

  if (!s.token) return <Login />;
  const nProblems = s.nets ? problems(s).length : 0;
  return (
    <div class="app" data-role={s.role ?? ""}>
      <header class="top">
        <span class="brand">lnet-router</span>
        <nav>
          {VIEWS.map(([k, label]) => (
            <a key={k} href={`#/${k}`} class={k === view ? "active" : ""} data-nav={k}>
              {label}
              {k === "overview" && nProblems > 0 && <span class="count">{nProblems}</span>}
              {k === "recovery" && s.recovery.local.length + s.recovery.peer.length > 0 && (
                <span class="count">{s.recovery.local.length + s.recovery.peer.length}</span>
              )}
            </a>
          ))}
        </nav>
        <span class="spacer" />
        <span class={`badge ${s.stream === "live" ? "b-up" : "b-down"}`} title="event stream" data-stream={s.stream}>
          {s.stream === "live" ? "live" : s.stream}
        </span>
        <span class="badge b-na" data-role-badge={s.role ?? ""} title="what this token may do">
          {s.role === "admin" ? "admin" : "read-only"}
        </span>
        <button type="button" class="small" onClick={() => logout()} data-logout>
          Sign out
        </button>
      </header>
      <main>
        {!s.nets && !s.pollError && <p class="muted">Loading…</p>}
        {s.pollError && !s.nets && <p class="error">{s.pollError}</p>}
        {s.nets && view === "overview" && <Overview s={s} />}
        {s.nets && view === "health" && <Health s={s} />}
        {s.nets && view === "recovery" && <Recovery s={s} />}
        {s.nets && view === "routes" && <Routes s={s} />}
        {s.nets && view === "peers" && <Peers s={s} />}
        {s.nets && view === "events" && <Events s={s} />}
      </main>
      <ConfirmHost />
    </div>
  );
}

const root = document.getElementById("app");
if (root) {
  render(<App />, root);
  const t = savedToken();
  if (t) void login(t);
}
