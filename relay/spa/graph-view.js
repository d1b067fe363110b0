// The Agent Execution Graph as SVG. Built once per topology (so focus and transitions
// survive updates), then updated in place from a TurnModel. Text goes in with
// textContent only: node ids and labels are data.

import { layoutGraph } from './layout.js';
import { formatMs, latencyBin, LATENCY_BINS, STATE_TEXT } from './format.js';
import { pathLabel } from './subgraphs.js';

const SVG = 'http://www.w3.org/2000/svg';

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

const STATE_ICON = {
  idle: '',
  running: '',
  ok: '✓',
  error: '!',
  paused: '', // drawn as two bars (the pause glyph is missing from many fonts)
  skipped: '–',
  cancelled: '×',
  retrying: '↻',
  cut: '✂', // its server stopped mid-step (turn_recovered)
};

/** Shorten an SVG text with an ellipsis until it fits (the full text stays in the title). */
function fitText(textEl, maxWidth) {
  const full = textEl.textContent;
  let len;
  try {
    len = textEl.getComputedTextLength();
  } catch (_) {
    return; // not rendered (hidden): leave it
  }
  if (!len || len <= maxWidth) return;
  let n = full.length;
  while (n > 1) {
    n--;
    textEl.textContent = full.slice(0, n) + '…';
    if (textEl.getComputedTextLength() <= maxWidth) return;
  }
}

export class GraphView {
  /**
   * @param {SVGSVGElement} svg
   * @param {{onSelect?: (id: string) => void}} options
   */
  constructor(svg, options = {}) {
    this.svg = svg;
    this.onSelect = options.onSelect || (() => {});
    this.key = null;
    this.nodes = new Map(); // id -> {g, box, status, bar, icon, badge, layout}
    this.inner = new Map(); // key -> {g, entry, status, parent}: a subgraph's inner nodes
    this.edges = []; // {path, source, target}
    this.layout = null;
  }

