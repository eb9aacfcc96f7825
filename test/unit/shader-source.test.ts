import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { assembleShader, defaultShaderLoader, type ShaderLoader } from '../../src/gpu/shader-source.js';

const fake =
  (files: Record<string, string>): ShaderLoader =>
  async (f) => {
    if (!(f in files)) throw new Error(`no ${f}`);
    return files[f];
  };

describe('shader includes', () => {
  it('replaces each //#include line by the file, nested includes alike, each file once', async () => {
    const load = fake({
      'a.wgsl': 'fn a() {}\n//#include b.wgsl\n//#include c.wgsl\nfn main() {}',
      'b.wgsl': '//#include c.wgsl\nfn b() {}',
      'c.wgsl': 'fn c() {}',
    });
    expect(await assembleShader('a.wgsl', load)).toBe('fn a() {}\nfn c() {}\nfn b() {}\nfn main() {}');
  });

  it('a shader that includes itself, directly or not, ends', async () => {
    const load = fake({ 'a.wgsl': '//#include b.wgsl\nfn a() {}', 'b.wgsl': '//#include a.wgsl\nfn b() {}' });
    expect(await assembleShader('a.wgsl', load)).toBe('fn b() {}\nfn a() {}');
  });

  it('every shader in shaders/ assembles from disk with its includes resolved, the weight readers written once', async () => {
    const files = readdirSync(new URL('../../shaders/', import.meta.url)).filter((f) => f.endsWith('.wgsl'));
    const readers = readFileSync(new URL('../../shaders/weights.wgsl', import.meta.url), 'utf8');
    for (const f of files) {
      const code = await assembleShader(f, defaultShaderLoader);
      expect(code, f).not.toMatch(/^\s*\/\/#include/m);
      expect(code.split('fn rowWords(').length - 1, f).toBe(
        f === 'weights.wgsl' ||
          /\/\/#include (weights|weight_tiles|product)\.wgsl/.test(
            readFileSync(new URL(`../../shaders/${f}`, import.meta.url), 'utf8'),
          )
          ? 1
          : 0,
      );
    }
    for (const f of ['matmul.wgsl', 'matvec.wgsl', 'encoder_linear.wgsl'])
      expect(await assembleShader(f, defaultShaderLoader), f).toContain(readers.trim());
  });
});
