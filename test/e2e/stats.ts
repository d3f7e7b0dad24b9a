/**
 * Pearson's chi-square goodness-of-fit test for the e2e spread assertions: the p-value of
 * observed counts against expected shares, through the regularised upper incomplete gamma
 * function (series below a+1, continued fraction above; Numerical Recipes §6.2 method,
 * written from the formulas).
 */

export function chiSquareP(observed: readonly number[], shares: readonly number[]): number {
  const total = observed.reduce((a, b) => a + b, 0);
  const sum = shares.reduce((a, b) => a + b, 0);
  let x2 = 0;
  for (let i = 0; i < observed.length; i++) {
    const expected = (total * shares[i]!) / sum;
    x2 += (observed[i]! - expected) ** 2 / expected;
  }
  return upperGammaQ((observed.length - 1) / 2, x2 / 2);
}

function logGamma(x: number): number {
  // Lanczos approximation, g = 7
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0]!;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

function upperGammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  if (x < a + 1) {
    let sum = 1 / a;
    let term = sum;
    for (let n = 1; n < 500; n++) {
      term *= x / (a + n);
      sum += term;
      if (Math.abs(term) < Math.abs(sum) * 1e-15) break;
    }
    return 1 - sum * Math.exp(-x + a * Math.log(x) - logGamma(a));
  }
  let b = x + 1 - a;
  let c = 1 / 1e-300;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 500; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (Math.abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return Math.exp(-x + a * Math.log(x) - logGamma(a)) * h;
}

/**
 * The spread assertion of the e2e tests: counts fit the shares when p > alpha. A fair
 * spread still fails one sample in 1/alpha, so a failing first sample is followed by one
 * fresh, independent sample that decides: a fair spread fails both with probability
 * alpha² (1 in 10,000), a skewed one fails both. Returns a message when it does not fit.
 */
export async function spreadProblem(
  first: readonly number[],
  shares: readonly number[],
  again: () => Promise<readonly number[]>,
  alpha = 0.01,
): Promise<string | undefined> {
  const p1 = chiSquareP(first, shares);
  if (p1 > alpha) return undefined;
  const second = await again();
  const p2 = chiSquareP(second, shares);
  if (p2 > alpha) return undefined;
  return `counts ${JSON.stringify(first)} (p=${p1.toPrecision(3)}) and ${JSON.stringify(second)} (p=${p2.toPrecision(3)}) do not fit shares ${JSON.stringify(shares)}`;
}
