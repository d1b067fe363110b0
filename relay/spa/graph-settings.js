// What the page says about the graph it serves, from GET /graphs/{name}: the page title, the
// header, the description, the example chips and the composer's wording; and the picker when
// a server serves several graphs. DOM text only; the server supplies every word about a graph.

const BRAND = 'span-relay';

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

/**
 * @param ui {subtitle, description, emptyText, suggestions, composer, input, inputLabel, watch?, chatTitle?}
 * @param graph the normalised graph (graphs.js), or null when the server serves none
 * @param mode 'chat' (a graph to talk to), 'watch' (a relay-only server: no graph, turns only),
 *   'auth' (a token is needed first) or 'none' (the graphs could not be loaded)
 * @param onExample (text) => void, when a chip is clicked
 */
export function applyGraphSettings(ui, graph, { onExample, mode = 'chat' } = {}) {
  const title = graph && graph.title ? graph.title : null;
  const watchOnly = mode === 'watch';
  document.title = title ? `${title} · ${BRAND}` : `${BRAND} · Agent Execution Graph`;
  ui.subtitle.textContent = watchOnly ? 'watching turns' : title ? `${title} · live execution` : 'live execution';
  ui.description.textContent = (graph && graph.description) || '';
  ui.description.hidden = !(graph && graph.description);
  ui.composer.hidden = mode !== 'chat';
  // no graph to talk to (a relay-only server): no message box; the turns its agents send instead
  if (ui.watch) ui.watch.hidden = !watchOnly;
  if (ui.chatTitle) ui.chatTitle.textContent = watchOnly ? 'Turns' : 'Chat';
  ui.inputLabel.textContent = title ? `Message to ${title}` : 'Message to the agent';
  ui.input.placeholder = title ? `Message ${title}…` : 'Write a message…';
  const chips = [];
  for (const text of (graph && graph.examples) || []) {
    const chip = h('button', 'chip', text);
    chip.type = 'button';
    chip.dataset.suggest = text;
    chip.title = 'Send this example message';
    chip.addEventListener('click', () => onExample && onExample(text));
    chips.push(chip);
  }
  ui.suggestions.replaceChildren(...chips);
  ui.suggestions.hidden = !chips.length;
  if (mode === 'auth') {
    ui.emptyText.textContent = 'This server needs an API token: enter it above.';
  } else if (mode === 'none') {
    ui.emptyText.textContent = 'The graph could not be loaded (the note above says why). Turns can still be opened from Turns.';
  } else if (watchOnly) {
    ui.emptyText.textContent = 'This server runs no graph of its own: it watches turns only. Open one above: its graph, messages and timeline appear as its spans arrive.';
  } else if (chips.length) {
    ui.emptyText.textContent = `Ask ${title || 'the agent'} something, or try an example:`;
  } else {
    ui.emptyText.textContent = `Ask ${title || 'the agent'} something.`;
  }
}

/** The graph picker: shown only when the server serves more than one graph. */
export function fillPicker(box, select, catalog, current) {
  const graphs = catalog && Array.isArray(catalog.graphs) ? catalog.graphs : [];
  box.hidden = graphs.length < 2;
  const options = graphs.map((g) => {
    const o = h('option', null, g.title === g.name ? g.name : `${g.title} (${g.name})`);
    o.value = g.name;
    o.selected = g.name === current;
    return o;
  });
  select.replaceChildren(...options);
  if (current) select.value = current;
}

/** A note under the header (an older server, an unknown ?graph=): text, and how serious. */
export function showServerNote(note, text, kind = 'info') {
  note.textContent = text || '';
  note.dataset.kind = kind;
  note.hidden = !text;
}
