// Tools the browser runs for the agent: a paused turn whose interrupts are all client-tool
// calls ({"type": "client_tool", name, arguments, call_id, token}) of tools known here is
// answered at once, without a card: each tool runs in the page and the turn resumes with
// {"result", "token"} per call (or {"error", "token"} when the tool failed). Pure data and
// functions (the Node tests check them); pause.js sends the resume.

function isObject(v) {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** The person's local date and time, from the browser's clock and time zone settings. */
export function localTime(now = new Date()) {
  let zone = '';
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
  } catch (_) {
    zone = '';
  }
  return {
    iso: now.toISOString(),
    local: now.toLocaleString(undefined, { dateStyle: 'full', timeStyle: 'short' }),
    time_zone: zone,
    utc_offset_minutes: -now.getTimezoneOffset(),
  };
}

/** The tools this page runs, by name: each takes the call's arguments, returns JSON data. */
export const BROWSER_TOOLS = { local_time: () => localTime() };

/** The interrupt's client-tool call ({id, name, args, token}), or null for anything else. */
export function clientToolCall(it) {
  const v = isObject(it) ? it.value : null;
  if (!isObject(v) || v.type !== 'client_tool' || typeof v.name !== 'string' || typeof v.token !== 'string') return null;
  return { id: isObject(it) && it.id != null ? String(it.id) : null, name: v.name, args: isObject(v.arguments) ? v.arguments : {}, token: v.token };
}

/**
 * Run the calls when every interrupt is one of `tools`: {resume, names}, the resume value
 * (the bare answer for one interrupt, {interrupt_id: answer} for several). Null when any
 * interrupt is something else (a person answers it on the card).
 */
export function browserResume(interrupts, tools = BROWSER_TOOLS) {
  const list = Array.isArray(interrupts) ? interrupts : [];
  const calls = list.map(clientToolCall);
  if (!calls.length || calls.some((c) => !c || !Object.prototype.hasOwnProperty.call(tools, c.name))) return null;
  const answers = calls.map((c) => {
    try {
      return { result: tools[c.name](c.args), token: c.token };
    } catch (e) {
      return { error: String((e && e.message) || e), token: c.token };
    }
  });
  if (answers.length === 1) return { resume: answers[0], names: [calls[0].name] };
  if (calls.some((c) => !c.id)) return null;
  const resume = {};
  calls.forEach((c, i) => {
    resume[c.id] = answers[i];
  });
  return { resume, names: calls.map((c) => c.name) };
}
