// A line chart as a standalone SVG (no dependency): a bench renders its own
// samples, so the plot in bench/README is exactly what a run measured.

export interface Series {
  name: string;
  color: string;
  points: { x: number; y: number }[];
}

const W = 820;
const H = 420;
const M = { left: 64, right: 190, top: 40, bottom: 48 };

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

// A "nice" step (1, 2 or 5 × 10^n) giving about `ticks` ticks over `span`.
function step(span: number, ticks: number): number {
  const raw = span / ticks;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw) ?? raw;
}

export function lineChart(title: string, xLabel: string, yLabel: string, series: Series[]): string {
  const all = series.flatMap((s) => s.points);
  const xMax = Math.max(1e-9, ...all.map((p) => p.x));
  const yStep = step(Math.max(1, ...all.map((p) => p.y)), 6);
  const yMax = Math.ceil(Math.max(1, ...all.map((p) => p.y)) / yStep) * yStep;
  const xStep = step(xMax, 8);
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const sx = (x: number) => M.left + (x / xMax) * pw;
  const sy = (y: number) => M.top + ph - (y / yMax) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${M.left}" y="22" font-size="14" font-weight="bold">${esc(title)}</text>`,
  ];
  for (let y = 0; y <= yMax + 1e-9; y += yStep)
    out.push(
      `<line x1="${M.left}" x2="${M.left + pw}" y1="${sy(y)}" y2="${sy(y)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${sy(y) + 4}" text-anchor="end">${+y.toFixed(6)}</text>`,
    );
  for (let x = 0; x <= xMax + 1e-9; x += xStep)
    out.push(
      `<line x1="${sx(x)}" x2="${sx(x)}" y1="${M.top}" y2="${M.top + ph}" stroke="#eee"/>`,
      `<text x="${sx(x)}" y="${M.top + ph + 16}" text-anchor="middle">${+x.toFixed(6)}</text>`,
    );
  out.push(
    `<rect x="${M.left}" y="${M.top}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`,
    `<text x="${M.left + pw / 2}" y="${H - 10}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(16 ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    if (s.points.length) out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.6" points="${s.points.map((p) => `${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(" ")}"/>`);
    const ly = M.top + 8 + i * 18;
    out.push(
      `<line x1="${W - M.right + 14}" x2="${W - M.right + 34}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="3"/>`,
      `<text x="${W - M.right + 40}" y="${ly + 4}">${esc(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n");
}
