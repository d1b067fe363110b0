// The conversation column: messages, the final answer with its citations, and the answer
// as it is written (text_delta). DOM text only: data never becomes markup.

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

const SYSTEM_WHO = { error: 'Error', cancelled: 'Cancelled', paused: 'Paused', tool: 'Browser tool' };

export class ChatLog {
  /**
   * @param {HTMLElement} box the log (role=log)
   * @param {HTMLElement} empty what the log shows before the first message
   */
  constructor(box, empty) {
    this.box = box;
    this.empty = empty;
    this.agentName = 'Agent'; // the "who" of agent messages: the graph's title
    this.live = null; // {item, run}: the answer being written
  }

  scrollToEnd() {
    this.box.scrollTop = this.box.scrollHeight;
  }

  /** Append an element of the conversation (a card). */
  append(el) {
    this.empty.hidden = true;
    this.box.appendChild(el);
    this.scrollToEnd();
    return el;
  }

  add(role, text, opts = {}) {
    this.empty.hidden = true;
    const item = h('article', `msg msg-${role}${opts.variant ? ' msg-' + opts.variant : ''}`);
    item.appendChild(h('span', 'msg-who', role === 'user' ? 'You' : role === 'agent' ? this.agentName : SYSTEM_WHO[opts.variant] || 'Notice'));
    item.appendChild(h('div', 'msg-body', text));
    if (opts.replace) opts.replace.replaceWith(item);
    else this.box.appendChild(item);
    this.scrollToEnd();
    return item;
  }

  /** The answer, final: in place of the streamed text when there is one (they may differ). */
  answer(response, replace = null) {
    const status = response.status || 'answered';
    const variant = status === 'refused' ? 'refused' : status === 'error' ? 'error' : null;
    const text = typeof response.answer === 'string' && response.answer ? response.answer : status === 'refused' ? 'The request was refused.' : '(no answer)';
    const item = this.add('agent', text, { variant, replace });
    item.dataset.status = status;
    if (replace) item.dataset.streamed = 'true'; // it was written live before this final text
    const cites = Array.isArray(response.citations) ? response.citations : [];
    markCitations(item.querySelector('.msg-body'), text, cites);
    if (status === 'refused') item.querySelector('.msg-who').textContent = `${this.agentName} · refused`;
    if (cites.length) {
      const box = h('div', 'citations');
      box.appendChild(h('span', 'citations-title', 'Sources'));
      const list = h('ol', 'citation-list');
      for (const c of cites) {
        const li = h('li', 'citation');
        const title = typeof c === 'string' ? c : c.title || c.doc_id || 'document';
        li.appendChild(h('span', 'citation-title', title));
        if (c && typeof c === 'object' && c.doc_id && c.doc_id !== title) li.appendChild(h('span', 'citation-id', c.doc_id));
        li.title = c && c.doc_id ? `Document ${c.doc_id}` : title;
        list.appendChild(li);
      }
      box.appendChild(list);
      item.appendChild(box);
    }
    this.scrollToEnd();
    return item;
  }

  /** The answer as it is written: one bubble per run, its text replaced (as text) on each delta. */
  streamed(m) {
    if (!m) return;
    let live = this.live;
    if (!live || live.run !== m.run || !live.item.isConnected) {
      const item = this.add('agent', '');
      item.classList.add('msg-streaming');
      item.dataset.streaming = 'true';
      live = this.live = { item, run: m.run };
      this.box.setAttribute('aria-busy', 'true'); // read the answer once, when it is whole
    }
    live.item.dataset.messageId = m.id;
    live.item.querySelector('.msg-body').textContent = m.text;
    this.scrollToEnd();
  }

  /** The streamed text stops growing: it stays (a pause, an error) or is replaced (the answer). */
  endStreamed(partial) {
    const live = this.live;
    this.live = null;
    this.box.removeAttribute('aria-busy');
    if (!live) return null;
    live.item.dataset.streaming = 'false';
    live.item.classList.remove('msg-streaming');
    if (partial) live.item.classList.add('msg-partial');
    return live.item;
  }

  clear() {
    this.endStreamed(true);
    for (const n of [...this.box.children]) if (n !== this.empty) n.remove();
    this.empty.hidden = false;
  }
}

/** Replace "[doc-id]" markers of cited documents by numbered references (text nodes only). */
export function markCitations(body, text, cites) {
  const index = new Map();
  cites.forEach((c, i) => {
    if (c && typeof c === 'object' && c.doc_id) index.set(String(c.doc_id), { n: i + 1, title: c.title || c.doc_id });
  });
  if (!index.size) return;
  const parts = text.split(/\[([^\[\]\s]{1,80})\]/g);
  if (parts.length === 1) return;
  const frag = document.createDocumentFragment();
  parts.forEach((part, i) => {
    if (i % 2 === 0) {
      if (part) frag.appendChild(document.createTextNode(part));
      return;
    }
    const ref = index.get(part);
    if (!ref) {
      frag.appendChild(document.createTextNode(`[${part}]`));
      return;
    }
    const sup = h('span', 'cite-ref', String(ref.n));
    sup.title = `Source ${ref.n}: ${ref.title}`;
    sup.setAttribute('aria-label', `source ${ref.n}, ${ref.title}`);
    frag.appendChild(sup);
  });
  body.replaceChildren(frag);
}
