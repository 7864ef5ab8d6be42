// The public HTTP API, as the page calls it: JSON in and out, the read token when one is
// kept in this browser, problem details turned into ApiError.

const TOKEN_KEY = "gridagg.readToken";

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

/** GET (body undefined) or POST a JSON body to path; resolves to the parsed answer and
 * the milliseconds it took, rejects with ApiError (or AbortError when signal aborts). */
export async function call(path, body, signal) {
  const headers = { Accept: "application/json" };
  const token = readToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { headers, signal, method: body === undefined ? "GET" : "POST" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const started = performance.now();
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, { title: "Server unreachable", detail: `${path}: ${err.message}` });
  }
  const text = await resp.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!resp.ok) {
    const problem = parsed && typeof parsed === "object" ? parsed : { detail: text.slice(0, 200) };
    problem.retryAfter = resp.headers.get("Retry-After");
    throw new ApiError(resp.status, { title: resp.statusText, ...problem });
  }
  return { answer: parsed, ms: performance.now() - started };
}
