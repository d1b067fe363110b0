// The waterfall of the turn's spans, as plain DOM (textContent only).

import { buildTimeline, operationClass, OPERATION_TEXT, runTitle, waitText } from './timeline.js';
import { formatMs } from './format.js';

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

/** A trace link for a run, when the server has a trace viewer configured. */
export function traceHref(traceUrl, traceId) {
  if (!traceUrl || !traceId) return null;
  let base;
  try {
    base = new URL(traceUrl, globalThis.document ? globalThis.document.baseURI : 'http://localhost/');
  } catch (_) {
    return null;
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') return null;
  return `${base.href.replace(/\/+$/, '')}/trace/${encodeURIComponent(traceId)}`;
}

function niceTicks(total, count = 4) {
  if (!(total > 0)) return [0];
  const raw = total / Math.max(1, count);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = 0; t <= total + 1e-9; t += step) ticks.push(t);
  return ticks;
}

export function renderTimeline(container, model, { traceUrl = null, now = null } = {}) {
  // About one tick label per 90 px of track (the track is roughly half the panel).
  const tickCount = Math.max(1, Math.min(4, Math.floor(((container.clientWidth || 600) * 0.5) / 90)));
  const tl = buildTimeline(model);
  const frag = document.createDocumentFragment();
  if (!tl.sections.length) {
    frag.appendChild(h('p', 'empty-note', 'The spans of the turn appear here as it runs: each node, with its model, retrieval, guardrail and tool calls, to scale.'));
    container.replaceChildren(frag);
    return;
  }
  if (tl.approximate) {
    frag.appendChild(
      h('p', 'degraded-inline', 'Approximate: the JSON response carries node durations but no timestamps, so nodes are drawn one after another in the order they ran.'),
    );
  }
  for (const sec of tl.sections) {
    if (sec.waitBeforeMs !== null && sec.waitBeforeMs !== undefined) {
      const wait = h('div', sec.kind === 'recover' ? 'tl-wait tl-wait-recovery' : 'tl-wait');
      if (sec.kind !== 'recover') {
        const icon = h('span', 'pause-icon');
        icon.setAttribute('aria-hidden', 'true');
        wait.appendChild(icon);
      }
      wait.appendChild(h('span', null, waitText(sec)));
      frag.appendChild(wait);
    }
    const section = h('section', sec.cut ? 'tl-section tl-section-cut' : 'tl-section');
    section.dataset.runKind = sec.kind;
    const head = h('div', 'tl-head');
    const title = runTitle(sec);
    head.appendChild(h('span', 'tl-run', title));
    if (sec.cut) head.appendChild(h('span', 'tl-cut-note', 'cut: its server stopped'));
    // A live run's length grows with the clock.
    let total = sec.totalMs;
    const open = sec.rows.some((r) => r.open);
    if (open && now !== null) {
      const run = model.runs[sec.index];
      if (run && typeof run.startTs === 'number') total = Math.max(total, now - run.startTs);
    }
    head.appendChild(h('span', 'tl-total', open ? `${formatMs(total)} so far` : formatMs(total)));
    const href = traceHref(traceUrl, sec.traceId);
    if (href) {
      const a = h('a', 'tl-trace', 'Open trace ↗');
      a.href = href;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      a.setAttribute('aria-label', `Open the trace of ${title.toLowerCase()} in the trace viewer`);
      head.appendChild(a);
    }
    section.appendChild(head);

    const scale = total > 0 ? total : 1;
    const axis = h('div', 'tl-axis');
    axis.setAttribute('aria-hidden', 'true');
    axis.appendChild(h('span', 'tl-axis-name'));
    const axisTrack = h('span', 'tl-axis-track');
    for (const t of niceTicks(total, tickCount)) {
      const tick = h('span', 'tl-tick', t === 0 ? '0' : formatMs(t));
      tick.style.left = `${(t / scale) * 100}%`;
      if (t / scale > 0.9) tick.classList.add('tl-tick-end');
      axisTrack.appendChild(tick);
    }
    axis.appendChild(axisTrack);
    axis.appendChild(h('span', 'tl-axis-dur'));
    section.appendChild(axis);

    const list = h('ol', 'tl-rows');
    list.setAttribute('aria-label', `${title} spans`);
    for (const r of sec.rows) {
      const li = h('li', `tl-row tl-${r.type} depth-${Math.min(r.depth, 4)}`);
      li.dataset.tlNode = r.node;
      li.dataset.tlState = r.state;
      const name = h('span', 'tl-name');
      if (r.type === 'span') {
        name.appendChild(h('span', `tl-op ${operationClass(r.operation)}`, OPERATION_TEXT[r.operation] || r.operation));
      }
      name.appendChild(h('span', 'tl-label', r.name));
      const inside = r.namespace && r.namespace.length ? ` (in ${r.namespace.join(' › ')})` : '';
      name.title = r.name + inside;
      li.appendChild(name);
      const track = h('span', 'tl-track');
      const bar = h('span', `tl-bar ${r.type === 'span' ? operationClass(r.operation) : 'tl-node-bar'} state-${r.state}`);
      let dur = r.durationMs;
      if (dur === null && r.open && now !== null) {
        const run = model.runs[sec.index];
        dur = Math.max(0, now - (run && typeof run.startTs === 'number' ? run.startTs : now) - r.startMs);
        bar.classList.add('tl-open');
      } else if (dur === null && r.cutMs !== undefined) {
        dur = r.cutMs; // up to where its run was last seen working
      }
      const left = Math.min(100, Math.max(0, (r.startMs / scale) * 100));
      const width = Math.min(100 - left, Math.max(0, ((dur || 0) / scale) * 100));
      bar.style.left = `${left}%`;
      bar.style.width = `${width}%`;
      track.appendChild(bar);
      li.appendChild(track);
      const durText = r.durationMs === null ? (r.state === 'running' ? 'running' : r.state === 'cut' ? 'cut' : '–') : formatMs(r.durationMs);
      li.appendChild(h('span', 'tl-dur', durText));
      li.setAttribute('aria-label', `${r.type === 'span' ? (OPERATION_TEXT[r.operation] || r.operation) + ' ' : 'node '}${r.name}${inside}: starts at ${formatMs(r.startMs)}, ${durText}${r.state === 'error' ? ', failed' : r.state === 'cut' ? ', cut short when its server stopped' : ''}`);
      list.appendChild(li);
    }
    section.appendChild(list);
    frag.appendChild(section);
  }
  container.replaceChildren(frag);
}
