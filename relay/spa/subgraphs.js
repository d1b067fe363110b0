// What the graph draws, from the topology and the node instances seen in events:
//
//  - every top-level node of the topology;
//  - top-level nodes seen in events but missing from it (a graph without a topology, a
//    foreign run's discovered nodes, a node the topology did not list): drawn, never dropped;
//  - the inner nodes of compiled subgraphs (a non-empty `namespace`: the enclosing node names,
//    outermost first), grouped under their top-level node, nested by their path.
//
// Pure data; the layout makes room for the groups, the view draws them.

/** A node's key: its id at the top level, else its path as JSON (unambiguous, never an id). */
export function nodeKey(namespace, node) {
  return Array.isArray(namespace) && namespace.length ? JSON.stringify([...namespace.map(String), String(node)]) : String(node);
}

function nsOf(inst) {
  return Array.isArray(inst.namespace) ? inst.namespace.map(String) : [];
}

/**
 * @returns {{topology: {graph_id, nodes, edges, discovered?}, groups: Map<string, Array<{key, node, namespace, path,
 *   label, depth}>>, discovered: string[]}}
 *   groups: per top-level node, its inner nodes depth first (an inner subgraph's nodes right after
 *   the node that holds them), siblings in the order they first started; `depth` is 0 for a direct
 *   child of the top-level node.
 */
export function drawnGraph(topology, instances) {
  const topo = topology && typeof topology === 'object' ? topology : null;
  const nodes = topo && Array.isArray(topo.nodes) ? topo.nodes.slice() : [];
  const edges = topo && Array.isArray(topo.edges) ? topo.edges : [];
  const known = new Set();
  for (const n of nodes) known.add(String(n && typeof n === 'object' ? n.id : n));
  for (const e of edges) if (e) known.add(String(e.source)).add(String(e.target));
  const discovered = [];
  const trees = new Map(); // top-level id -> {kids: Map(name -> tree node)}
  for (const inst of Array.isArray(instances) ? instances : []) {
    if (!inst || inst.node === undefined || inst.node === null) continue;
    const ns = nsOf(inst);
    const top = ns.length ? ns[0] : String(inst.node);
    if (!known.has(top)) {
      known.add(top);
      discovered.push(top);
    }
    if (!ns.length) continue;
    if (!trees.has(top)) trees.set(top, { kids: new Map() });
    // walk the path below the top-level node: ns[1..] then the node itself
    let at = trees.get(top);
    const path = [...ns.slice(1), String(inst.node)];
    path.forEach((name, i) => {
      if (!at.kids.has(name)) at.kids.set(name, { kids: new Map(), entry: null });
      at = at.kids.get(name);
      if (i === path.length - 1 && !at.entry) {
        at.entry = { key: nodeKey(ns, inst.node), node: String(inst.node), namespace: ns, path, label: String(inst.node), depth: path.length - 1 };
      }
    });
  }
  const groups = new Map();
  for (const [top, tree] of trees) {
    const list = [];
    const walk = (t) => {
      for (const kid of t.kids.values()) {
        if (kid.entry) list.push(kid.entry);
        walk(kid);
      }
    };
    walk(tree);
    groups.set(top, list);
  }
  for (const id of discovered) nodes.push({ id, label: id, discovered: true });
  // `discovered` on the topology: the whole graph is what the spans showed so far (no topology
  // was sent); `discovered` of the result: the nodes this drawing adds to the topology.
  const drawn = { graph_id: topo ? topo.graph_id ?? null : null, nodes, edges };
  if (topo && topo.discovered) drawn.discovered = true;
  return { topology: drawn, groups, discovered };
}

/** The label of an inner node with its enclosing nodes: "research › agent › tools". */
export function pathLabel(entry) {
  return [...entry.namespace, entry.node].join(' › ');
}
