// The card a paused turn puts in the chat: what the graph asks, and the controls to answer it
// (interrupts.js says which, and what resume value an answer makes). DOM text only.
//
// One approval: Approve / Reject buttons (and a comment) that resume at once. Anything else
// (a human-in-the-loop review, a free value, several interrupts): a small form, one part per
// interrupt, sent with one button.

import { describeInterrupts, buildResume, approvalAnswer, asksApproval, DECISION_TEXT } from './interrupts.js';
import { argPairs, valueText } from './format.js';

let serial = 0;

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function button(text, cls, action) {
  const b = h('button', `btn ${cls}`, text);
  b.type = 'button';
  if (action) b.dataset.action = action;
  return b;
}

function argsList(args) {
  const dl = h('dl', 'approval-args');
  for (const [k, val] of argPairs(args)) {
    dl.appendChild(h('dt', null, k));
    dl.appendChild(h('dd', null, val));
  }
  return dl.childNodes.length ? dl : null;
}

function pretty(v) {
  if (v && typeof v === 'object') {
    try {
      return JSON.stringify(v, null, 2);
    } catch (_) {
      /* fall through */
    }
  }
  return valueText(v);
}

/** "The agent wants to run <tool> and needs your approval first." and its arguments. */
function approvalBlock(desc) {
  const block = h('div', 'approval-action');
  if (desc.tool) {
    const p = h('p', 'approval-lead');
    p.appendChild(document.createTextNode('The agent wants to run '));
    p.appendChild(h('code', 'tool-name', desc.tool));
    p.appendChild(document.createTextNode(' and needs your approval first.'));
    block.appendChild(p);
    const dl = argsList(desc.args);
    if (dl) block.appendChild(dl);
  } else {
    block.appendChild(h('p', 'approval-lead', 'The agent needs your approval for:'));
    block.appendChild(h('pre', 'approval-raw', pretty(desc.value)));
  }
  return block;
}

function labelled(text, control, cls = 'approval-comment-label') {
  const label = h('label', cls, text);
  label.htmlFor = control.id;
  return label;
}

function textarea(id, cls, rows = 2) {
  const t = h('textarea', cls);
  t.id = id;
  t.rows = rows;
  t.spellcheck = false;
  return t;
}

/** A radio group (a fieldset) of choices; returns {fieldset, value()}. */
function choiceGroup(legend, name, choices) {
  const fs = h('fieldset', 'choice-group');
  fs.appendChild(h('legend', 'choice-legend', legend));
  const inputs = [];
  for (const [value, text] of choices) {
    const label = h('label', `choice choice-${value}`);
    const input = h('input');
    input.type = 'radio';
    input.name = name;
    input.value = value;
    input.dataset.decision = value;
    inputs.push(input);
    label.appendChild(input);
    label.appendChild(document.createTextNode(text));
    fs.appendChild(label);
  }
  const value = () => (inputs.find((i) => i.checked) || {}).value || null;
  return { fieldset: fs, inputs, value };
}

/** One action of a review: what it is, its decisions, and the fields an edit, reject or respond needs. */
function reviewAction(action, index, count, ids) {
  const fs = h('fieldset', 'hitl-action');
  fs.dataset.action = action.name;
  const legend = h('legend', 'hitl-legend');
  if (count > 1) legend.appendChild(document.createTextNode(`Action ${index + 1} of ${count}: `));
  legend.appendChild(h('code', 'tool-name', action.name));
  fs.appendChild(legend);
  if (action.description) fs.appendChild(h('p', 'approval-note hitl-description', action.description));
  const dl = argsList(action.args);
  if (dl) fs.appendChild(dl);
  const group = choiceGroup('Decision', `${ids}-d`, action.decisions.map((d) => [d, DECISION_TEXT[d] || d]));
  fs.appendChild(group.fieldset);
  const message = textarea(`${ids}-m`, 'approval-comment');
  const messageLabel = labelled('', message);
  const msgBox = h('div', 'hitl-field');
  msgBox.append(messageLabel, message);
  msgBox.hidden = true;
  const args = textarea(`${ids}-a`, 'approval-comment json-input', 4);
  args.value = pretty(action.args === undefined ? {} : action.args);
  const argsBox = h('div', 'hitl-field');
  argsBox.append(labelled('Arguments, as a JSON object', args), args);
  argsBox.hidden = true;
  fs.append(msgBox, argsBox);
  const sync = () => {
    const d = group.value();
    msgBox.hidden = d !== 'reject' && d !== 'respond';
    messageLabel.textContent = d === 'respond' ? 'Response, sent in place of the tool’s result' : 'Reason (optional)';
    argsBox.hidden = d !== 'edit';
  };
  for (const i of group.inputs) i.addEventListener('change', sync);
  return { element: fs, choice: () => ({ type: group.value(), message: message.value, argsText: args.value }) };
}

