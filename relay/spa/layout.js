// A small layered (Sugiyama-style) layout for a left-to-right pipeline drawing.
//
//   1. cycle removal: a DFS from the entry nodes marks back edges (drawn as loops under the graph)
//   2. layering: longest path from the sources over the remaining DAG
//   3. long edges are split by dummy points, one per layer they cross
//   4. ordering within a layer: barycenter sweeps, keeping the order with the fewest crossings
//   5. coordinates: x by layer, y by order, each layer centred
//
// Nodes without any edge (seen only in events) follow one another when nothing has edges, else
// share a layer after the rest. A node with a group (the inner nodes of its subgraph) is taller:
// one row per inner node, under its own status line.
//
// It knows nothing of any particular graph: any topology {nodes[{id,label}], edges[{source,target,conditional}]}.

export const DEFAULTS = {
  direction: 'LR', // 'LR' (left to right) or 'TB' (top to bottom, for narrow screens)
  nodeWidth: 168,
  nodeHeight: 58,
  terminalSize: 30, // __start__ / __end__ are drawn as small circles
  dummyHeight: 14,
  layerGap: 44,
  rowGap: 22,
  padding: 18,
  loopGap: 26, // room below the graph for each back edge
  groups: null, // Map or object: node id -> its inner nodes (an array) or their count
  subRowHeight: 22, // one inner node's row inside its parent
  subRowGap: 4,
  subPad: 8,
  maxSubRows: 8, // beyond this the last row stands for the rest ("+ N more")
};

export function isTerminal(id) {
  return id === '__start__' || id === '__end__';
}

/** Normalise a topology: unique node ids in first-seen order, edges whose ends exist. */
export function normalizeTopology(topology) {
  const nodes = [];
  const seen = new Map();
  const add = (id, label, discovered = false) => {
    if (id === undefined || id === null) return;
    id = String(id);
    if (!seen.has(id)) {
      const n = { id, label: label == null || label === '' ? id : String(label) };
      if (discovered) n.discovered = true;
      seen.set(id, n);
      nodes.push(n);
    }
  };
  for (const n of (topology && topology.nodes) || []) {
    if (n && typeof n === 'object') add(n.id, n.label, !!n.discovered);
    else add(n, n);
  }
  const edges = [];
  const edgeKeys = new Set();
  for (const e of (topology && topology.edges) || []) {
    if (!e) continue;
    add(e.source, e.source);
    add(e.target, e.target);
    const key = `${e.source}\u0000${e.target}`;
    if (edgeKeys.has(key)) continue;
    edgeKeys.add(key);
    edges.push({ source: String(e.source), target: String(e.target), conditional: !!e.conditional });
  }
  return { nodes, edges };
}

/** Mark back edges so that the rest is acyclic. Self loops are back edges too. */
export function findBackEdges(nodes, edges) {
  const out = new Map(nodes.map((n) => [n.id, []]));
  edges.forEach((e, i) => out.get(e.source).push(i));
  const indeg = new Map(nodes.map((n) => [n.id, 0]));
  for (const e of edges) if (e.source !== e.target) indeg.set(e.target, indeg.get(e.target) + 1);
  const state = new Map(); // undefined = new, 1 = on stack, 2 = done
  const back = new Set();
  // Roots: __start__ first, then sources, then everything else (for cycles with no source).
  const roots = [];
  if (indeg.has('__start__')) roots.push('__start__');
  for (const n of nodes) if (indeg.get(n.id) === 0 && n.id !== '__start__') roots.push(n.id);
  for (const n of nodes) roots.push(n.id);
  for (const root of roots) {
    if (state.get(root)) continue;
    // iterative DFS
    const stack = [[root, 0]];
    state.set(root, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, k] = top;
      const list = out.get(v);
      if (k < list.length) {
        top[1]++;
        const ei = list[k];
        const w = edges[ei].target;
        const s = state.get(w);
        if (s === 1) back.add(ei);
        else if (!s) {
          state.set(w, 1);
          stack.push([w, 0]);
        }
      } else {
        state.set(v, 2);
        stack.pop();
      }
    }
  }
  return back;
}

/**
 * Layers for nodes that no edge touches: one after another (the entry first, the exit last)
 * when no node has an edge, else all in one layer after the others. Changes `layer` in place.
 */
