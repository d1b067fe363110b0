// The details line under the graph: what the selected node (a top-level one, or a subgraph's
// inner one) did in this turn, instance by instance. DOM text only.

import { formatMs, STATE_TEXT } from './format.js';
import { pathLabel } from './subgraphs.js';

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

/** The selected key in what is drawn: {title, node, namespace, inner} or null. */
export function findSelected(drawn, key) {
  if (!key || !drawn) return null;
  for (const list of drawn.groups.values()) {
    const entry = list.find((e) => e.key === key);
    if (entry) return { title: pathLabel(entry), node: entry.node, namespace: entry.namespace, inner: [] };
  }
  const node = drawn.topology.nodes.find((n) => String(n.id) === key);
  return { title: node && node.label ? node.label : key, node: key, namespace: [], inner: drawn.groups.get(key) || [] };
}

function facts(i, k, count) {
  const out = [];
  if (count > 1) out.push(`#${k + 1}`);
  out.push(`${STATE_TEXT[i.state]}${typeof i.durationMs === 'number' ? ' in ' + formatMs(i.durationMs) : ''}`);
  const s = i.summary || {};
  if (s.model) out.push(`model ${s.model}`);
  if (typeof s.input_tokens === 'number' || typeof s.output_tokens === 'number') out.push(`${s.input_tokens ?? '?'} → ${s.output_tokens ?? '?'} tokens`);
  if (typeof s.documents === 'number') out.push(`${s.documents} document${s.documents === 1 ? '' : 's'} retrieved`);
  else if (Array.isArray(s.documents)) out.push(`${s.documents.length} documents retrieved`);
  if (s.guardrail && typeof s.guardrail === 'object') out.push(`guardrail ${s.guardrail.name || ''} ${s.guardrail.decision || ''}${s.guardrail.reason ? ' (' + s.guardrail.reason + ')' : ''}`.replace(/\s+/g, ' '));
  if (Array.isArray(s.tools) && s.tools.length) out.push(`tools: ${s.tools.join(', ')}`);
  return out.join(' · ');
}

export function renderDetails(box, model, drawn, key) {
  const sel = findSelected(drawn, key);
  if (!sel) {
    box.replaceChildren(h('span', 'muted', 'Select a node (click, or Tab to it) to see what it did.'));
    return;
  }
  const state = model.nodeState(sel.node, sel.namespace);
  const frag = document.createDocumentFragment();
  frag.appendChild(h('strong', 'details-title', sel.title));
  frag.appendChild(h('span', `state-pill state-${state}`, STATE_TEXT[state]));
  const inst = model.nodeInstances(sel.node, sel.namespace);
  inst.forEach((i, k) => frag.appendChild(h('span', 'details-fact', facts(i, k, inst.length))));
  if (sel.inner.length) {
    const inner = sel.inner.map((e) => `${pathLabel(e)} (${STATE_TEXT[model.nodeState(e.node, e.namespace)]})`);
    frag.appendChild(h('span', 'details-fact', `inside: ${inner.join(', ')}`));
  }
  if (!inst.length) frag.appendChild(h('span', 'details-fact muted', state === 'skipped' ? 'This turn never reached it.' : 'Not run yet in this turn.'));
  box.replaceChildren(frag);
}
