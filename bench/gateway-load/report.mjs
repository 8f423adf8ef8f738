#!/usr/bin/env node
// Turns one run of run.sh (its work directory) into results.md, results.json and rps.svg in
// RESULTS_DIR, and prints the markdown. No dependencies.
//
//   node report.mjs WORK_DIR RESULTS_DIR
//
// Per cell (side, workload, concurrency), from oha's JSON and what run.sh recorded:
// - rps: oha's requests/s over the measured window;
// - p50, p99: oha's latency percentiles of every response;
// - errors: non-2xx responses + transport errors (oha's errorDistribution) + 2xx responses that
//   did not reach the provider (each successful run makes exactly one provider call, so
//   fewer provider requests than 2xx answers means runs that failed inside a 200);
// - peak MiB: VmHWM of the server process (summed over its children), read at the end of the
//   cell; the sampled RSS peak is in results.json;
// - CPU ms/request: the server's user + system CPU time over the measured window / requests.

import fs from 'node:fs';
import path from 'node:path';

const [workDir, resultsDir] = process.argv.slice(2);
if (!workDir || !resultsDir) {
  console.error('usage: node report.mjs WORK_DIR RESULTS_DIR');
  process.exit(2);
}

const read = (name) => {
  try {
    return fs.readFileSync(path.join(workDir, name), 'utf8');
  } catch {
    return '';
  }
};

const SIDES = [
  { key: 'oma-host', label: 'oma-host serve (oma_gateway.wasm)', short: 'oma-host', color: '#1f6feb' },
  { key: 'oma-node', label: 'OMA on Node (node:http)', short: 'OMA', color: '#d1242f' },
  { key: 'litellm', label: "LiteLLM's proxy", short: 'LiteLLM', color: '#8250df' },
];

const machine = Object.fromEntries(
  read('machine.txt')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const i = line.indexOf(': ');
      return [line.slice(0, i), line.slice(i + 2)];
    }),
);
const CORES = Number(machine.cores) || 1;
// A cell whose window saw more than this share of the machine busy with other work is marked.
const DISTURBED = 0.1;

// The cells of a JSON-lines file, each with the oha report it names (`{}` when oha failed:
// no figures).
const readCells = (file) =>
  read(file)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .map((cell) => {
      let oha = {};
      try {
        oha = JSON.parse(fs.readFileSync(cell.oha, 'utf8'));
      } catch {
        /* no figures */
      }
      return [cell, oha];
    });

const cells = readCells('cells.jsonl')
  .map(([cell, oha]) => {
    const codes = oha.statusCodeDistribution ?? {};
    const ok = Object.entries(codes)
      .filter(([code]) => code.startsWith('2'))
      .reduce((a, [, n]) => a + n, 0);
    const non2xx = Object.entries(codes)
      .filter(([code]) => !code.startsWith('2'))
      .reduce((a, [, n]) => a + n, 0);
    const transport = Object.values(oha.errorDistribution ?? {}).reduce((a, n) => a + n, 0);
    const missing = Math.max(0, ok - cell.provider_requests);
    const requests = ok + non2xx;
    const lat = oha.latencyPercentiles ?? {};
    const ms = (s) => (typeof s === 'number' ? s * 1000 : null);
    return {
      side: cell.side,
      workload: cell.workload,
      concurrency: cell.concurrency,
      rps: oha.summary?.requestsPerSec ?? null,
      p50_ms: ms(lat.p50),
      p99_ms: ms(lat.p99),
      requests,
      ok_2xx: ok,
      non_2xx: non2xx,
      transport_errors: transport,
      not_at_provider: missing,
      errors: non2xx + transport + missing,
      error_kinds: { ...codes, ...(oha.errorDistribution ?? {}) },
      provider_requests: cell.provider_requests,
      provider_connections: cell.provider_connections ?? null,
      provider_cpu_ms_per_request:
        requests > 0 && cell.provider_cpu_ticks != null ? (cell.provider_cpu_ticks / cell.clk_tck) * 1000 / requests : null,
      probe_after: cell.probe_after,
      peak_mib: cell.vm_hwm_kb / 1024,
      rss_peak_mib: cell.rss_peak_kb / 1024,
      cpu_ms_per_request: requests > 0 ? (cell.cpu_ticks / cell.clk_tck) * 1000 / requests : null,
      load_before: cell.load_before,
      // The CPU the rest of the machine used during the window (not the server, the provider or
      // the load generator), as a share of all cores: other tenants' work.
      others_cpu_share: othersShare(cell),
    };
  });