export function placeIsolated(nodes, edges, layer) {
  const linked = new Set();
  for (const e of edges) linked.add(e.source).add(e.target);
  const rank = (n) => (n.id === '__start__' ? -1 : n.id === '__end__' ? 1 : 0);
  const isolated = nodes.filter((n) => !linked.has(n.id)).sort((a, b) => rank(a) - rank(b));
  if (!isolated.length) return layer;
  if (!linked.size) {
    isolated.forEach((n, i) => layer.set(n.id, i));
    return layer;
  }
  let max = 0;
  for (const id of linked) max = Math.max(max, layer.get(id));
  for (const n of isolated) layer.set(n.id, max + 1);
  return layer;
}

/** How many rows a node's group takes (0 without a group), at most maxSubRows. */
export function groupRows(groups, id, maxSubRows = DEFAULTS.maxSubRows) {
  if (!groups) return 0;
  const g = groups instanceof Map ? groups.get(id) : Object.prototype.hasOwnProperty.call(groups, id) ? groups[id] : undefined;
  const n = Array.isArray(g) ? g.length : typeof g === 'number' && g > 0 ? Math.floor(g) : 0;
  return Math.min(n, maxSubRows);
}

/** Longest-path layering over forward edges. Returns Map id -> layer. */
export function assignLayers(nodes, edges, back) {
  const layer = new Map(nodes.map((n) => [n.id, 0]));
  const indeg = new Map(nodes.map((n) => [n.id, 0]));
  const out = new Map(nodes.map((n) => [n.id, []]));
  edges.forEach((e, i) => {
    if (back.has(i)) return;
    out.get(e.source).push(e.target);
    indeg.set(e.target, indeg.get(e.target) + 1);
  });
  const queue = nodes.filter((n) => indeg.get(n.id) === 0).map((n) => n.id);
  let qi = 0;
  while (qi < queue.length) {
    const v = queue[qi++];
    for (const w of out.get(v)) {
      layer.set(w, Math.max(layer.get(w), layer.get(v) + 1));
      indeg.set(w, indeg.get(w) - 1);
      if (indeg.get(w) === 0) queue.push(w);
    }
  }
  // The exit node belongs in the last layer, whatever path reaches it.
  if (layer.has('__end__')) {
    let max = 0;
    for (const [id, l] of layer) if (id !== '__end__') max = Math.max(max, l);
    const preds = edges.filter((e, i) => !back.has(i) && e.target === '__end__');
    if (preds.length) layer.set('__end__', Math.max(layer.get('__end__'), max + 1));
  }
  return layer;
}

function countCrossings(layers, adjacency) {
  // adjacency: Map id -> array of ids in the next layer
  let total = 0;
  for (let l = 0; l + 1 < layers.length; l++) {
    const pos = new Map(layers[l + 1].map((id, i) => [id, i]));
    const segs = [];
    layers[l].forEach((id, i) => {
      for (const t of adjacency.get(id) || []) if (pos.has(t)) segs.push([i, pos.get(t)]);
    });
    for (let a = 0; a < segs.length; a++)
      for (let b = a + 1; b < segs.length; b++) {
        const [a1, a2] = segs[a];
        const [b1, b2] = segs[b];
        if ((a1 - b1) * (a2 - b2) < 0) total++;
      }
  }
  return total;
}

/**
 * Lay a topology out. Returns
 * {nodes:[{id,label,terminal,layer,order,x,y,width,height}], edges:[{source,target,conditional,back,points,path}],
 *  width, height, direction, crossings}. Coordinates are SVG user units; (x, y) is a node's top-left corner.
 */
