// The bindings of the encoder's f32 kernels (conv, layer norm, attention, avg pool; the
// linear reads packed weights and declares its own): up to four inputs, one output and
// four u32 params, whose meaning each kernel states. A kernel declares none of its own, so
// one binding set serves all; layout 'auto' keeps only the bindings a kernel reads, and
// EncoderPass (src/encoder/webgpu-kernels.ts) binds those by these numbers.
// Activations are time-major [rows, width]; the kernels use no workgroup barriers
// (unreliable or slow on CPU implementations of WebGPU).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read> in2: array<f32>;
@group(0) @binding(3) var<storage, read> in3: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;
@group(0) @binding(5) var<uniform> dims: Dims;