function othersShare(cell) {
  if (cell.machine_busy_ticks == null || !cell.wall_s) return null;
  const tck = cell.clk_tck;
  const ours = cell.cpu_ticks / tck + (cell.provider_cpu_ticks ?? 0) / tck + (cell.oha_cpu_s ?? 0);
  const busy = cell.machine_busy_ticks / tck;
  return Math.max(0, busy - ours) / (cell.wall_s * CORES);
}

if (cells.length === 0) {
  console.error(`report: no cells in ${workDir}/cells.jsonl`);
  process.exit(1);
}

const loadavg = read('loadavg.txt').split('\n').filter(Boolean);
const notes = read('notes.txt').split('\n').filter(Boolean);

const workloads = [...new Set(cells.map((c) => c.workload))];
const concurrencies = [...new Set(cells.map((c) => c.concurrency))].sort((a, b) => a - b);
const find = (side, w, c) => cells.find((x) => x.side === side && x.workload === w && x.concurrency === c);

// --- Markdown ---
const f0 = (x) => (x == null ? '–' : Math.round(x).toLocaleString('en-US'));
const f1 = (x) => (x == null ? '–' : x >= 100 ? Math.round(x).toString() : x.toFixed(1));
const f2 = (x) => (x == null ? '–' : x >= 10 ? x.toFixed(1) : x.toFixed(2));

const rows = [];
let goalRows = 0;
let goalMet = 0;
let moonshot = 0;
for (const w of workloads) {
  for (const c of concurrencies) {
    const h = find('oma-host', w, c);
    const o = find('oma-node', w, c);
    const ratio = h?.rps && o?.rps ? h.rps / o.rps : null;
    let goal = '';
    if (ratio != null && h.p99_ms != null && o.p99_ms != null) {
      goalRows += 1;
      const met = ratio >= 3 && h.p99_ms <= o.p99_ms && h.errors === 0;
      if (met) goalMet += 1;
      if (ratio >= 10 && h.p99_ms <= o.p99_ms && h.errors === 0) moonshot += 1;
      goal = met ? 'yes' : 'no';
    }
    const mark = (x) => (x.others_cpu_share != null && x.others_cpu_share > DISTURBED ? ' †' : '');
    const side = (x) => (x ? [f0(x.rps) + mark(x), f2(x.p50_ms), f2(x.p99_ms), String(x.errors), f1(x.peak_mib)] : ['–', '–', '–', '–', '–']);
    if (o) rows.push([w, String(c), ...side(h), ...side(o), ratio == null ? '–' : `${ratio.toFixed(2)}x`, goal]);
  }
}

