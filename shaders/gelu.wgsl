// GELU (erf form, as PyTorch's nn.GELU()), for the encoder's conv and linear kernels.

fn gelu(x: f32) -> f32 { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }

// erf for f32 (WGSL has none): erf(a) = 2/√π·e^{-a²}·Σ 2ⁿa^{2n+1}/(2n+1)!!, a series of
// positive terms (no cancellation) that holds f32 rounding up to a = 4, where erf rounds
// to 1 in f32 (erfc(4) ≈ 1.5e-8). Abramowitz–Stegun 7.1.26 would be 1.5e-7 off absolutely.
fn erf(x: f32) -> f32 {
  let a = abs(x);
  var r = 1.0;
  if (a < 4.0) {
    let a2 = a * a;
    var term = a;
    var sum = a;
    for (var n = 1u; n < 64u; n++) {
      term *= 2.0 * a2 / f32(2u * n + 1u);
      sum += term;
      if (term < 1e-8 * sum) { break; }
    }
    r = 1.1283791670955126 * exp(-a2) * sum;
  }
  return select(r, -r, x < 0.0);
}
