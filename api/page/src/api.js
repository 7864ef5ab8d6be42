// The public HTTP API, as the page calls it: JSON in and out, or an answer streamed as it
// improves (NDJSON, one answer a line); the read token when one is kept in this browser;
// problem details turned into ApiError.

const TOKEN_KEY = "gridagg.readToken";
const NDJSON = "application/x-ndjson";

export class ApiError extends Error {
  /** status: HTTP status (0: the server could not be reached); problem: its body. */
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.title = problem.title || "Error";
    this.field = problem.field || null;
    this.retryAfter = problem.retryAfter || null;
  }

  /** One line for a person: status, title, detail, and when to retry. */
  describe() {
    const head = this.status ? `${this.status} ${this.title}` : this.title;
    const retry = this.retryAfter ? ` (retry in ${this.retryAfter} s)` : "";
    return `${head}: ${this.message}${retry}`;
  }
}

export function readToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setReadToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** The response to a GET (body undefined) or a POST of a JSON body, asking for `accept`;
 * rejects with ApiError for a refusal or an unreachable server (AbortError when signal
 * aborts). */
async function send(path, body, signal, accept) {
  const headers = { Accept: accept };
  const token = readToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { headers, signal, method: body === undefined ? "GET" : "POST" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, { title: "Server unreachable", detail: `${path}: ${err.message}` });
  }
  if (resp.ok) return resp;
  const text = await resp.text();
  let problem = null;
  try {
    problem = JSON.parse(text);
  } catch {
    problem = null;
  }
  if (!problem || typeof problem !== "object") problem = { detail: text.slice(0, 200) };
  problem.retryAfter = resp.headers.get("Retry-After");
  throw new ApiError(resp.status, { title: resp.statusText, ...problem });
}

/** GET (body undefined) or POST a JSON body to path; resolves to the parsed answer and
 * the milliseconds it took, rejects with ApiError (or AbortError when signal aborts). */
export async function call(path, body, signal) {
  const started = performance.now();
  const resp = await send(path, body, signal, "application/json");
  const text = await resp.text();
  return { answer: text ? JSON.parse(text) : null, ms: performance.now() - started };
}

/** POST a JSON body to path for its answer as it improves: onAnswer({answer, ms}) gets
 * each answer as it arrives (of several arriving together, the newest alone: it supersedes
 * the others), ms counted from the request; a server that answers once (plain JSON) gives
 * one. Resolves to the last {answer, ms}; rejects as call() does, and with ApiError when
 * the stream breaks off. */
export async function stream(path, body, signal, onAnswer) {
  const started = performance.now();
  const resp = await send(path, body, signal, NDJSON);
  if (!(resp.headers.get("Content-Type") || "").startsWith(NDJSON)) { // a server answering once
    const only = { answer: JSON.parse(await resp.text()), ms: performance.now() - started };
    onAnswer(only);
    return only;
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = ""; // text after the last complete line
  let last = null;
  const take = (line) => {
    last = { answer: JSON.parse(line), ms: performance.now() - started };
    onAnswer(last);
  };
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError(0, { title: "Answer cut off", detail: `${path}: the connection closed before the answer was exact (${err.message})` });
    }
    if (chunk.done) break;
    const lines = (pending + chunk.value).split("\n");
    pending = lines.pop();
    const newest = lines.filter((line) => line.trim()).pop();
    if (newest !== undefined) take(newest);
  }
  if (pending.trim()) take(pending);
  if (!last) throw new ApiError(resp.status, { title: "Empty answer", detail: `${path} answered nothing` });
  return last;
}