const head = [
  'workload', 'conc.',
  'oma-host rps', 'p50 ms', 'p99 ms', 'errors', 'peak MiB',
  'OMA rps', 'p50 ms', 'p99 ms', 'errors', 'peak MiB',
  'rps ratio', '≥3x, p99 ≤',
];
const align = head.map((_, i) => (i < 2 ? '---' : '---:'));
const table = [head, align, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');

// The gateway against LiteLLM's proxy: goal at least 5x its requests/s at an equal or better p99,
// no errors, at a tenth of its peak memory.
const llRows = [];
let llGoalRows = 0;
let llGoalMet = 0;
for (const w of workloads) {
  for (const c of concurrencies) {
    const h = find('oma-host', w, c);
    const l = find('litellm', w, c);
    if (!l) continue;
    const ratio = h?.rps && l?.rps ? h.rps / l.rps : null;
    const mem = h?.peak_mib && l?.peak_mib ? l.peak_mib / h.peak_mib : null;
    let goal = '';
    if (ratio != null && h.p99_ms != null && l.p99_ms != null) {
      llGoalRows += 1;
      const met = ratio >= 5 && h.p99_ms <= l.p99_ms && h.errors === 0 && mem >= 10;
      if (met) llGoalMet += 1;
      goal = met ? 'yes' : 'no';
    }
    const mark = (x) => (x.others_cpu_share != null && x.others_cpu_share > DISTURBED ? ' †' : '');
    const side = (x) => (x ? [f0(x.rps) + mark(x), f2(x.p50_ms), f2(x.p99_ms), String(x.errors), f1(x.peak_mib)] : ['–', '–', '–', '–', '–']);
    llRows.push([w, String(c), ...side(h), ...side(l), ratio == null ? '–' : `${ratio.toFixed(2)}x`,
      mem == null ? '–' : `${mem.toFixed(1)}x`, f2(h?.cpu_ms_per_request), f2(l?.cpu_ms_per_request), goal]);
  }
}
const llHead = [
  'workload', 'conc.',
  'oma-host rps', 'p50 ms', 'p99 ms', 'errors', 'peak MiB',
  'LiteLLM rps', 'p50 ms', 'p99 ms', 'errors', 'peak MiB',
  'rps ratio', 'memory ratio', 'oma-host CPU ms/req', 'LiteLLM CPU ms/req', '≥5x, p99 ≤, ≤1/10 memory',
];
const llTable = llRows.length
  ? [llHead, llHead.map((_, i) => (i < 2 ? '---' : '---:')), ...llRows].map((r) => `| ${r.join(' | ')} |`).join('\n')
  : '';

const cpuHead = ['workload', 'conc.', 'oma-host CPU ms/req', 'OMA CPU ms/req', 'ratio', 'oma-host requests', 'OMA requests', 'others\' CPU, oma-host / OMA window'];
const cpuRows = [];
for (const w of workloads) {
  for (const c of concurrencies) {
    const h = find('oma-host', w, c);
    const o = find('oma-node', w, c);
    const pct = (x) => (x?.others_cpu_share == null ? '–' : `${(x.others_cpu_share * 100).toFixed(0)}%`);
    const cr = h?.cpu_ms_per_request && o?.cpu_ms_per_request ? `${(o.cpu_ms_per_request / h.cpu_ms_per_request).toFixed(2)}x` : '–';
    cpuRows.push([w, String(c), f2(h?.cpu_ms_per_request), f2(o?.cpu_ms_per_request), cr, f0(h?.requests), f0(o?.requests), `${pct(h)} / ${pct(o)}`]);
  }
}
const cpuTable = [cpuHead, cpuHead.map((_, i) => (i < 2 ? '---' : '---:')), ...cpuRows]
  .map((r) => `| ${r.join(' | ')} |`)
  .join('\n');

// The provider alone, straight from the load generator.
const providerCells = readCells('provider.jsonl')
  .map(([cell, oha]) => {
    return {
      workload: cell.workload,
      concurrency: cell.concurrency,
      rps: oha.summary?.requestsPerSec ?? null,
      p50_ms: typeof oha.latencyPercentiles?.p50 === 'number' ? oha.latencyPercentiles.p50 * 1000 : null,
    };
  });
const providerLine = providerCells.length
  ? `The loopback provider alone (the load generator posting each workload's body straight to it, ${providerCells[0].concurrency} connections, 3 s): ${providerCells.map((p) => `${p.workload} ${f0(p.rps)} rps`).join(', ')}.`
  : '';

const machineLines = Object.entries(machine).map(([k, v]) => `- ${k}: ${v}`);
const md = `# Gateway load test results

${cells.some((x) => x.side === 'oma-node') ? `## The gateway and OMA on Node\n\n${table}\n` : ''}
${llTable ? `## The gateway and LiteLLM's proxy\n\n${llTable}\n\nGoal (at least 5x LiteLLM's requests/s at an equal or better p99, no errors, at most a tenth of its peak memory): met on ${llGoalMet} of ${llGoalRows} rows. Memory ratio: LiteLLM's peak over the gateway's.\n` : ''}

${cells.some((x) => x.others_cpu_share > DISTURBED) ? `† other programs kept more than ${DISTURBED * 100}% of the machine busy during this cell's window.\n\n` : ''}${goalRows > 0 ? `Goal against OMA (at least 3x OMA's requests/s at equal or better p99, no errors): met on ${goalMet} of ${goalRows} rows; 10x on ${moonshot}.` : llTable ? '' : 'Only one side was measured: no ratio.'}

${providerLine}

Server CPU time per request (user + system, over the measured window; the load generator and the
provider are not counted; "ratio" is OMA's over the gateway's), and the share of the machine other
programs used during each window (all CPU time minus the server's, the provider's and the load
generator's):

${cpuTable}

Machine and run:

${machineLines.join('\n')}
- load average (1, 5, 15 min): ${loadavg.join('; ')}
${notes.map((n) => `- note: ${n}`).join('\n')}
`.replace(/\n{3,}/g, '\n\n');

// --- SVG: one panel per workload, requests/s per concurrency, both sides ---
function svg() {
  const panelW = 300;
  const panelH = 240;
  const top = 70;
  const left = 60;
  const gap = 40;
  const width = left + workloads.length * panelW + (workloads.length - 1) * gap + 20;
  const height = top + panelH + 70;
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${left}" y="22" font-size="16" font-weight="bold">Requests/s per workload and concurrency (higher is better)</text>`);
  let lx = left;
  for (const s of SIDES) {
    out.push(`<rect x="${lx}" y="34" width="12" height="12" fill="${s.color}"/>`);
    out.push(`<text x="${lx + 18}" y="44">${esc(s.label)}</text>`);
    lx += 18 + s.label.length * 6.5 + 24;
  }
  out.push(`<text x="${lx}" y="44" fill="#555">label: rps ratio oma-host / OMA</text>`);
  workloads.forEach((w, wi) => {
    const x0 = left + wi * (panelW + gap);
    const max = Math.max(1, ...cells.filter((c) => c.workload === w).map((c) => c.rps ?? 0));
    const step = niceStep(max / 4);
    const yMax = Math.ceil(max / step) * step;
    const y = (v) => top + panelH - (v / yMax) * panelH;
    for (let v = 0; v <= yMax + 1e-9; v += step) {
      out.push(`<line x1="${x0}" x2="${x0 + panelW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e5e5"/>`);
      out.push(`<text x="${x0 - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#555">${f0(v)}</text>`);
    }
    out.push(`<line x1="${x0}" x2="${x0 + panelW}" y1="${top + panelH}" y2="${top + panelH}" stroke="#333"/>`);
    const groupW = panelW / concurrencies.length;
    const barW = Math.min(36, (groupW - 20) / SIDES.length);
    concurrencies.forEach((c, ci) => {
      const gx = x0 + ci * groupW + (groupW - barW * SIDES.length) / 2;
      SIDES.forEach((s, si) => {
        const cell = find(s.key, w, c);
        if (!cell?.rps) return;
        const bx = gx + si * barW;
        out.push(`<rect x="${bx.toFixed(1)}" y="${y(cell.rps).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(top + panelH - y(cell.rps)).toFixed(1)}" fill="${s.color}"><title>${esc(`${s.short} ${w} c=${c}: ${f0(cell.rps)} rps, p50 ${f2(cell.p50_ms)} ms, p99 ${f2(cell.p99_ms)} ms`)}</title></rect>`);
        out.push(`<text x="${(bx + (barW - 2) / 2).toFixed(1)}" y="${(y(cell.rps) - 3).toFixed(1)}" text-anchor="middle" font-size="9" fill="#333">${f0(cell.rps)}</text>`);
      });
      const h = find('oma-host', w, c);
      const o = find('oma-node', w, c);
      if (h?.rps && o?.rps) {
        out.push(`<text x="${(x0 + ci * groupW + groupW / 2).toFixed(1)}" y="${top - 8}" text-anchor="middle" font-weight="bold" fill="#222">${(h.rps / o.rps).toFixed(2)}x</text>`);
      }
      out.push(`<text x="${(x0 + ci * groupW + groupW / 2).toFixed(1)}" y="${top + panelH + 16}" text-anchor="middle">c=${c}</text>`);
    });
    out.push(`<text x="${x0 + panelW / 2}" y="${top + panelH + 40}" text-anchor="middle" font-weight="bold">${esc(w)}</text>`);
  });
  const foot = [machine.cores && `${machine.cores} cores`, machine.node && `Node ${machine.node}`, machine.oma, machine.duration]
    .filter(Boolean)
    .join(' · ');
  out.push(`<text x="${left}" y="${height - 8}" fill="#555" font-size="11">${esc(foot)}</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

fs.mkdirSync(resultsDir, { recursive: true });
fs.writeFileSync(path.join(resultsDir, 'results.md'), md);
fs.writeFileSync(
  path.join(resultsDir, 'results.json'),
  `${JSON.stringify({ machine, loadavg, notes, provider: providerCells, cells }, null, 2)}\n`,
);
fs.writeFileSync(path.join(resultsDir, 'rps.svg'), svg());
process.stdout.write(md);
console.error(`report: wrote results.md, results.json and rps.svg in ${resultsDir}`);
