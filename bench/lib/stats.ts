export const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

// The p-th percentile (0–100, nearest rank) of xs; xs is sorted in place.
export function percentile(xs: number[], p: number): number {
  xs.sort((a, b) => a - b);
  return xs[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))]!;
}

// The slope of the least-squares line through (x, y) points.
export function slope(points: { x: number; y: number }[]): number {
  const mx = mean(points.map((p) => p.x));
  const my = mean(points.map((p) => p.y));
  const num = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0);
  const den = points.reduce((a, p) => a + (p.x - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}
