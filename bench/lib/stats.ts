export const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
