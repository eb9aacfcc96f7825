import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../../src/errors.js';
import { exists, joinModelPath, openRanged, readBytes, readJson } from '../../src/model/files.js';
import {
  filesToFolder,
  localFile,
  localFolderBytes,
  registerLocalFolder,
  releaseLocalFolder,
} from '../../src/model/local-folder.js';

/** A Blob that records every slice taken of it, to show a ranged read never reads the file whole. */
class CountingBlob extends Blob {
  readonly slices: [number, number][] = [];
  override slice(start?: number, end?: number, type?: string): Blob {
    this.slices.push([start ?? 0, end ?? this.size]);
    return super.slice(start, end, type);
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    throw new Error('read whole');
  }
}

const shardBytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 255);

function folder() {
  const shard = new CountingBlob([shardBytes]);
  const base = registerLocalFolder('model', [
    ['config.json', new File(['{"model_type":"qwen2_audio"}'], 'config.json')],
    ['model-00001-of-00002.safetensors', shard],
    ['./sub//tokenizer.json', new File(['{}'], 'tokenizer.json')],
  ]);
  return { base, shard };
}

describe('a picked folder serves the model-file calls', () => {
  it('ranged reads slice only the range asked for', async () => {
    const { base, shard } = folder();
    const f = await openRanged(joinModelPath(base, 'model-00001-of-00002.safetensors'));
    expect(f.size).toBe(1000);
    expect(await f.read(10, 5)).toEqual(shardBytes.slice(10, 15));
    expect(await f.read(990, 10)).toEqual(shardBytes.slice(990, 1000));
    expect((await f.read(0, 0)).byteLength).toBe(0);
    expect(shard.slices).toEqual([
      [10, 15],
      [990, 1000],
      [0, 0],
    ]);
    // The page's progress readout: the bytes served, against the folder's size.
    expect(localFolderBytes(base)).toEqual({ read: 15, total: 1000 + 28 + 2 });
    await f.close();
  });

  it('a range past the end fails naming the file', async () => {
    const { base } = folder();
    const f = await openRanged(joinModelPath(base, 'model-00001-of-00002.safetensors'));
    await expect(f.read(995, 10)).rejects.toThrow(/model-00001-of-00002\.safetensors.*truncated/);
  });

  it('reads JSON and bytes, answers exists, and normalises paths', async () => {
    const { base } = folder();
    expect(await readJson(joinModelPath(base, 'config.json'))).toEqual({ model_type: 'qwen2_audio' });
    expect(await exists(joinModelPath(base, 'config.json'))).toBe(true);
    expect(await exists(joinModelPath(base, 'heads.json'))).toBe(false);
    expect(new TextDecoder().decode(await readBytes(joinModelPath(base, 'sub/tokenizer.json')))).toBe('{}');
  });

  it('a missing file is a ModelLoadError naming it and the folder', async () => {
    const { base } = folder();
    const err = await readBytes(joinModelPath(base, 'model.safetensors')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(String((err as Error).message)).toMatch(/model\.safetensors.*not in the chosen folder \(model\)/);
    await expect(openRanged(joinModelPath(base, 'nope.safetensors'))).rejects.toBeInstanceOf(ModelLoadError);
  });

  it('a released folder no longer serves files', async () => {
    const { base } = folder();
    releaseLocalFolder(base);
    expect(await exists(joinModelPath(base, 'config.json'))).toBe(false);
    expect(localFile('/models/x/config.json')).toBeUndefined();
  });

  it("a directory input's files lose the chosen folder's name", () => {
    const withPath = (name: string, path: string) => Object.assign(new File(['x'], name), { webkitRelativePath: path });
    const { name, files } = filesToFolder([
      withPath('config.json', 'qwen2_audio/config.json'),
      withPath('a.json', 'qwen2_audio/sub/a.json'),
    ]);
    expect(name).toBe('qwen2_audio');
    expect(files.map(([p]) => p)).toEqual(['config.json', 'sub/a.json']);
    expect(filesToFolder([new File(['x'], 'config.json')]).files[0][0]).toBe('config.json');
  });
});
