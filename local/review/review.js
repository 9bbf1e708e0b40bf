// The review page (served by `npm run review`, local/lib/review-server.ts). Keyboard first: the
// cursor starts on the first doubted field; Enter saves it (a value left as it is confirms it) and
// goes to the next doubted one, then to the next document; Ctrl+Enter confirms what is left;
// Alt+Down / Alt+Up move between documents; Esc puts the field back. A reason that names no
// correctable field (EN 16931 validation failed, the seller differs between picture and XML) has a
// "Dealt with" button and its own why: Enter in the why, or the button, marks it dealt with.

// The fields an input is shown for, in order: the correctable ones, as the server names them.
let FIELDS = [];
const AMOUNTS = new Set(['net_amount', 'tax_amount', 'total_amount']);
const REASON_WORDS = {
  arithmetic: 'net + tax ≠ total',
  missing: 'missing',
  low_confidence: 'low confidence',
  check_digit: 'check digit fails',
  e_invoice_invalid: 'EN 16931 validation fails',
  picture_xml_disagree: 'picture and XML disagree',
};

let DEALT_WITH = 'dealt_with';

const state = { items: [], index: 0, who: '' };
const $ = (id) => document.getElementById(id);
/** A new element with these properties (className, textContent, id…) and these children. */
const el = (tag, properties, ...children) => {
  const element = Object.assign(document.createElement(tag), properties);
  element.append(...children);
  return element;
};

/** The fields a reason is about (`arithmetic`: the three amounts). */
function reasonFields(reason) {
  if (reason === 'arithmetic') return [...AMOUNTS];
  const colon = reason.indexOf(':');
  return colon < 0 ? [] : [reason.slice(colon + 1)];
}

function describe(reason) {
  const kind = reason.split(':')[0];
  return REASON_WORDS[kind] ?? reason;
}

const shown = (value) => (value === null || value === undefined ? '' : String(value));

/** The value typed, as the analysis holds it: empty is null, amounts are numbers. */
function parsed(field, text) {
  const value = text.trim();
  if (value === '') return null;
  if (AMOUNTS.has(field)) {
    const number = Number(value.replace(/[\s\u00a0\u202f]/g, '').replace(',', '.'));
    return Number.isFinite(number) ? number : value;
  }
  return value;
}

function current() {
  return state.items[state.index];
}

function renderQueue() {
  const nav = $('queue');
  nav.replaceChildren();
  state.items.forEach((item, index) => {
    const count = el('span', {
      className: 'count',
      textContent: item.open.length === 0 ? '✓' : String(item.open.length),
    });
    const button = el(
      'button',
      {
        type: 'button',
        textContent: item.object_name ?? item.dedup_key,
        className: item.open.length === 0 ? 'done' : '',
      },
      count,
    );
    button.dataset.key = item.dedup_key;
    if (index === state.index) button.setAttribute('aria-current', 'true');
    button.addEventListener('click', () => select(index));
    nav.append(button);
  });
  const open = state.items.filter((item) => item.open.length > 0).length;
  $('progress').textContent = `${open} of ${state.items.length} documents to review`;
}

async function renderPicture(item) {
  const box = $('picture');
  box.replaceChildren();
  if ((item.content_type ?? '').startsWith('text/')) {
    const answer = await fetch(`/api/picture?key=${encodeURIComponent(item.dedup_key)}`);
    box.append(el('pre', { textContent: answer.ok ? await answer.text() : '(no picture)' }));
    return;
  }
  const src = `/api/picture?key=${encodeURIComponent(item.dedup_key)}`;
  box.append(el('img', { alt: `picture of ${item.object_name}`, src }));
}

