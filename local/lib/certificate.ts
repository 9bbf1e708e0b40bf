import { type PdfPage, PdfWriter, type Rgb, textWidth } from '../../samples/pdf-writer';
import type { Certificate } from './close';

/**
 * The close certificate as people read it: one HTML page (self-contained, the chart as inline SVG)
 * and the same content as a PDF (samples/pdf-writer.ts), both from the same sections.
 */

/** The outcomes charted per day, bottom to top, with their colours. */
const SERIES = [
  { key: 'ok', label: 'ok', color: [0.2, 0.55, 0.3] as Rgb },
  { key: 'review', label: 'ok, review open', color: [0.9, 0.6, 0.1] as Rgb },
  { key: 'rejected', label: 'rejected', color: [0.8, 0.2, 0.2] as Rgb },
] as const;

/** One section of the certificate: a title, its statement, and the lines that support it. */
interface Section {
  title: string;
  verdict: string;
  /** `good`: the statement holds; `attention`: something for the auditor to look at. */
  tone: 'good' | 'attention' | 'info';
  lines: string[];
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The certificate's sections, in order: what both renderings print. */
export function sections(c: Certificate): Section[] {
  const r = c.reconcile;
  const d = c.deliveries;
  const out: Section[] = [];
  const oneRowEach = r.withoutRow.length === 0 && r.withSeveralRows.length === 0;
  out.push({
    title: 'Every object uploaded has exactly one row',
    verdict: oneRowEach
      ? `${plural(r.objects, 'object')} uploaded in ${c.month}, each with exactly one row.`
      : `${r.withoutRow.length} without a row, ${r.withSeveralRows.length} with several, of ${plural(r.objects, 'object')}.`,
    tone: oneRowEach ? 'good' : 'attention',
    lines: [
      ...r.withoutRow.map((o) => `no row: ${o}`),
      ...r.withSeveralRows.map((o) => `${o.rows} rows: ${o.object}`),
      ...(r.rowsWithoutLiveObject > 0
        ? [
            `${plural(r.rowsWithoutLiveObject, 'row')} of the month for a generation replaced or deleted since`,
          ]
        : []),
    ],
  });
  out.push({
    title: 'Redeliveries and doubled announcements absorbed',
    verdict: d.ledger
      ? `${plural(d.redeliveriesAbsorbed, 'redelivery', 'redeliveries')} and ${plural(d.doubledAnnouncementsAbsorbed, 'doubled announcement')} absorbed without a second row.`
      : 'Not recorded: no delivery ledger in this data folder (a pipeline started before the ledger existed).',
    tone: d.ledger ? 'good' : 'info',
    lines: [
      `${plural(d.recordedAfterRetries, 'row')} written after failed attempts of the same message`,
      ...(d.ledger
        ? [
            `${plural(d.answers, 'answer')} for the month's documents in the ledger, ${d.failedAnswers} of them failures retried`,
          ]
        : []),
    ],
  });
  out.push({
    title: 'Analyses paid twice',
    verdict: `${c.paidTwice.count} analyses paid twice; ${plural(c.paidTwice.analysesPaid, 'analysis', 'analyses')} paid in all (${c.paidTwice.tokens} tokens), ${plural(c.outcomes.eInvoices, 'e-invoice')} read for free.`,
    tone: c.paidTwice.count === 0 ? 'good' : 'attention',
    lines: c.paidTwice.items.map((i) => `${i.object}: ${i.why}`),
  });
  out.push({
    title: 'Rejected and dead-lettered documents',
    verdict: `${plural(c.rejected.length, 'document')} rejected; ${c.deadLetters.checked ? plural(c.deadLetters.items.length, 'dead letter') : 'dead letters not checked'}.`,
    tone: c.rejected.length + c.deadLetters.items.length === 0 ? 'good' : 'attention',
    lines: [
      ...c.rejected.map((x) => `rejected: ${x.object}: ${x.reason}`),
      ...c.deadLetters.items.map(
        (x) => `dead letter ${x.messageId}: ${x.object} after ${x.deliveries ?? '?'} deliveries`,
      ),
      ...(c.deadLetters.note ? [c.deadLetters.note] : []),
    ],
  });
  out.push({
    title: 'Duplicate invoices across objects and formats',
    verdict:
      c.duplicates.length === 0
        ? 'No invoice found in more than one object.'
        : `${plural(c.duplicates.length, 'invoice')} found in more than one object, ${c.duplicates.filter((g) => g.acrossFormats).length} across formats.`,
    tone: c.duplicates.length === 0 ? 'good' : 'attention',
    lines: c.duplicates.flatMap((g) => [
      `invoice ${g.invoiceNumber} of ${g.supplier}, total ${g.total.toFixed(2)}${g.acrossFormats ? ' (across formats)' : ''}, matched on ${g.matchedOn.join(', ') || 'number and total'}:`,
      ...g.objects.map((o) => `    ${o.object}  ${o.format}  ${o.day}`),
    ]),
  });
  out.push({
    title: 'Open review items',
    verdict: c.review.recorded
      ? `${plural(c.review.open.length, 'row')} with an open review${c.review.corrected === null ? '' : `; ${plural(c.review.corrected, 'row')} with corrections applied`}.`
      : 'Not recorded: these rows carry no review verdict.',
    tone: !c.review.recorded ? 'info' : c.review.open.length === 0 ? 'good' : 'attention',
    lines: c.review.open.map((o) => `${o.object}: ${o.reasons}`),
  });
  if (c.validation.checked > 0) {
    const v = c.validation;
    out.push({
      title: 'E-invoices validated on receipt (EN 16931)',
      verdict: `${v.valid} valid, ${v.invalid} invalid, ${v.unchecked} unchecked, of ${plural(v.checked, 'e-invoice')}.`,
      tone: v.invalid === 0 ? 'good' : 'attention',
      lines: v.invalidItems.map((i) => `invalid: ${i.object}: ${i.failed.join(', ')}`),
    });
  }
  return out;
}

const escapeHtml = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
const css = (rgb: Rgb) => `rgb(${rgb.map((v) => Math.round(v * 255)).join(',')})`;

/** The chart of the month as SVG: documents per day, stacked by outcome. */
export function chartSvg(c: Certificate): string {
  const width = 720;
  const height = 220;
  const left = 36;
  const bottom = 28;
  const plotW = width - left - 8;
  const plotH = height - bottom - 24;
  const max = Math.max(1, ...c.perDay.map((d) => d.ok + d.review + d.rejected));
  const step = plotW / c.perDay.length;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="documents per day by outcome">`,
    `<line x1="${left}" y1="${height - bottom}" x2="${width - 8}" y2="${height - bottom}" stroke="#555"/>`,
    `<text x="${left - 6}" y="${24 + 4}" font-size="10" text-anchor="end">${max}</text>`,
    `<text x="${left - 6}" y="${height - bottom}" font-size="10" text-anchor="end">0</text>`,
  ];
  c.perDay.forEach((d, i) => {
    let y = height - bottom;
    for (const s of SERIES) {
      const n = d[s.key];
      if (n === 0) continue;
      const h = (n / max) * plotH;
      y -= h;
      parts.push(
        `<rect x="${(left + i * step + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${(step - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${css(s.color)}"><title>${d.day}: ${n} ${s.label}</title></rect>`,
      );
    }
    if (i % 5 === 0 || i === c.perDay.length - 1)
      parts.push(
        `<text x="${(left + i * step + step / 2).toFixed(1)}" y="${height - bottom + 14}" font-size="10" text-anchor="middle">${Number(d.day.slice(8))}</text>`,
      );
  });
  SERIES.forEach((s, i) => {
    parts.push(
      `<rect x="${left + i * 130}" y="4" width="10" height="10" fill="${css(s.color)}"/>`,
      `<text x="${left + i * 130 + 14}" y="13" font-size="11">${s.label}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('');
}

/** The certificate as one self-contained HTML page. */
export function certificateHtml(c: Certificate): string {
  const tone = { good: '#2f7a44', attention: '#b5561b', info: '#555' };
  const body = sections(c)
    .map(
      (s) =>
        `<section><h2>${escapeHtml(s.title)}</h2><p style="color:${tone[s.tone]}"><strong>${escapeHtml(s.verdict)}</strong></p>` +
        (s.lines.length
          ? `<ul>${s.lines.map((l) => `<li>${escapeHtml(l.trim())}</li>`).join('')}</ul>`
          : '') +
        '</section>',
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>docline close certificate ${c.month}</title>
<style>body{font-family:Helvetica,Arial,sans-serif;max-width:780px;margin:2em auto;color:#222}h1{font-size:1.5em}h2{font-size:1.1em;margin-bottom:.2em}code{font-size:.85em;word-break:break-all}section{border-top:1px solid #ddd;padding-top:.3em}</style>
</head><body>
<h1>Close certificate — ${c.month}</h1>
<p>${c.rows.count} documents: ${c.outcomes.ok} ok (${c.outcomes.eInvoices} e-invoices read from their XML, ${c.outcomes.analysed} analysed), ${c.outcomes.rejected} rejected. Generated ${escapeHtml(c.generatedAt)} from <code>${escapeHtml(c.dataDir)}</code>.</p>
<figure>${chartSvg(c)}<figcaption>Documents per day (UTC) by outcome.</figcaption></figure>
${body}
<section><h2>Digest of the month's rows</h2><p>SHA-256 <code>${c.rows.sha256}</code> over ${c.rows.count} rows of the <code>documents</code> view (${c.rows.columns.length} columns). Re-verify with <code>npm run close -- --verify --month ${c.month}</code>.</p></section>
</body></html>
`;
}

/** The certificate as a PDF (A4): the same sections, the chart drawn with rectangles. */
export function certificatePdf(c: Certificate): Buffer {
  const writer = new PdfWriter({
    title: `docline close certificate ${c.month}`,
    producer: 'docline',
    created: new Date(c.generatedAt),
  });
  const W = 595;
  const H = 842;
  const margin = 48;
  let page: PdfPage = writer.addPage(W, H);
  let y = H - margin;
  const need = (h: number) => {
    if (y - h < margin) {
      page = writer.addPage(W, H);
      y = H - margin;
    }
  };
  /** Writes text wrapped to the page's width. */
  const write = (
    text: string,
    size: number,
    font: 'Helvetica' | 'Helvetica-Bold' = 'Helvetica',
    color?: Rgb,
    indent = 0,
  ) => {
    const max = W - 2 * margin - indent;
    const words = text.split(/(\s+)/);
    let line = '';
    const flush = () => {
      need(size * 1.35);
      page.drawText(line.trimEnd(), {
        x: margin + indent,
        y: y - size,
        size,
        font,
        ...(color ? { color } : {}),
      });
      y -= size * 1.35;
      line = '';
    };
    for (const word of words) {
      if (textWidth(line + word, font, size) > max && line.trim()) flush();
      // A word longer than the line (a digest) is cut where it overflows.
      let w = line === '' ? word.trimStart() : word;
      while (textWidth(w, font, size) > max) {
        let cut = w.length;
        while (cut > 1 && textWidth(w.slice(0, cut), font, size) > max) cut--;
        line = w.slice(0, cut);
        flush();
        w = w.slice(cut);
      }
      line += w;
    }
    if (line.trim()) flush();
  };
  write(`Close certificate — ${c.month}`, 18, 'Helvetica-Bold');
  y -= 4;
  write(
    `${c.rows.count} documents: ${c.outcomes.ok} ok (${c.outcomes.eInvoices} e-invoices read from their XML, ${c.outcomes.analysed} analysed), ${c.outcomes.rejected} rejected. Generated ${c.generatedAt}.`,
    10,
  );
  y -= 8;
  // The chart: documents per day, stacked by outcome.
  const chartH = 150;
  need(chartH + 40);
  const plotX = margin + 24;
  const plotW = W - 2 * margin - 24;
  const base = y - chartH;
  const max = Math.max(1, ...c.perDay.map((d) => d.ok + d.review + d.rejected));
  const step = plotW / c.perDay.length;
  SERIES.forEach((s, i) => {
    page.drawRectangle({ x: plotX + i * 120, y: y - 10, width: 8, height: 8, fill: s.color });
    page.drawText(s.label, { x: plotX + i * 120 + 12, y: y - 9, size: 9 });
  });
  const top = y - 20;
  const plotH = top - base;
  page.drawText(String(max), { x: margin, y: top - 8, size: 8 });
  page.drawText('0', { x: margin, y: base, size: 8 });
  page.drawRectangle({ x: plotX, y: base, width: plotW, height: 0.6, fill: [0.3, 0.3, 0.3] });
  c.perDay.forEach((d, i) => {
    let at = base;
    for (const s of SERIES) {
      const n = d[s.key];
      if (n === 0) continue;
      const h = (n / max) * plotH;
      page.drawRectangle({ x: plotX + i * step + 1, y: at, width: step - 2, height: h, fill: s.color });
      at += h;
    }
    if (i % 5 === 0 || i === c.perDay.length - 1)
      page.drawText(String(Number(d.day.slice(8))), {
        x: plotX + i * step + step / 2 - 3,
        y: base - 11,
        size: 8,
      });
  });
  y = base - 18;
  write('Documents per day (UTC) by outcome.', 9, 'Helvetica', [0.35, 0.35, 0.35]);
  const tone: Record<Section['tone'], Rgb> = {
    good: [0.18, 0.48, 0.27],
    attention: [0.71, 0.34, 0.11],
    info: [0.33, 0.33, 0.33],
  };
  for (const s of sections(c)) {
    y -= 8;
    need(40);
    write(s.title, 12, 'Helvetica-Bold');
    write(s.verdict, 10, 'Helvetica-Bold', tone[s.tone]);
    for (const line of s.lines) write(line.trim(), 9, 'Helvetica', undefined, line.startsWith(' ') ? 24 : 10);
  }
  y -= 8;
  write("Digest of the month's rows", 12, 'Helvetica-Bold');
  write(`SHA-256 ${c.rows.sha256}`, 9);
  write(
    `over ${c.rows.count} rows of the documents view (${c.rows.columns.length} columns). Re-verify with: npm run close -- --verify --month ${c.month}`,
    9,
  );
  return writer.save();
}