/** The part of the form for one interrupt; returns {element, input()} (see interrupts.answerFor). */
function formPart(desc, index, count, ids) {
  const part = h('section', 'interrupt-part');
  part.dataset.kind = desc.kind;
  if (count > 1) part.appendChild(h('h4', 'interrupt-head', `Request ${index + 1} of ${count}`));
  if (desc.kind === 'approval') {
    part.appendChild(approvalBlock(desc));
    const group = choiceGroup('Your decision', `${ids}-ok`, [['approve', 'Approve'], ['reject', 'Reject']]);
    const comment = textarea(`${ids}-c`, 'approval-comment');
    part.append(group.fieldset, labelled('Comment (optional, sent with your decision)', comment), comment);
    return { element: part, input: () => ({ approved: group.value() === null ? undefined : group.value() === 'approve', comment: comment.value }) };
  }
  if (desc.kind === 'hitl' || desc.kind === 'tool_approval') {
    const n = desc.actions.length;
    part.appendChild(h('p', 'approval-lead', n > 1 ? `The agent wants to run ${n} actions; decide on each:` : 'The agent wants to run this action; decide on it:'));
    const actions = desc.actions.map((a, k) => reviewAction(a, k, n, `${ids}-${k}`));
    for (const a of actions) part.appendChild(a.element);
    return { element: part, input: () => ({ choices: actions.map((a) => a.choice()) }) };
  }
  part.appendChild(h('p', 'approval-lead', 'The agent is waiting for your answer to:'));
  part.appendChild(h('pre', 'approval-raw', pretty(desc.value)));
  const text = textarea(`${ids}-t`, 'approval-comment', 3);
  part.append(labelled('Your answer (sent as JSON when it is valid JSON, else as text)', text), text);
  return { element: part, input: () => ({ text: text.value }) };
}

function summaryLines(descs, inputs) {
  const lines = [];
  descs.forEach((d, i) => {
    const input = inputs[i] || {};
    if (d.kind === 'approval') lines.push(`${d.tool || 'Action'}: ${input.approved ? 'approved' : 'rejected'}`);
    else if (d.actions) d.actions.forEach((a, k) => lines.push(`${a.name}: ${{ approve: 'approved', reject: 'rejected', edit: 'edited', respond: 'answered' }[input.choices[k].type]}`));
    else lines.push('answer sent');
  });
  return lines;
}

function overallDecision(descs, inputs) {
  const types = [];
  descs.forEach((d, i) => {
    if (d.kind === 'approval') types.push(inputs[i].approved ? 'approve' : 'reject');
    else if (d.actions) for (const c of inputs[i].choices) types.push(c.type);
    else types.push('answer');
  });
  if (types.every((t) => t === 'approve')) return 'approved';
  if (types.every((t) => t === 'reject')) return 'rejected';
  return 'answered';
}

/**
 * Build the card for a pause. onResume(resume, announcement) runs once, when the person answers.
 * Returns {card, wait, progress}: `wait` is the span a clock fills in, `progress` (set once
 * answered) the "Resuming…" mark to remove when the resumed run ends.
 */
