/**
 * Compute pipelines cached by (shader file, entry point, constants). Each shader is
 * specialised by a small prelude of WGSL `const` declarations derived from the model
 * config (shapes, eps, page size), so workgroup arrays can be sized by them and no
 * shape is written into a shader. No codegen beyond that prelude and the sources'
 * `//#include` lines (shader-source.ts), which are part of the file the key names.
 */
import type { ShaderLoader } from './shader-source.js';
import { assembleShader, defaultShaderLoader } from './shader-source.js';
import type { GpuContext } from './device.js';

/** An integer becomes `u32`, `{ f32 }` an `f32`, a boolean a `bool`. */
export type ConstValue = number | boolean | { f32: number };
export type Constants = Record<string, ConstValue>;

export function prelude(constants: Constants): string {
  const lines: string[] = [];
  for (const name of Object.keys(constants).sort()) {
    const v = constants[name];
    if (typeof v === 'boolean') lines.push(`const ${name}: bool = ${v};`);
    else if (typeof v === 'number') {
      if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`constant ${name}=${v} is not a u32`);
      lines.push(`const ${name}: u32 = ${v}u;`);
    } else {
      if (!Number.isFinite(v.f32)) throw new RangeError(`constant ${name}=${v.f32} is not finite`);
      lines.push(`const ${name}: f32 = ${v.f32.toExponential(9)}f;`);
    }
  }
  return lines.join('\n') + '\n';
}

export class PipelineCache {
  private readonly pipelines = new Map<string, Promise<GPUComputePipeline>>();
  private readonly sources = new Map<string, Promise<string>>();
  private compiled = 0;
  /** Called as each pipeline asked for is ready: how many are, of how many asked for so far. */
  onCompiled?: (compiled: number, requested: number) => void;

  constructor(
    readonly ctx: GpuContext,
    private readonly load: ShaderLoader = defaultShaderLoader,
  ) {}

  get size(): number {
    return this.pipelines.size;
  }

  get(file: string, entry: string, constants: Constants): Promise<GPUComputePipeline> {
    const key = `${file}|${entry}|${prelude(constants)}`;
    let p = this.pipelines.get(key);
    if (!p) {
      p = this.compile(file, entry, constants);
      p.then(
        () => this.onCompiled?.(++this.compiled, this.pipelines.size),
        () => this.pipelines.delete(key),
      );
      this.pipelines.set(key, p);
    }
    return p;
  }

  private source(file: string): Promise<string> {
    let s = this.sources.get(file);
    if (!s) {
      s = assembleShader(file, this.load);
      this.sources.set(file, s);
    }
    return s;
  }

  private async compile(file: string, entry: string, constants: Constants): Promise<GPUComputePipeline> {
    this.ctx.check();
    const code = prelude(constants) + (await this.source(file));
    const device = this.ctx.device;
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ label: file, code });
    let pipeline: GPUComputePipeline | null = null;
    let failure: unknown = null;
    try {
      pipeline = await device.createComputePipelineAsync({
        label: `${file}:${entry}`,
        layout: 'auto',
        compute: { module, entryPoint: entry },
      });
    } catch (e) {
      failure = e;
    }
    const err = await device.popErrorScope();
    if (failure || err || !pipeline) {
      const info = await module.getCompilationInfo();
      const msgs = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
      const why = msgs.join('; ') || err?.message || (failure as Error)?.message || 'unknown error';
      throw new Error(`WGSL ${file} entry ${entry} failed to compile: ${why}`);
    }
    return pipeline;
  }
}
