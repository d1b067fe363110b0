// A node's latest progress, from its `custom` events (docs/events.md, "Payloads from inside
// nodes"): a fraction when the payload carries one (`progress` between 0 and 1), and its words
// (`stage` or `message`; else the payload as compact JSON). Pure: the graph view draws it.

const MAX_TEXT = 80;

/** {fraction: number|null, text: string} for one `custom` event's `data`. */
export function progressOf(data) {
  let fraction = null;
  let words = null;
  if (data && typeof data === 'object' && !Array.isArray(data)) {
    const p = data.progress;
    if (typeof p === 'number' && Number.isFinite(p) && p >= 0 && p <= 1) fraction = p;
    words = [data.stage, data.message].find((x) => typeof x === 'string' && x.trim()) || null;
  } else if (typeof data === 'string' && data.trim()) {
    words = data;
  }
  let text;
  if (fraction !== null) text = `${words ? words.trim() + ' ' : ''}${Math.round(fraction * 100)}%`;
  else if (words) text = words.trim();
  else text = compactJson(data);
  return { fraction, text: cut(text) };
}

function compactJson(data) {
  try {
    const s = JSON.stringify(data);
    return s === undefined ? '' : s;
  } catch {
    return '';
  }
}

function cut(text) {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text;
}
