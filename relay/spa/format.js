// Number formatting and the latency colour scale, shared by the graph, the timeline and the legend.

/** A duration in ms, as a person reads it: "0.42 ms", "12.3 ms", "245 ms", "1.24 s", "2 min 05 s". */
export function formatMs(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '–';
  if (ms < 0) ms = 0;
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}

/** A wait clock: "0:07", "1:23", "1:02:03". */
export function formatClock(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}

// A fixed, logarithmic latency scale (not relative to the turn: the same colour always
// means the same latency). Colours: a sequential yellow-orange-red ramp, readable on white.
export const LATENCY_BINS = [
  { max: 1, label: '< 1 ms', cls: 'lat-0' },
  { max: 10, label: '1–10 ms', cls: 'lat-1' },
  { max: 100, label: '10–100 ms', cls: 'lat-2' },
  { max: 1000, label: '0.1–1 s', cls: 'lat-3' },
  { max: Infinity, label: '≥ 1 s', cls: 'lat-4' },
];

/** Index of the latency bin of a duration, or -1 when unknown. */
export function latencyBin(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return -1;
  for (let i = 0; i < LATENCY_BINS.length; i++) if (ms < LATENCY_BINS[i].max) return i;
  return LATENCY_BINS.length - 1;
}

export const STATE_TEXT = {
  idle: 'waiting',
  running: 'running',
  ok: 'done',
  error: 'failed',
  paused: 'paused',
  skipped: 'skipped',
  cancelled: 'cancelled',
  retrying: 'retried',
  cut: 'cut short', // its server stopped; the recovered run runs the step again
};

export const OUTCOME_TEXT = {
  none: 'No turn yet',
  running: 'Running',
  answered: 'Answered',
  refused: 'Refused',
  paused: 'Paused: waiting for approval',
  error: 'Error',
  cancelled: 'Cancelled',
  interrupted: 'Interrupted',
};

/** "Searching…" from a tool_started label (its own words) or, failing that, its name. */
export function toolActivityText(tool) {
  if (!tool) return '';
  if (tool.label) return tool.label.replace(/[.…\s]+$/u, '') + '…';
  return `Running ${tool.tool}…`;
}

/** An interrupt value's arguments as [key, text] pairs. */
export function argPairs(args) {
  if (!args || typeof args !== 'object') return args === undefined ? [] : [['value', valueText(args)]];
  return Object.entries(args).map(([k, v]) => [k, valueText(v)]);
}

export function valueText(v) {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  try {
    return JSON.stringify(v);
  } catch (_) {
    return String(v);
  }
}