function renderFields(item) {
  $('title').textContent = item.object_name ?? item.dedup_key;
  $('reasons').textContent =
    item.review.length === 0
      ? ''
      : `to look at: ${item.review.map((r) => `${reasonFields(r).join(', ') || r}: ${describe(r)}`).join(' · ')}`;
  const rows = $('rows');
  rows.replaceChildren();
  const analysis = item.analysis ?? {};
  const original = item.original_analysis ?? {};
  for (const field of FIELDS) {
    const reasons = item.review.filter((r) => reasonFields(r).includes(field));
    const label = el('label', { htmlFor: `field-${field}`, textContent: field });
    const input = el('input', { id: `field-${field}`, name: field, value: shown(analysis[field]) });
    input.dataset.saved = input.value;
    const confidence = item.confidence?.[field];
    const meta = el('span', {
      className: 'meta',
      textContent: confidence ? `${confidence.confidence.toFixed(2)} ${confidence.source}` : '',
    });
    const row = el('div', { className: 'field' }, label, input, meta);
    row.dataset.field = field;
    if (reasons.length > 0) row.classList.add('flagged');
    if (item.corrected_fields.includes(field)) row.classList.add('closed');
    if (reasons.length > 0) {
      const text = reasons.map(describe).join(', ');
      const reviewed = item.corrected_fields.includes(field);
      row.append(el('span', { className: 'reason', textContent: reviewed ? `reviewed (${text})` : text }));
    }
    const latest = item.latest[field];
    if (latest) {
      const textContent = `analysed: ${shown(original[field]) || '—'} · by ${latest.corrected_by}`;
      row.append(el('span', { className: 'was', textContent }));
    }
    rows.append(row);
  }
  renderMarks(item);
}

/** One line per reason no field closes: a why and a "Dealt with" button while open, who and why once dealt with. */
function renderMarks(item) {
  const marks = $('marks');
  marks.replaceChildren();
  (item.markable ?? []).forEach((reason, index) => {
    const name = el('span', {
      className: 'name',
      id: `mark-name-${index}`,
      textContent: `${reason}: ${describe(reason)}`,
    });
    const row = el('div', { className: 'mark' }, name);
    row.dataset.reason = reason;
    if (item.open.includes(reason)) {
      row.classList.add('flagged');
      const label = el('label', { htmlFor: `mark-why-${index}`, textContent: 'why' });
      const why = el('input', {
        id: `mark-why-${index}`,
        name: 'mark-why',
        placeholder: 'how it was dealt with',
      });
      const button = el('button', { type: 'button', textContent: 'Dealt with' });
      for (const control of [why, button]) {
        control.dataset.reason = reason;
        control.setAttribute('aria-describedby', name.id);
      }
      button.addEventListener('click', () => void dealWith(reason));
      row.append(label, why, button);
    } else {
      row.classList.add('closed');
      const latest = item.latest[reason];
      const textContent = latest ? `dealt with by ${latest.corrected_by}: ${latest.why ?? ''}` : 'dealt with';
      row.append(el('span', { className: 'done', textContent }));
    }
    marks.append(row);
  });
}

const markInput = (reason) =>
  [...document.querySelectorAll('input[name="mark-why"]')].find((input) => input.dataset.reason === reason);

/** Puts the cursor on the first open reason's input (a field first, then a mark); false when none is open. */
function focusOpen() {
  const item = current();
  if (!item) return false;
  const open = new Set(item.open.flatMap(reasonFields));
  const field = FIELDS.find((f) => open.has(f));
  if (field) {
    $(`field-${field}`).focus();
    $(`field-${field}`).select();
    return true;
  }
  return focusMark();
}

/** Puts the cursor on the why of the first reason without a field still open; false when none is. */
function focusMark() {
  const item = current();
  const reason = item?.open.find((r) => (item.markable ?? []).includes(r));
  if (!reason) return false;
  markInput(reason).focus();
  return true;
}

function focusNext(after) {
  const item = current();
  if (!item) return;
  const open = new Set(item.open.flatMap(reasonFields));
  const start = after === undefined ? -1 : FIELDS.indexOf(after);
  const next = FIELDS.slice(start + 1).find((f) => open.has(f));
  if (next) {
    const input = $(`field-${next}`);
    input.focus();
    input.select();
    return;
  }
  // The fields done: a reason without a field may still be open.
  if (focusMark()) return;
  if (item.open.length > 0 && after === undefined) return;
  if (after !== undefined) void nextDocument();
}

function status(text, kind = '') {
  $('status').textContent = text;
  $('status').className = kind;
}

async function select(index) {
  if (state.items.length === 0) {
    $('title').textContent = 'Nothing to review.';
    return;
  }
  state.index = Math.max(0, Math.min(state.items.length - 1, index));
  const item = current();
  history.replaceState(null, '', `#${encodeURIComponent(item.dedup_key)}`);
  renderQueue();
  renderFields(item);
  focusNext();
  await renderPicture(item);
}