export function layoutGraph(topology, options = {}) {
  const o = { ...DEFAULTS, ...options };
  const { nodes, edges } = normalizeTopology(topology);
  if (!nodes.length) return { nodes: [], edges: [], width: 0, height: 0 };
  const back = findBackEdges(nodes, edges);
  const layerOf = placeIsolated(nodes, edges, assignLayers(nodes, edges, back));
  const nLayers = Math.max(...layerOf.values()) + 1;

  // Build the layered graph with dummy nodes on long edges.
  const vnodes = new Map(); // id -> {id, dummy, layer}
  for (const n of nodes) vnodes.set(n.id, { id: n.id, dummy: false, layer: layerOf.get(n.id) });
  const next = new Map(); // id -> [ids in layer+1]
  const prev = new Map();
  const link = (a, b) => {
    if (!next.has(a)) next.set(a, []);
    if (!prev.has(b)) prev.set(b, []);
    next.get(a).push(b);
    prev.get(b).push(a);
  };
  const chains = []; // per edge: the virtual node ids it passes through (source ... target)
  edges.forEach((e, i) => {
    if (back.has(i) || e.source === e.target) {
      chains.push(null);
      return;
    }
    const ls = layerOf.get(e.source);
    const lt = layerOf.get(e.target);
    const chain = [e.source];
    let last = e.source;
    for (let l = ls + 1; l < lt; l++) {
      const id = `\u0000d${i}:${l}`;
      vnodes.set(id, { id, dummy: true, layer: l });
      link(last, id);
      chain.push(id);
      last = id;
    }
    link(last, e.target);
    chain.push(e.target);
    chains.push(chain);
  });

  // Initial order: first-seen order (DFS-ish from topology order), dummies after their source.
  let layers = Array.from({ length: nLayers }, () => []);
  for (const n of nodes) layers[layerOf.get(n.id)].push(n.id);
  for (const v of vnodes.values()) if (v.dummy) layers[v.layer].push(v.id);
  // Seed order by a BFS from layer 0 so connected nodes start near each other.
  for (let l = 1; l < nLayers; l++) sortByBarycenter(layers, l, prev, l - 1);

  let best = layers.map((l) => l.slice());
  let bestCross = countCrossings(best, next);
  for (let iter = 0; iter < 8 && bestCross > 0; iter++) {
    if (iter % 2 === 0) for (let l = 1; l < nLayers; l++) sortByBarycenter(layers, l, prev, l - 1);
    else for (let l = nLayers - 2; l >= 0; l--) sortByBarycenter(layers, l, next, l + 1);
    const c = countCrossings(layers, next);
    if (c < bestCross) {
      bestCross = c;
      best = layers.map((l) => l.slice());
    }
  }
  layers = best;

  // Coordinates, first on abstract axes: r along the flow (rank), c across it.
  // direction 'LR': x = r, y = c (left to right); 'TB': x = c, y = r (top to bottom).
  const tb = o.direction === 'TB';
  const rowsOf = (id) => (isTerminal(id) ? 0 : groupRows(o.groups, id, o.maxSubRows));
  const laneHeight = (rows) => (rows ? 2 + rows * o.subRowHeight + (rows - 1) * o.subRowGap + o.subPad : 0);
  const sizeOf = (id) => {
    const v = vnodes.get(id);
    if (v.dummy) return { r: 0, c: o.dummyHeight };
    if (isTerminal(id)) return { r: o.terminalSize, c: o.terminalSize };
    const height = o.nodeHeight + laneHeight(rowsOf(id));
    return tb ? { r: height, c: o.nodeWidth } : { r: o.nodeWidth, c: height };
  };
  const layerDepth = layers.map((ids) => Math.max(o.terminalSize, ...ids.map((id) => sizeOf(id).r)));
  const layerSpan = layers.map((ids) => ids.reduce((acc, id, k) => acc + sizeOf(id).c + (k ? o.rowGap : 0), 0));
  const contentC = Math.max(...layerSpan, tb ? o.nodeWidth : o.nodeHeight);
  const pos = new Map(); // abstract: {r, c, rs, cs, layer, order}
  let r = o.padding;
  layers.forEach((ids, l) => {
    let c = o.padding + (contentC - layerSpan[l]) / 2;
    ids.forEach((id, k) => {
      const sz = sizeOf(id);
      pos.set(id, { r: r + (layerDepth[l] - sz.r) / 2, c, rs: sz.r, cs: sz.c, layer: l, order: k });
      c += sz.c + o.rowGap;
    });
    r += layerDepth[l] + o.layerGap;
  });
  const extentR = r - o.layerGap + o.padding;
  const baseC = contentC + 2 * o.padding;
  const toXY = (pr, pc) => (tb ? { x: pc, y: pr } : { x: pr, y: pc });

  const outNodes = nodes.map((n) => {
    const p = pos.get(n.id);
    const xy = toXY(p.r, p.c);
    const width = tb ? p.cs : p.rs;
    const out = {
      id: n.id,
      label: n.label,
      terminal: isTerminal(n.id),
      layer: p.layer,
      order: p.order,
      x: xy.x,
      y: xy.y,
      width,
      height: tb ? p.rs : p.cs,
      headHeight: isTerminal(n.id) ? (tb ? p.rs : p.cs) : o.nodeHeight, // the part above the group
      inner: [], // the group's rows, relative to the node's corner
    };
    if (n.discovered) out.discovered = true;
    const rows = rowsOf(n.id);
    for (let k = 0; k < rows; k++) out.inner.push({ x: 8, y: o.nodeHeight + 2 + k * (o.subRowHeight + o.subRowGap), width: width - 16, height: o.subRowHeight });
    return out;
  });

  const mid = (id) => {
    const p = pos.get(id);
    return { r: p.r + p.rs / 2, c: p.c + p.cs / 2 };
  };
  let loops = 0;
  const outEdges = edges.map((e, i) => {
    const isBack = back.has(i);
    const s = pos.get(e.source);
    const t = pos.get(e.target);
    let abstract;
    let path;
    if (!isBack) {
      abstract = [{ r: s.r + s.rs, c: s.c + s.cs / 2 }];
      for (const id of chains[i].slice(1, -1)) abstract.push(mid(id));
      abstract.push({ r: t.r, c: t.c + t.cs / 2 });
      const points = abstract.map((a) => toXY(a.r, a.c));
      path = smoothPath(points, tb ? 'vertical' : 'horizontal');
      return { source: e.source, target: e.target, conditional: e.conditional, back: false, points, path };
    }
    // A back edge loops beyond the content, across the flow: below (LR) or to the right (TB).
    loops++;
    const low = baseC - o.padding + loops * o.loopGap - o.loopGap / 3;
    const sr = s.r + s.rs / 2;
    const tr = t.r + t.rs / 2;
    abstract = [
      { r: sr, c: s.c + s.cs },
      { r: sr, c: low },
      { r: tr, c: low },
      { r: tr, c: t.c + t.cs },
    ];
    const rad = Math.min(14, Math.abs(sr - tr) / 2 || 14);
    const dir = tr < sr ? -1 : 1;
    const P = (pr, pc) => {
      const q = toXY(pr, pc);
      return `${f(q.x)} ${f(q.y)}`;
    };
    path =
      `M ${P(sr, s.c + s.cs)} L ${P(sr, low - rad)} Q ${P(sr, low)} ${P(sr + dir * rad, low)} ` +
      `L ${P(tr - dir * rad, low)} Q ${P(tr, low)} ${P(tr, low - rad)} L ${P(tr, t.c + t.cs)}`;
    const points = abstract.map((a) => toXY(a.r, a.c));
    return { source: e.source, target: e.target, conditional: e.conditional, back: true, points, path };
  });
  const extentC = baseC + (loops ? loops * o.loopGap : 0);
  return {
    nodes: outNodes,
    edges: outEdges,
    width: tb ? extentC : extentR,
    height: tb ? extentR : extentC,
    direction: tb ? 'TB' : 'LR',
    crossings: bestCross,
  };
}

