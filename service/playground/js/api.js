// The API client: every call the page makes goes through `post`, to this service's own /v1.
// A call resolves to {ok: true, data} or {ok: false, problem}; it never throws, so each part of
// the page can show a problem where it belongs.

let language = "en";

export function setLanguage(lang) {
  language = lang;
}

async function post(path, body, signal) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, application/problem+json",
        "Accept-Language": language,
      },
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") return { ok: false, aborted: true };
    return { ok: false, problem: { status: 0, title: "offline", detail: String(error.message || error) } };
  }
  let document = null;
  try {
    document = await response.json();
  } catch {
    document = null;
  }
  if (response.ok && document) return { ok: true, data: document };
  const problem = document && typeof document === "object" ? document : {};
  return {
    ok: false,
    problem: {
      ...problem,
      status: problem.status ?? response.status,
      title: problem.title ?? response.statusText,
      detail: problem.detail ?? problem.title ?? response.statusText,
    },
  };
}

// Each endpoint takes the page's state; a later call of the same kind cancels the earlier one,
// so a fast typist or a dragged slider never sees an answer out of order.
const inFlight = new Map();

function latest(kind, path, body) {
  inFlight.get(kind)?.abort();
  const controller = new AbortController();
  inFlight.set(kind, controller);
  return post(path, body, controller.signal).finally(() => {
    if (inFlight.get(kind) === controller) inFlight.delete(kind);
  });
}

export const api = {
  graph: (expression, granularity) =>
    latest("graph", "/v1/graph", { expression, granularity }),
  // Not cancelled: while a slider moves, the page keeps one evaluation in flight and sends the
  // newest values when it returns, so the graph keeps up instead of waiting for the drag to end.
  gradients: (expression, bindings, granularity) =>
    post("/v1/gradients", { expression, bindings, granularity }),
  sweep: (expression, bindings, name, from, to, points) =>
    latest("sweep", "/v1/sweep", { expression, bindings, vary: [{ name, from, to, points }] }),
  derivatives: (expression, bindings) =>
    latest("derivatives", "/v1/derivatives", { expression, bindings }),
  check: (expression, bindings, answers, tolerance) =>
    latest("check", "/v1/check", { expression, bindings, answers, tolerance }),
};