export function renderInterruptCard(interrupts, { onResume }) {
  const descs = describeInterrupts(interrupts);
  const n = ++serial;
  const ids = `interrupt-${n}`;
  const approval = asksApproval(descs);
  const card = h('article', 'msg msg-agent approval-card');
  card.tabIndex = -1;
  card.dataset.kind = descs.length === 1 ? descs[0].kind : 'several';
  const heading = h('h3', 'approval-title', approval ? 'Approval needed' : 'Input needed');
  heading.id = `${ids}-title`;
  card.setAttribute('aria-labelledby', heading.id);
  card.appendChild(heading);
  const wait = h('span', 'approval-wait');
  wait.setAttribute('aria-hidden', 'true');
  const handle = { card, wait, progress: null, descs };

  const settle = (removed, decision, headingText, lines, notes, resume, announcement) => {
    for (const el of removed) el.remove();
    card.classList.add('decided');
    card.dataset.decision = decision;
    heading.textContent = headingText;
    const p = h('p', 'approval-decision', lines[0]);
    for (const line of lines.slice(1)) {
      p.appendChild(h('br'));
      p.appendChild(document.createTextNode(line));
    }
    handle.progress = h('span', 'approval-progress', ' Resuming…');
    p.appendChild(handle.progress);
    card.appendChild(p);
    for (const note of notes) card.appendChild(h('p', 'approval-note', note));
    onResume(resume, announcement);
  };

  if (descs.length === 1 && descs[0].kind === 'approval') {
    // Today's approval card: the buttons resume at once.
    const d = descs[0];
    card.appendChild(approvalBlock(d));
    const comment = textarea('approval-comment', 'approval-comment');
    const label = labelled('Comment (optional, sent with your decision)', comment);
    const row = h('div', 'approval-buttons');
    const approve = button('Approve', 'btn-primary', 'approve');
    const reject = button('Reject', 'btn-danger', 'reject');
    row.append(approve, reject, wait);
    card.append(label, comment, row);
    const decide = (approved) => {
      const text = comment.value.trim();
      comment.id = ''; // the next card's comment box takes the id
      settle([label, comment, row], approved ? 'approved' : 'rejected', approved ? 'Approved' : 'Rejected',
        [approved ? 'You approved this action.' : 'You rejected this action.'], text ? [`Comment: ${text}`] : [],
        approvalAnswer(approved, text), approved ? 'Approved. Resuming.' : 'Rejected. Resuming.');
    };
    approve.addEventListener('click', () => decide(true));
    reject.addEventListener('click', () => decide(false));
    return handle;
  }

  const form = h('form', 'interrupt-form');
  form.noValidate = true;
  const parts = descs.map((d, i) => formPart(d, i, descs.length, `${ids}-${i}`));
  for (const p of parts) form.appendChild(p.element);
  const errors = h('p', 'interrupt-error');
  errors.setAttribute('role', 'alert');
  errors.hidden = true;
  const row = h('div', 'approval-buttons');
  const send = h('button', 'btn btn-primary', approval ? (descs.length > 1 || (descs[0].actions && descs[0].actions.length > 1) ? 'Send decisions' : 'Send decision') : 'Send answer');
  send.type = 'submit';
  send.dataset.action = 'submit';
  row.append(send, wait);
  form.append(errors, row);
  card.appendChild(form);
  const clearErrors = () => {
    errors.hidden = true;
    errors.textContent = '';
  };
  form.addEventListener('change', clearErrors);
  form.addEventListener('input', clearErrors);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const inputs = parts.map((p) => p.input());
    const r = buildResume(descs, inputs);
    if (!r.ok) {
      errors.hidden = false;
      errors.textContent = r.errors.join(' ');
      return;
    }
    const notes = [];
    descs.forEach((d, i) => {
      const c = inputs[i].comment && inputs[i].comment.trim();
      if (d.kind === 'approval' && c) notes.push(`Comment: ${c}`);
    });
    const decision = overallDecision(descs, inputs);
    const head = decision === 'approved' ? 'Approved' : decision === 'rejected' ? 'Rejected' : approval ? 'Decided' : 'Answered';
    settle([form], decision, head, summaryLines(descs, inputs), notes, r.resume, approval ? 'Decision sent. Resuming.' : 'Answer sent. Resuming.');
  });
  return handle;
}

