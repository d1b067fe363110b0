// What a paused turn asks a person, and the resume value their answer makes. Pure data (the
// card in interrupt-card.js draws it; the Node tests check it). Three shapes are known:
//
//   approval  {"type": "approval", "tool"?, "args"?}             -> {"approved": bool, "comment"?}
//   hitl      LangChain's HumanInTheLoopMiddleware request:
//             {"action_requests": [{name, args, description?}],
//              "review_configs": [{action_name, allowed_decisions}]} -> {"decisions": [one per action, in order]}
//   tool_approval (the same middleware, per call): {"type": "tool_approval", name, args}
//                                                                   -> one decision
//   anything else: a text box; the text is sent as JSON when it parses, else as a string.
//
// Several interrupts at once resume with {interrupt_id: answer} (DESIGN §5).

export const DECISIONS = ['approve', 'edit', 'reject', 'respond'];

export const DECISION_TEXT = { approve: 'Approve', edit: 'Edit', reject: 'Reject', respond: 'Respond' };

/** The comment a rejection carries when the person wrote none (as the SPA always sent). */
export const DEFAULT_REJECT_COMMENT = 'Rejected by the operator.';

function isObject(v) {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

export function interruptValue(it) {
  return isObject(it) && 'value' in it ? it.value : it;
}

export function isApproval(v) {
  return isObject(v) && v.type === 'approval';
}

export function isHitlRequest(v) {
  return isObject(v) && Array.isArray(v.action_requests) && v.action_requests.length > 0 && v.action_requests.every((a) => isObject(a) && typeof a.name === 'string');
}

export function isToolApproval(v) {
  return isObject(v) && v.type === 'tool_approval' && typeof v.name === 'string';
}

/** The decisions allowed for the i-th action: its review config's (matched by position, else by name). */
export function allowedDecisions(reviewConfigs, action, index) {
  const configs = Array.isArray(reviewConfigs) ? reviewConfigs.filter(isObject) : [];
  let config = configs[index] && configs[index].action_name === action.name ? configs[index] : null;
  if (!config) config = configs.find((c) => c.action_name === action.name) || null;
  const listed = config && Array.isArray(config.allowed_decisions) ? config.allowed_decisions : [];
  const out = [];
  for (const d of listed) if (DECISIONS.includes(d) && !out.includes(d)) out.push(d);
  // No config for it: the two answers every review accepts.
  return out.length ? out : ['approve', 'reject'];
}

function actionOf(a, decisions) {
  return {
    name: String(a.name),
    args: a.args === undefined ? {} : a.args,
    description: typeof a.description === 'string' && a.description ? a.description : null,
    decisions,
  };
}

/**
 * One interrupt ({id, value}) as the card shows it:
 * {id, kind: 'approval', tool, args, controls} | {id, kind: 'hitl' | 'tool_approval', actions: [{name, args,
 *  description, decisions}]} | {id, kind: 'value', value, controls}.
 */
export function describeInterrupt(it) {
  const id = isObject(it) && it.id !== undefined && it.id !== null ? String(it.id) : null;
  const v = interruptValue(it);
  if (isApproval(v)) return { id, kind: 'approval', tool: v.tool == null ? null : String(v.tool), args: v.args, value: v, controls: ['approve', 'reject', 'comment'] };
  if (isHitlRequest(v)) return { id, kind: 'hitl', actions: v.action_requests.map((a, i) => actionOf(a, allowedDecisions(v.review_configs, a, i))) };
  if (isToolApproval(v)) return { id, kind: 'tool_approval', actions: [actionOf(v, ['approve', 'edit', 'reject'])] };
  return { id, kind: 'value', value: v, controls: ['text'] };
}

export function describeInterrupts(interrupts) {
  return (Array.isArray(interrupts) ? interrupts : []).map(describeInterrupt);
}

/** {approved, comment?}; a rejection without a comment says who rejected it. */
export function approvalAnswer(approved, comment = '') {
  const value = { approved: !!approved };
  const text = typeof comment === 'string' ? comment.trim() : '';
  if (text) value.comment = text;
  else if (!approved) value.comment = DEFAULT_REJECT_COMMENT;
  return value;
}

/** Text as JSON when it parses, else the text itself (trimmed). */
export function textAnswer(text) {
  const t = typeof text === 'string' ? text.trim() : '';
  if (!t) return '';
  try {
    return JSON.parse(t);
  } catch (_) {
    return t;
  }
}

/**
 * One action's decision from a choice {type, message?, argsText?}:
 * {ok: true, decision} or {ok: false, error} (a person-readable reason).
 */
export function decisionFor(action, choice) {
  const type = choice && choice.type;
  if (!type) return { ok: false, error: `Choose what to do with ${action.name}.` };
  if (!action.decisions.includes(type)) return { ok: false, error: `${DECISION_TEXT[type] || type} is not allowed for ${action.name}.` };
  const message = typeof choice.message === 'string' ? choice.message.trim() : '';
  if (type === 'approve') return { ok: true, decision: { type } };
  if (type === 'reject') return { ok: true, decision: message ? { type, message } : { type } };
  if (type === 'respond') {
    if (!message) return { ok: false, error: `Write the response to send in place of ${action.name}.` };
    return { ok: true, decision: { type, message } };
  }
  // edit: the arguments as a JSON object
  let args;
  try {
    args = JSON.parse(typeof choice.argsText === 'string' ? choice.argsText : '');
  } catch (e) {
    return { ok: false, error: `The arguments of ${action.name} are not valid JSON: ${e.message}` };
  }
  if (!isObject(args)) return { ok: false, error: `The arguments of ${action.name} must be a JSON object.` };
  return { ok: true, decision: { type, edited_action: { name: action.name, args } } };
}

/**
 * The answer to one described interrupt from the person's input:
 *   approval: {approved, comment}; hitl / tool_approval: {choices: [choice per action]}; value: {text}.
 * Returns {ok, value, errors: [text]}.
 */
export function answerFor(desc, input = {}) {
  if (desc.kind === 'approval') {
    if (typeof input.approved !== 'boolean') return { ok: false, value: undefined, errors: ['Approve or reject the action.'] };
    return { ok: true, value: approvalAnswer(input.approved, input.comment), errors: [] };
  }
  if (desc.kind === 'hitl' || desc.kind === 'tool_approval') {
    const choices = Array.isArray(input.choices) ? input.choices : [];
    const decisions = [];
    const errors = [];
    desc.actions.forEach((a, i) => {
      const r = decisionFor(a, choices[i]);
      if (r.ok) decisions.push(r.decision);
      else errors.push(r.error);
    });
    if (errors.length) return { ok: false, value: undefined, errors };
    return { ok: true, value: desc.kind === 'hitl' ? { decisions } : decisions[0], errors: [] };
  }
  return { ok: true, value: textAnswer(input.text), errors: [] };
}

/** The `resume` of POST .../chat/resume: one interrupt's answer, or {interrupt_id: answer} for several. */
export function resumeValue(descs, answers) {
  if (descs.length <= 1) return answers[0];
  const out = {};
  descs.forEach((d, i) => {
    out[d.id !== null ? d.id : String(i)] = answers[i];
  });
  return out;
}

/** The card's inputs -> {ok, resume, errors}. `inputs` has one entry per interrupt (see answerFor). */
export function buildResume(descs, inputs) {
  const answers = [];
  const errors = [];
  descs.forEach((d, i) => {
    const r = answerFor(d, inputs[i]);
    answers.push(r.value);
    errors.push(...r.errors);
  });
  if (errors.length) return { ok: false, resume: undefined, errors };
  return { ok: true, resume: resumeValue(descs, answers), errors: [] };
}

/** Is every interrupt a yes/no about an action (so the page says "approval")? */
export function asksApproval(descs) {
  return descs.length > 0 && descs.every((d) => d.kind !== 'value');
}

/** A short line for the outcome: what the pause waits for. */
export function pauseDetail(descs) {
  const names = [];
  for (const d of descs) {
    if (d.kind === 'approval' && d.tool) names.push(d.tool);
    else if (d.actions) for (const a of d.actions) names.push(a.name);
  }
  const unique = [...new Set(names)];
  const what = descs.every((d) => d.kind === 'approval') ? 'approval' : 'review';
  if (unique.length) return `${unique.join(', ')} ${unique.length === 1 ? 'needs' : 'need'} ${what}`;
  return descs.length ? 'waiting for your answer' : '';
}