  /**
   * (Re)build the drawing when the topology (or the inner nodes seen) changed.
   * groups: Map top-level id -> inner node entries (subgraphs.js drawnGraph).
   */
  setTopology(topology, direction = 'LR', groups = null) {
    const groupKeys = groups ? [...groups].map(([id, list]) => [id, list.map((e) => e.key)]) : [];
    const key = JSON.stringify(topology ? [topology.nodes, topology.edges, direction, groupKeys] : null);
    // a graph discovered from the spans (no topology was sent): drawn as such (dashed edges)
    this.svg.classList.toggle('graph-discovered', !!(topology && topology.discovered));
    if (key === this.key) return false;
    this.key = key;
    const svg = this.svg;
    // keep the keyboard where it was across a rebuild (a new inner node appeared mid-turn)
    const active = typeof document !== 'undefined' ? document.activeElement : null;
    const focused = active && svg.contains(active) ? active.dataset.node ?? active.dataset.subnode : undefined;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    this.nodes.clear();
    this.inner.clear();
    this.edges = [];
    const l = layoutGraph(topology, { direction, groups });
    this.layout = l;
    svg.dataset.direction = l.direction || direction;
    svg.dataset.empty = l.nodes.length ? 'false' : 'true'; // nothing to draw: no box of the graph's size
    if (!l.nodes.length) {
      svg.setAttribute('viewBox', '0 0 10 10');
      svg.setAttribute('width', '0');
      svg.setAttribute('height', '0');
      return true;
    }
    svg.setAttribute('viewBox', `0 0 ${l.width} ${l.height}`);
    svg.setAttribute('width', String(Math.ceil(l.width)));
    svg.setAttribute('height', String(Math.ceil(l.height)));
    svg.style.setProperty('--graph-w', `${Math.ceil(l.width)}px`);

    const defs = el('defs', {}, svg);
    for (const kind of ['idle', 'taken']) {
      const m = el('marker', { id: `arrow-${kind}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, defs);
      el('path', { d: 'M 0 1 L 9 5 L 0 9 z', class: `arrowhead arrowhead-${kind}` }, m);
    }

    const edgeLayer = el('g', { class: 'edges', 'aria-hidden': 'true' }, svg);
    for (const e of l.edges) {
      const cls = ['edge', e.conditional ? 'edge-conditional' : 'edge-direct', e.back ? 'edge-back' : ''].join(' ').trim();
      const path = el('path', { d: e.path, class: cls, 'marker-end': 'url(#arrow-idle)' }, edgeLayer);
      path.dataset.edge = `${e.source}->${e.target}`;
      this.edges.push({ path, source: e.source, target: e.target });
    }

    const nodeLayer = el('g', { class: 'nodes', role: 'list', 'aria-label': 'Graph nodes' }, svg);
    for (const n of l.nodes) {
      const cls = ['node', n.terminal ? 'node-terminal' : '', n.discovered ? 'node-discovered' : '', n.inner.length ? 'node-group' : ''].filter(Boolean).join(' ');
      const g = el('g', { class: cls, transform: `translate(${n.x} ${n.y})`, role: 'listitem' }, nodeLayer);
      g.dataset.node = n.id;
      g.dataset.state = 'idle';
      const title = el('title', {}, g);
      const rec = { g, title, layout: n };
      if (n.terminal) {
        const r = n.width / 2;
        rec.box = el('circle', { class: 'node-box', cx: r, cy: r, r: r - 1 }, g);
        const t = el('text', { class: 'terminal-glyph', x: r, y: r + 4, 'text-anchor': 'middle' }, g);
        t.textContent = n.id === '__start__' ? '▶' : '■';
        const cap =
          l.direction === 'TB'
            ? el('text', { class: 'terminal-caption', x: n.width + 8, y: r + 4, 'text-anchor': 'start' }, g)
            : el('text', { class: 'terminal-caption', x: r, y: n.height + 14, 'text-anchor': 'middle' }, g);
        cap.textContent = n.id === '__start__' ? 'start' : 'end';
      } else {
        g.setAttribute('tabindex', '0');
        rec.box = el('rect', { class: 'node-box', x: 0.5, y: 0.5, width: n.width - 1, height: n.height - 1, rx: 10 }, g);
        const label = el('text', { class: 'node-label', x: 12, y: 22 }, g);
        label.textContent = n.label;
        rec.label = label;
        rec.status = el('text', { class: 'node-status', x: 12, y: 40 }, g);
        rec.icon = el('g', { class: 'node-icon', transform: `translate(${n.width - 19} 36)` }, g);
        el('circle', { r: 8, class: 'node-icon-bg' }, rec.icon);
        rec.iconText = el('text', { class: 'node-icon-text', y: 3.5, 'text-anchor': 'middle' }, rec.icon);
        el('rect', { class: 'node-pause', x: -3.5, y: -4, width: 2.4, height: 8, rx: 0.6 }, rec.icon);
        el('rect', { class: 'node-pause', x: 1.1, y: -4, width: 2.4, height: 8, rx: 0.6 }, rec.icon);
        rec.spinner = el('path', { class: 'node-spinner', d: 'M 0 -8 A 8 8 0 0 1 8 0' }, rec.icon);
        // Instance count (parallel or repeated runs of this node): a pill on the top-right corner.
        rec.badgeG = el('g', { class: 'node-badge', transform: `translate(${n.width - 14} 0)`, display: 'none' }, g);
        el('rect', { class: 'node-badge-bg', x: -16, y: -9, width: 32, height: 18, rx: 9 }, rec.badgeG);
        rec.badge = el('text', { class: 'node-badge-text', x: 0, y: 4, 'text-anchor': 'middle' }, rec.badgeG);
        rec.track = el('rect', { class: 'lat-track', x: 10, y: n.headHeight - 11, width: n.width - 20, height: 5, rx: 2.5 }, g);
        rec.bars = el('g', { class: 'lat-bars' }, g);
        if (n.inner.length) this._drawGroup(g, n, (groups && groups.get(n.id)) || []);
        g.addEventListener('click', () => this.onSelect(n.id));
        g.addEventListener('focus', () => this.onSelect(n.id));
        g.addEventListener('keydown', (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            this.onSelect(n.id);
          }
        });
      }
      this.nodes.set(n.id, rec);
    }
    for (const rec of this.nodes.values()) if (rec.label) fitText(rec.label, rec.layout.width - 22);
    for (const rec of this.inner.values()) fitText(rec.label, rec.width - 64 - rec.indent);
    if (focused !== undefined) {
      const again = this.nodes.get(focused) || this.inner.get(focused);
      if (again && again.g.hasAttribute('tabindex')) again.g.focus({ preventScroll: true });
    }
    return true;
  }

  /** A subgraph's inner nodes, one row each, inside the parent's box (under its status line). */
  _drawGroup(g, n, entries) {
    const rows = n.inner;
    const lane = el('g', { class: 'subnodes', role: 'list', 'aria-label': `Inside ${n.label}` }, g);
    el('line', { class: 'subnodes-sep', x1: 8, x2: n.width - 8, y1: n.headHeight - 2, y2: n.headHeight - 2 }, lane);
    const more = entries.length > rows.length ? entries.length - rows.length + 1 : 0;
    rows.forEach((row, k) => {
      if (more && k === rows.length - 1) {
        const t = el('text', { class: 'subnode-more', x: row.x + 6, y: row.y + 15 }, lane);
        t.textContent = `+ ${more} more inside (select ${n.label})`;
        return;
      }
      const entry = entries[k];
      if (!entry) return;
      const indent = Math.min(entry.depth, 3) * 10;
      const sg = el('g', { class: 'subnode', transform: `translate(${row.x + indent} ${row.y})`, role: 'listitem', tabindex: 0 }, lane);
      sg.dataset.subnode = entry.key;
      sg.dataset.parent = n.id;
      sg.dataset.state = 'idle';
      const title = el('title', {}, sg);
      const w = row.width - indent;
      el('rect', { class: 'subnode-box', x: 0.5, y: 0.5, width: w - 1, height: row.height - 1, rx: 6 }, sg);
      el('circle', { class: 'subnode-dot', cx: 10, cy: row.height / 2, r: 4 }, sg);
      const label = el('text', { class: 'subnode-label', x: 20, y: row.height / 2 + 4 }, sg);
      label.textContent = entry.label;
      const status = el('text', { class: 'subnode-status', x: w - 6, y: row.height / 2 + 4, 'text-anchor': 'end' }, sg);
      const select = (ev) => {
        ev.stopPropagation();
        this.onSelect(entry.key);
      };
      sg.addEventListener('click', select);
      sg.addEventListener('focus', () => this.onSelect(entry.key));
      sg.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          select(ev);
        }
      });
      this.inner.set(entry.key, { g: sg, title, label, status, entry, width: row.width, indent, parent: n.id });
    });
  }

  /** Bring every node and edge up to date with the model. */
  update(model, selected = null) {
    for (const [id, rec] of this.nodes) {
      const state = model.nodeState(id);
      const inst = model.nodeInstances(id);
      rec.g.dataset.state = state;
      rec.g.dataset.instances = String(inst.length);
      rec.g.classList.toggle('selected', selected === id);
      const label = rec.layout.label;
      if (rec.layout.terminal) {
        rec.title.textContent = `${id === '__start__' ? 'Start' : 'End'}: ${STATE_TEXT[state]}`;
        continue;
      }
      const last = inst[inst.length - 1];
      let statusText;
      const durations = inst.map((i) => i.durationMs).filter((d) => typeof d === 'number');
      const progress = latestProgress(inst);
      if (progress && state === 'running') rec.g.dataset.progress = progress.text;
      else delete rec.g.dataset.progress;
      if (state === 'running' && progress) statusText = progress.text;
      else if (state === 'running') statusText = inst.length > 1 ? `running · ${inst.filter((i) => i.state === 'running').length} of ${inst.length}` : 'running…';
      else if (state === 'idle') statusText = 'waiting';
      else if (state === 'skipped') statusText = 'skipped';
      else if (inst.length > 1) statusText = `${STATE_TEXT[state]} · ${formatMs(Math.max(...durations))} max`;
      else if (last && typeof last.durationMs === 'number') statusText = `${STATE_TEXT[state]} · ${formatMs(last.durationMs)}`;
      else statusText = STATE_TEXT[state];
      if (rec.status.dataset.full !== statusText) {
        rec.status.dataset.full = statusText;
        rec.status.textContent = statusText;
        fitText(rec.status, rec.layout.width - 40);
      }
      rec.iconText.textContent = STATE_ICON[state] || '';
      rec.badge.textContent = inst.length > 1 ? `×${inst.length}` : '';
      rec.badgeG.setAttribute('display', inst.length > 1 ? 'inline' : 'none');
      const aria = [`${label}: ${STATE_TEXT[state]}`];
      if (inst.length > 1) aria.push(`${inst.length} runs: ${inst.map((i) => `${STATE_TEXT[i.state]} ${formatMs(i.durationMs)}`).join(', ')}`);
      else if (last && typeof last.durationMs === 'number') aria.push(formatMs(last.durationMs));
      if (progress) aria.push(`${state === 'running' ? 'progress' : 'last progress'}: ${progress.text}`);
      if (rec.layout.discovered) aria.push('not in the graph’s topology (seen in its events)');
      rec.g.setAttribute('aria-label', aria.join(', '));
      rec.title.textContent = label === id ? aria.join(', ') : `${id} — ${aria.join(', ')}`;

      // Latency bar: one segment per instance, coloured by the latency scale.
      while (rec.bars.firstChild) rec.bars.removeChild(rec.bars.firstChild);
      const w = rec.layout.width - 20;
      const gap = 2;
      const segW = inst.length ? (w - gap * (inst.length - 1)) / inst.length : 0;
      inst.forEach((i, k) => {
        const bin = latencyBin(i.durationMs);
        const cls = i.state === 'running' ? 'lat-running' : bin >= 0 ? LATENCY_BINS[bin].cls : 'lat-none';
        const seg = el('rect', { class: `lat-seg ${cls}`, x: 10 + k * (segW + gap), y: rec.layout.headHeight - 11, width: Math.max(segW, 1), height: 5, rx: 2.5 }, rec.bars);
        seg.dataset.instanceState = i.state;
        if (i.state === 'running' && i.progress && i.progress.fraction !== null) {
          // the node's own progress: a bar filled to the fraction over its running segment
          const bar = el('rect', { class: 'node-progress', x: 10 + k * (segW + gap), y: rec.layout.headHeight - 11, width: Math.max(segW * i.progress.fraction, 0), height: 5, rx: 2.5 }, rec.bars);
          bar.dataset.fraction = String(i.progress.fraction);
        }
        const t = el('title', {}, seg);
        t.textContent = `${label} #${k + 1}: ${STATE_TEXT[i.state]}${typeof i.durationMs === 'number' ? ' · ' + formatMs(i.durationMs) : ''}`;
      });
    }
    for (const [key, rec] of this.inner) {
      const { node, namespace } = rec.entry;
      const state = model.nodeState(node, namespace);
      const inst = model.nodeInstances(node, namespace);
      rec.g.dataset.state = state;
      rec.g.dataset.instances = String(inst.length);
      rec.g.classList.toggle('selected', selected === key);
      const last = inst[inst.length - 1];
      const count = inst.length > 1 ? `×${inst.length} ` : '';
      const progress = latestProgress(inst);
      const status = state === 'running' && progress ? `${count}${progress.text}` : state === 'running' ? `${count}running` : last && typeof last.durationMs === 'number' ? `${count}${formatMs(last.durationMs)}` : `${count}${STATE_TEXT[state]}`;
      rec.status.textContent = status;
      const aria = `${pathLabel(rec.entry)}: ${STATE_TEXT[state]}${inst.length > 1 ? `, ${inst.length} runs` : ''}${last && typeof last.durationMs === 'number' ? `, ${formatMs(last.durationMs)}` : ''}`;
      rec.g.setAttribute('aria-label', aria);
      rec.title.textContent = aria;
    }
    for (const e of this.edges) {
      const taken = model.edgeTaken(e.source, e.target);
      const dead = model.terminal && !taken;
      e.path.classList.toggle('edge-taken', taken);
      e.path.classList.toggle('edge-dead', !!dead);
      e.path.setAttribute('marker-end', taken ? 'url(#arrow-taken)' : 'url(#arrow-idle)');
    }
  }
}

/** The latest progress of a node's instances: the running one's, else the last one's. */
function latestProgress(instances) {
  const running = instances.filter((i) => i.state === 'running' && i.progress);
  if (running.length) return running[running.length - 1].progress;
  const any = instances.filter((i) => i.progress);
  return any.length ? any[any.length - 1].progress : null;
}
