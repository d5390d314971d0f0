// The router's REST API as the dashboard uses it: JSON reads and changes under /api/v1 with a
// bearer token, the event log, and the server-sent event stream (read with fetch, since
// EventSource cannot send an Authorization header).

import type { ApiEvent } from "./model";

export const API = "/api/v1";

/** An answer other than 2xx, with the API's structured error when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null = null,
  ) {
    super(message);
  }
}

let token: string | null = null;

export function setToken(t: string | null): void {
  token = t;
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { Accept: "application/json", ...extra };
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function errorOf(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`;
  let field: string | null = null;
  try {
    const body = await res.json();
    if (body && body.error) {
      message = String(body.error.message ?? message);
      field = body.error.field ?? null;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, message, field);
}

/** GET a JSON document; `path` is under /api/v1 unless it starts with a slash. */
export async function get<T>(path: string, signal?: AbortSignal): Promise<T> {
  const url = path.startsWith("/") ? path : `${API}/${path}`;
  const res = await fetch(url, { headers: headers(), cache: "no-store", signal });
  if (!res.ok) throw await errorOf(res);
  return (await res.json()) as T;
}

/** A change: POST, PUT or DELETE with an optional JSON body; the JSON answer, if any. */
export async function send<T>(method: string, path: string, body?: unknown): Promise<T | null> {
  const url = path.startsWith("/") ? path : `${API}/${path}`;
  const init: RequestInit = { method, headers: headers(), cache: "no-store" };
  if (body !== undefined) {
    init.headers = headers({ "Content-Type": "application/json" });
    init.body = JSON.stringify(body);
  }
  const res = await fetch(url, init);
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? (JSON.parse(text) as T) : null;
}

/** A NID as one path segment. */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

export type Role = "admin" | "reader";

/**
 * What the token may do. A server that says who a token is (`GET whoami`) is asked; else a
 * harmless probe: a health reset of a NI that cannot exist. The server checks the role before
 * it reads the path, so an admin token gets 400 (not a NID) and changes nothing, while a
 * reader token (or a read-only server) gets 403.
 */
export async function detectRole(paths: Set<string>): Promise<Role> {
  for (const p of ["/api/v1/whoami", "/api/v1/token", "/api/v1/auth/whoami"]) {
    if (paths.has(p)) {
      const who = await get<{ role?: string }>(p);
      return who.role === "admin" ? "admin" : "reader";
    }
  }
  try {
    await send("POST", "nis/role-check/health", {});
    return "admin";
  } catch (e) {
    if (e instanceof ApiError) {
      if (e.status === 401) throw e;
      if (e.status === 403) return "reader";
      return "admin";
    }
    throw e;
  }
}

export interface StreamHandlers {
  onOpen(): void;
  onEvent(e: ApiEvent): void;
  onLagged(missed: number): void;
}

/**
 * Reads the event stream from after event `after` until `signal` aborts or the stream ends;
 * returns the id of the last event read.
 */
export async function readStream(after: number, h: StreamHandlers, signal: AbortSignal): Promise<number> {
  const res = await fetch(`${API}/events/stream?after=${after}`, {
    headers: headers({ Accept: "text/event-stream" }),
    cache: "no-store",
    signal,
  });
  if (!res.ok || !res.body) throw await errorOf(res);
  h.onOpen();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let last = after;
  let kind = "message";
  let data: string[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buf += value;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data.length > 0) {
          const text = data.join("\n");
          if (kind === "lagged") {
            try {
              h.onLagged(Number(JSON.parse(text).missed) || 0);
            } catch {
              h.onLagged(0);
            }
          } else {
            try {
              const e = JSON.parse(text) as ApiEvent;
              if (typeof e.id === "number") last = Math.max(last, e.id);
              h.onEvent(e);
            } catch {
              // a record that is not an event's JSON: skip it
            }
          }
        }
        kind = "message";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "event") kind = val;
      else if (field === "data") data.push(val);
    }
  }
}