/**
 * A card whose pause another client answered (the turn's next run began while it waited): its
 * controls go, and it says so. Works on both kinds of card (renderInterruptCard's and
 * renderInterruptNotice's).
 */
export function settleAnsweredElsewhere(card) {
  for (const el of card.querySelectorAll('form, .approval-buttons, .resume-elsewhere')) el.remove();
  card.classList.add('decided');
  card.dataset.decision = 'elsewhere';
  const heading = card.querySelector('.approval-title');
  if (heading) heading.textContent = 'Answered elsewhere';
  card.appendChild(h('p', 'approval-decision', 'Another client answered this pause; the turn went on.'));
}

/** What one interrupt asks, without any control to answer it (a read-only card). */
function askedPart(desc, index, count) {
  const part = h('section', 'interrupt-part');
  part.dataset.kind = desc.kind;
  if (count > 1) part.appendChild(h('h4', 'interrupt-head', `Request ${index + 1} of ${count}`));
  if (desc.kind === 'approval') {
    part.appendChild(approvalBlock(desc));
  } else if (desc.actions) {
    const n = desc.actions.length;
    part.appendChild(h('p', 'approval-lead', n > 1 ? `The agent wants to run ${n} actions:` : 'The agent wants to run this action:'));
    desc.actions.forEach((a, k) => {
      const box = h('div', 'hitl-action');
      box.dataset.action = a.name;
      const head = h('p', 'hitl-legend');
      if (n > 1) head.appendChild(document.createTextNode(`Action ${k + 1} of ${n}: `));
      head.appendChild(h('code', 'tool-name', a.name));
      box.appendChild(head);
      if (a.description) box.appendChild(h('p', 'approval-note hitl-description', a.description));
      const dl = argsList(a.args);
      if (dl) box.appendChild(dl);
      box.appendChild(h('p', 'approval-note', `Allowed: ${a.decisions.map((d) => (DECISION_TEXT[d] || d).toLowerCase()).join(', ')}`));
      part.appendChild(box);
    });
  } else {
    part.appendChild(h('p', 'approval-lead', 'The agent is waiting for an answer to:'));
    part.appendChild(h('pre', 'approval-raw', pretty(desc.value)));
  }
  return part;
}

/** The words of a pause this page cannot answer, when the server gave none. */
export const RESUME_ELSEWHERE = 'The agent that runs this turn is in another process: answer it there (this page cannot resume it). This view goes on when the turn resumes.';

/**
 * The card of a pause that this page cannot resume (the paused event's resume.path is null: the
 * agent runs in another process, or the server has no route to resume it): what the graph asks,
 * and `message` (the server's words on where to resume), no button and no form.
 * Returns {card, wait, progress: null} like renderInterruptCard.
 */
export function renderInterruptNotice(interrupts, { message } = {}) {
  const descs = describeInterrupts(interrupts);
  const n = ++serial;
  const card = h('article', 'msg msg-agent approval-card approval-elsewhere');
  card.tabIndex = -1;
  card.dataset.kind = descs.length === 1 ? descs[0].kind : 'several';
  card.dataset.resumable = 'false';
  const heading = h('h3', 'approval-title', asksApproval(descs) ? 'Approval needed' : 'Input needed');
  heading.id = `interrupt-${n}-title`;
  card.setAttribute('aria-labelledby', heading.id);
  card.appendChild(heading);
  descs.forEach((d, i) => card.appendChild(askedPart(d, i, descs.length)));
  if (!descs.length) card.appendChild(h('p', 'approval-lead', 'The turn paused for a person.'));
  const text = typeof message === 'string' && message.trim() ? message.trim() : RESUME_ELSEWHERE;
  const note = h('p', 'resume-elsewhere', text);
  note.id = `interrupt-${n}-where`;
  card.setAttribute('aria-describedby', note.id);
  const row = h('div', 'approval-buttons');
  const wait = h('span', 'approval-wait');
  wait.setAttribute('aria-hidden', 'true');
  row.append(wait);
  card.append(note, row);
  return { card, wait, progress: null, descs };
}