function nextDocument(step = 1) {
  if (step > 0) {
    const ahead = state.items.findIndex((item, i) => i > state.index && item.open.length > 0);
    return select(ahead >= 0 ? ahead : state.index + 1);
  }
  return select(state.index - 1);
}

/**
 * Posts a correction (or a mark) of `field` of the current document. A refusal is shown and answers
 * null; otherwise the document is shown as the server now has it, and the answer is its body.
 */
async function post(field, value, why) {
  const item = current();
  const answer = await fetch('/api/corrections', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      dedup_key: item.dedup_key,
      field,
      value,
      replaces: item.latest[field]?.correction_id ?? null,
      why,
      by: state.who,
    }),
  });
  const body = await answer.json();
  if (!answer.ok && answer.status !== 409) {
    status(`${field}: ${body.error}`, 'error');
    return null;
  }
  state.items[state.index] = body.item;
  renderQueue();
  renderFields(body.item);
  return body;
}

/** Saves one field: a correction, or a confirmation when the value is the one shown. */
async function save(field) {
  const body = await post(field, parsed(field, $(`field-${field}`).value), $('why').value);
  if (!body) return false;
  if (body.status === 'conflict') {
    const latest = body.latest;
    status(
      `${field} was corrected meanwhile by ${latest?.corrected_by}: ${latest?.value}. Check it and save again.`,
      'conflict',
    );
    $(`field-${field}`).focus();
    return false;
  }
  status(body.status === 'recorded' ? `saved ${field}` : `${field}: already recorded`);
  return true;
}

/** Marks a reason that names no field dealt with; its why is required (the server refuses a mark without one). */
async function dealWith(reason) {
  const input = markInput(reason);
  const why = input.value.trim();
  if (why === '') {
    status(`${reason}: say why it is dealt with`, 'error');
    input.focus();
    return false;
  }
  const body = await post(reason, DEALT_WITH, why);
  if (!body) return false;
  if (body.status === 'conflict') {
    status(`${reason} was dealt with meanwhile by ${body.latest?.corrected_by}`, 'conflict');
    return false;
  }
  status(body.status === 'recorded' ? `dealt with ${reason}` : `${reason}: already recorded`);
  if (!focusOpen()) await nextDocument();
  return true;
}

document.addEventListener('keydown', async (event) => {
  const field = event.target?.name;
  const inField = FIELDS.includes(field);
  if (event.altKey && (event.key === 'ArrowDown' || event.key === 'ArrowUp')) {
    event.preventDefault();
    await nextDocument(event.key === 'ArrowDown' ? 1 : -1);
    return;
  }
  if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    const item = current();
    // Confirms the open fields; a reason without a field needs its own why, so it stays for the person.
    for (const open of [...new Set(item.open.flatMap(reasonFields))].filter((f) => FIELDS.includes(f))) {
      if (!(await save(open))) return;
    }
    if (focusOpen()) return;
    await nextDocument();
    return;
  }
  if (event.key === 'Enter' && event.target?.name === 'mark-why') {
    event.preventDefault();
    await dealWith(event.target.dataset.reason);
    return;
  }
  if (event.key === 'Enter' && inField) {
    event.preventDefault();
    if (await save(field)) focusNext(field);
    return;
  }
  if (event.key === 'Escape' && inField) event.target.value = event.target.dataset.saved;
});

$('fields').addEventListener('submit', (event) => event.preventDefault());

async function load() {
  const answer = await fetch('/api/queue');
  const body = await answer.json();
  state.items = body.items;
  FIELDS = body.fields;
  DEALT_WITH = body.dealtWith ?? DEALT_WITH;
  state.who = new URLSearchParams(location.search).get('who') ?? body.who;
  $('who').textContent = `corrections by ${state.who}`;
  const key = decodeURIComponent(location.hash.slice(1));
  const at = state.items.findIndex((item) => item.dedup_key === key);
  await select(Math.max(at, 0));
  document.body.dataset.ready = 'true';
}

load().catch((error) => status(`the page could not load: ${error.message}`, 'error'));