function sortByBarycenter(layers, l, neighbours, otherLayer) {
  const pos = new Map(layers[otherLayer].map((id, i) => [id, i]));
  const current = new Map(layers[l].map((id, i) => [id, i]));
  const bary = new Map();
  for (const id of layers[l]) {
    const ns = (neighbours.get(id) || []).filter((n) => pos.has(n));
    bary.set(id, ns.length ? ns.reduce((a, n) => a + pos.get(n), 0) / ns.length : current.get(id));
  }
  // Stable sort: ties keep their current order.
  layers[l].sort((a, b) => bary.get(a) - bary.get(b) || current.get(a) - current.get(b));
}

function f(n) {
  return Math.round(n * 10) / 10;
}

/** A smooth path through points, with tangents along the flow ('horizontal' or 'vertical'). */
export function smoothPath(points, tangent = 'horizontal') {
  let d = `M ${f(points[0].x)} ${f(points[0].y)}`;
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1];
    const b = points[i];
    if (tangent === 'vertical') {
      const dy = (b.y - a.y) / 2;
      d += ` C ${f(a.x)} ${f(a.y + dy)} ${f(b.x)} ${f(b.y - dy)} ${f(b.x)} ${f(b.y)}`;
    } else {
      const dx = (b.x - a.x) / 2;
      d += ` C ${f(a.x + dx)} ${f(a.y)} ${f(b.x - dx)} ${f(b.y)} ${f(b.x)} ${f(b.y)}`;
    }
  }
  return d;
}
